"""../shared beside the clone (seeds, recorded traces): here and in CI it is there; where it is not, a test that
needs it cannot run and says what is missing (in CI, where it must be there, that is a failure)."""

from __future__ import annotations

import os

import pytest

from lab import config
from lab.link.spec import recorded_pairs
from lab.plan import presets
from lab.plan.scenario import Scenario

#: the recorded trace pairs the presets name (../shared/traces/README.mahimahi)
LTE_PAIRS = ("ATT-LTE-driving-2016", "TMobile-LTE-short")


def require_traces() -> None:
    missing = sorted(set(LTE_PAIRS) - set(recorded_pairs()))
    if missing:
        what = f"the recorded trace pairs {missing} are not in {config.TRACES_DIR}"
        if os.environ.get("CI"):
            pytest.fail(f"{what} (CI checks out ../shared beside the clone)")
        pytest.skip(f"{what} (../shared beside the clone)")


def uses_traces(preset: str) -> bool:
    """Whether a preset's file names recorded trace pairs (`traces = ...`)."""
    text = (presets.PRESET_DIR / f"{presets.resolve(preset)}.toml").read_text(encoding="utf-8")
    return any(line.strip().startswith("traces") for line in text.splitlines())


def get_preset(name: str) -> Scenario:
    """presets.get, after require_traces for a preset that needs them."""
    if uses_traces(name):
        require_traces()
    return presets.get(name)
