"""Per-run overhead benchmark: what a sweep of small objects spends around its transfers.

One small-object scenario (10 kB, 20 ms RTT, 100 Mbit/s, h1/h2/h3 x N repeats, curl -> nginx) is run as real
sweeps (`quiclab sweep` subprocesses), in turn on three paths, so they are measured side by side on this noisy
host: "agent" (the default: the client agent, which keeps the next fetch's curl started), "agent-nospare" (the
agent starting curl with each fetch, QUICLAB_CURL_SPARE=off) and "exec" (one `docker exec` per run,
QUICLAB_AGENT=off). Per sweep: the median per-run lab
overhead (runs.csv overhead_s: a run's wall time minus the client's own time_total), the sum of transfer times,
the runs' span (first run's start to the last run's end: transfers plus everything the lab does between them) and
the whole command's wall time (start-up and report included).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.agent import ENV_AGENT
from lab.bench import host
from lab.config import ENV_CURL_SPARE
from lab.errors import EnvironmentProblem
from lab.quantiles import median, quantile
from lab.results import store

SCENARIO = """
name = "overhead-{mode}"
description = "per-run overhead benchmark ({mode})"
sizes = ["{size}"]
repeats = {repeats}
protocols = ["h1", "h2", "h3"]
[link]
rtt = "20ms"
rate = "100mbit"
"""


@dataclass
class SweepFigures:
    mode: str  # agent | agent-nospare | exec
    runs: int
    ok: int
    overhead_median_ms: float
    overhead_p90_ms: float
    transfers_s: float
    span_s: float
    span_over_transfers: float
    command_s: float
    steal_pct: float


def figures(folder: Path, mode: str, command_s: float, steal_pct: float) -> SweepFigures:
    runs = sorted(store.load_runs(folder), key=lambda r: r.order)
    if not runs:
        raise EnvironmentProblem(f"the {mode} sweep in {folder} recorded no run")
    over = sorted(r.overhead_s for r in runs if r.overhead_s is not None)
    transfers = sum(r.total_s or 0.0 for r in runs)
    starts = [dt.datetime.fromisoformat(r.started_at) for r in runs]
    span = (max(starts) - min(starts)).total_seconds() + runs[-1].wall_s
    return SweepFigures(mode=mode, runs=len(runs), ok=sum(r.status == "ok" for r in runs),
                        overhead_median_ms=median(over) * 1000,
                        overhead_p90_ms=quantile(over, 0.9) * 1000,
                        transfers_s=transfers, span_s=span, span_over_transfers=span / transfers if transfers else 0,
                        command_s=command_s, steal_pct=steal_pct)


#: The paths, and the environment of each one's sweep.
MODES = {"agent": {ENV_AGENT: "on", ENV_CURL_SPARE: "on"},
         "agent-nospare": {ENV_AGENT: "on", ENV_CURL_SPARE: "off"},
         "exec": {ENV_AGENT: "off", ENV_CURL_SPARE: "on"}}


def run(size: str, repeats: int, rounds: int) -> list[SweepFigures]:
    out: list[SweepFigures] = []
    names = list(MODES)
    with tempfile.TemporaryDirectory(prefix="quiclab-bench-") as tmp:
        for i in range(rounds):
            for mode in names[i % len(names):] + names[:i % len(names)]:  # each path first in turn
                scenario = Path(tmp) / f"{mode}-{i}.toml"
                scenario.write_text(SCENARIO.format(mode=mode, size=size, repeats=repeats))
                results = Path(tmp) / f"out-{mode}-{i}"
                env = {**os.environ, **MODES[mode]}
                t0 = time.monotonic()
                with host.StealMeter() as meter:
                    done = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario),
                                           "--out", str(results)], env=env, capture_output=True, text=True,
                                          timeout=1800, check=False)
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                    raise EnvironmentProblem(f"the {mode} sweep failed: {last}")
                folder = next(p for p in results.iterdir() if p.is_dir())
                out.append(figures(folder, mode, time.monotonic() - t0, meter.steal_pct))
    return out


@dataclass
class ClientStart:
    """What of a run's overhead is the client's own process: `curl --version` (a curl process started, its
    libraries loaded and initialised, nothing fetched) and `true` through the client's agent, medians of N."""
    curl_version_ms: float
    agent_true_ms: float
    n: int


def client_start(n: int = 20) -> ClientStart:
    from lab import agent, config

    def median_ms(argv: list[str]) -> float:
        times = []
        for _ in range(n):
            t0 = time.monotonic()
            agent.run(config.CLIENT_CONTAINER, argv, timeout_s=10)
            times.append(time.monotonic() - t0)
        return median(times) * 1000

    agent.run(config.CLIENT_CONTAINER, ["true"], timeout_s=30)  # the agent started
    return ClientStart(curl_version_ms=median_ms(["curl", "--version"]), agent_true_ms=median_ms(["true"]), n=n)


def to_json(rows: list[SweepFigures], start: ClientStart | None = None) -> str:
    return json.dumps({"sweeps": [asdict(r) for r in rows], "client_start": asdict(start) if start else None},
                      indent=2)


def load(path: Path) -> tuple[list[SweepFigures], ClientStart | None]:
    """A committed overhead.json (what `quiclab bench overhead` writes)."""
    doc = json.loads(path.read_text())
    start = doc.get("client_start")
    return [SweepFigures(**r) for r in doc["sweeps"]], ClientStart(**start) if start else None


def markdown(rows: list[SweepFigures], start: ClientStart | None) -> str:
    """The benchmark's table as docs/benchmarks.md quotes it (generated from its json, never typed)."""
    out = ["| path | runs ok | overhead median (p90) ms | transfers s | runs' span s | span ÷ transfers "
           "| CPU steal % |",
           "|---|---|---|---|---|---|---|"]
    out += [f"| {r.mode} | {r.ok}/{r.runs} | {r.overhead_median_ms:.1f} ({r.overhead_p90_ms:.1f}) | "
            f"{r.transfers_s:.2f} | {r.span_s:.2f} | {r.span_over_transfers:.2f} | {r.steal_pct:.0f} |" for r in rows]
    if start is not None:
        out.append(f"\n`curl --version` through the agent {start.curl_version_ms:.1f} ms, `true` through the agent "
                   f"{start.agent_true_ms:.1f} ms (medians of {start.n}).")
    return "\n".join(out) + "\n"


TIMES = "\u00d7"  # the multiplication sign, as the docs write it


def sentence(small: list[SweepFigures], large: list[SweepFigures], folder: str) -> str:
    """The README's line on a run's cost: the default path's (agent) overhead and span over transfers, small and
    large objects, from the committed benchmark."""
    a = [r for r in small if r.mode == "agent"]
    b = [r for r in large if r.mode == "agent"]
    med = sorted(r.overhead_median_ms for r in a)
    spans = sorted(r.span_over_transfers for r in a)
    big = sorted(r.span_over_transfers for r in b)

    def span(v: list[float], fmt: str) -> str:
        return format(v[0], fmt) if v[0] == v[-1] or format(v[0], fmt) == format(v[-1], fmt) \
            else f"{format(v[0], fmt)}-{format(v[-1], fmt)}"

    return (f"A run costs {span(med, '.1f')} ms around its transfer (median per sweep; the client agent keeps the "
            f"next run's curl started), so a sweep of 10 kB objects spends {span(spans, '.2f')}{TIMES} its transfer "
            f"time and a sweep of 10 MB objects {span(big, '.3f')}{TIMES} ({folder}, docs/benchmarks.md).\n")
