"""Start-up benchmark (`quiclab bench startup`): the fixed cost before a sweep's first run.

`quiclab sweep quick` is launched N times in a row as real subprocesses on the running lab; for each, the wall
clock from the launch to its first run's `started_at`. The cached start-up facts (lab/run/startup_cache.py:
versions, congestion control, the shaper self-check) are cleared first, so the first sweep measures them and the
later ones show what reusing them saves."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.bench import launch
from lab.config import cache_dir
from lab.errors import EnvironmentProblem
from lab.results import store

PRESET = "quick"


@dataclass
class StartupFigures:
    sweep: int  # 1-based, in the order run
    folder: str
    first_run_s: float  # from the launch to the first run's started_at
    reused: bool  # the start-up facts came from the cache


def clear_cache() -> int:
    """Remove the cached start-up facts of every lab; returns how many files."""
    files = list(cache_dir().glob("startup-*.json"))
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)


def _one(i: int, out: Path) -> StartupFigures:
    launched = dt.datetime.now(dt.UTC)
    folder = launch.sweep(PRESET, [], out, f"sweep {i} of `quiclab sweep {PRESET}`")
    records = store.load_runs(folder)
    if not records:
        raise EnvironmentProblem(f"sweep {i} ({folder}) recorded no run")
    first = min(dt.datetime.fromisoformat(r.started_at) for r in records)
    manifest = store.read_manifest(folder).doc()
    reused = bool((manifest.get("startup_cache") or {}).get("reused"))
    return StartupFigures(sweep=i, folder=str(folder), first_run_s=round((first - launched).total_seconds(), 2),
                          reused=reused)


def run(out: Path, sweeps: int) -> list[StartupFigures]:
    out.mkdir(parents=True, exist_ok=True)
    clear_cache()
    return [_one(i + 1, out) for i in range(sweeps)]


def to_json(figures: list[StartupFigures]) -> str:
    return json.dumps([asdict(f) for f in figures], indent=2)


def load(path: Path) -> list[StartupFigures]:
    return [StartupFigures(**doc) for doc in json.loads(path.read_text())]


def markdown(figures: list[StartupFigures]) -> str:
    """The benchmark's table as docs/benchmarks.md quotes it (generated from startup.json, never typed)."""
    lines = ["| sweep | start-up facts | launch to first run s |", "|---|---|---|"]
    lines += [f"| {f.sweep} | {'reused (cache)' if f.reused else 'measured'} | {f.first_run_s:.2f} |" for f in figures]
    return "\n".join(lines) + "\n"
