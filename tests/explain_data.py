"""Shared by the unit tests of `quiclab explain`: the committed captured sweep (tests/data/explain/sweep: an h2 and
an h3 run with their pcaps, keys and tshark's output beside them) copied for a test, and the CLI run in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "explain"
SWEEP = DATA / "sweep"


def copied_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed sweep, with a wide terminal so that tables are not wrapped."""
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    monkeypatch.setenv("COLUMNS", "240")
    return folder


def run(args: list[str]) -> int:
    """`quiclab explain ARGS` in-process; its exit code."""
    from lab.cli import main

    try:
        main(["explain", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0
