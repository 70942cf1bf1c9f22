"""Built-in scenarios: TOML files beside this module, validated like any user scenario."""

from __future__ import annotations

from pathlib import Path

from lab.errors import UsageError
from lab.plan.checks import load
from lab.plan.scenario import Scenario

PRESET_DIR = Path(__file__).parent / "presets"
#: Short names used by `just sweep NAME`.
ALIASES = {
    "loss": "connectify-loss", "rtt": "connectify-rtt", "rate": "connectify-rate", "delay": "survey-delay",
    "jitter": "jitter", "size": "kth-size", "spikes": "survey-spikes", "grid": "survey-grid",
    "blackout": "stall-blackout", "stall": "server-stall",
}


def names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def resolve(name: str) -> str:
    n = ALIASES.get(name, name)
    if n not in names():
        allowed = ", ".join(names() + sorted(ALIASES))
        raise UsageError(f"unknown preset {name!r}: allowed are {allowed}")
    return n


def get(name: str) -> Scenario:
    return load(PRESET_DIR / f"{resolve(name)}.toml")
