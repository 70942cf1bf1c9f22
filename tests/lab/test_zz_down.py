"""`quiclab down` leaves no containers, networks or volumes of the lab (runs last; brings the lab back)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lab import lab

pytestmark = pytest.mark.lab


def test_down_leaves_nothing_behind(lab_up):
    try:
        p = subprocess.run([sys.executable, "-m", "lab", "down"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert lab.leftovers() == []
    finally:
        lab.up()
    assert all(s.ready for s in lab.states())
