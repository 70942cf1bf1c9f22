"""Parallel labs benchmark (`quiclab bench parallel`): the same link-bound plan (preset parallel-check: 2 MB at
4 Mbit/s, 40 ms RTT, loss 0 and 2 %, h2 and h3, 10 repeats, fixed seed) run as real sweeps
(`quiclab sweep parallel-check --parallel N` subprocesses) with N = 1, 2, 3, 4 labs in turn on this host, so the
wall times are measured side by side; each sweep with N > 1 is then judged against N = 1 with the verdicts of
`quiclab compare` (lab/results/verdict.py). Wall time is the whole command's: start-up, the extra labs' bring-up
and tear-down, the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import EnvironmentProblem
from lab.results import store
from lab.results.report import judge_sweeps
from lab.run.reproduce import point_share

PRESET = "parallel-check"


@dataclass
class ParallelFigures:
    labs: int
    folder: str
    wall_s: float
    runs: int
    ok: int
    host_bound_attempts: int  # runs the fidelity guard set aside (and ran again)
    labs_joined_s: dict[str, float | None]  # when each lab took its first group (s after the coordinator started)
    vs_one: str = ""  # verdict tally against N = 1
    points_equivalent: str = ""
    any_differs: bool | None = None


def _sweep(labs: int, out: Path) -> ParallelFigures:
    before = set(out.glob(f"*-{PRESET}"))
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lab", "sweep", PRESET, "--parallel", str(labs), "--out", str(out)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                          env={**os.environ, "QUICLAB_PUSHGATEWAY_URL": "off"})
    wall = time.monotonic() - t0
    new = sorted(set(out.glob(f"*-{PRESET}")) - before)
    if done.returncode != 0 or not new:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentProblem(f"the sweep with --parallel {labs} failed (exit {done.returncode}): {tail[0]}")
    folder = new[-1]
    records = store.load_runs(folder)
    manifest = store.read_manifest(folder)
    aside = folder / store.HOST_BOUND
    set_aside = max(0, len(aside.read_text().splitlines()) - 1) if aside.exists() else 0
    joined = {k: v.get("joined_s") for k, v in (manifest.get("labs") or {}).items()}
    return ParallelFigures(labs=labs, folder=str(folder), wall_s=round(wall, 1), runs=len(records),
                           ok=sum(r.status == "ok" for r in records), host_bound_attempts=set_aside,
                           labs_joined_s=joined)


def run(counts: list[int], out: Path) -> list[ParallelFigures]:
    out.mkdir(parents=True, exist_ok=True)
    figures = [_sweep(n, out) for n in counts]
    base = next((f for f in figures if f.labs == 1), None)
    if base is not None:
        for f in figures:
            if f is base:
                continue
            j = judge_sweeps(Path(base.folder), Path(f.folder))
            share = point_share(j)
            f.vs_one, f.any_differs = j.tally, j.any_differs
            f.points_equivalent = f"{share.equivalent} of {share.points}"
    return figures


def to_json(figures: list[ParallelFigures]) -> str:
    return json.dumps([asdict(f) for f in figures], indent=2)


def load(path: Path) -> list[ParallelFigures]:
    return [ParallelFigures(**doc) for doc in json.loads(path.read_text())]


def markdown(figures: list[ParallelFigures]) -> str:
    """The benchmark's table as docs/benchmarks.md quotes it (generated from parallel.json, never typed)."""
    one = next(f for f in figures if f.labs == 1)
    lines = ["| labs | wall s | x one lab | runs ok | host-bound attempts set aside | points equivalent to one lab "
             "| verdicts vs one lab (goodput, p95 time, TTFB) |", "|---|---|---|---|---|---|---|"]
    for f in figures:
        lines.append(f"| {f.labs} | {f.wall_s:.0f} | {f.wall_s / one.wall_s:.2f} | {f.ok}/{f.runs} | "
                     f"{f.host_bound_attempts} | {f.points_equivalent or '-'} | {f.vs_one or '-'} |")
    return "\n".join(lines) + "\n"
