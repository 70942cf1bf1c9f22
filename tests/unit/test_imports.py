"""Every module under lab/ imports: a stale import in a module no other test imports fails here, not in a user's
command."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[2] / "lab"
MODULES = sorted(".".join(p.relative_to(LAB.parent).with_suffix("").parts).removesuffix(".__init__")
                 for p in LAB.rglob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_it_imports(name: str):
    importlib.import_module(name)
