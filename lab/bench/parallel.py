"""Parallel labs benchmark (`quiclab bench parallel`): one plan run as real sweeps
(`quiclab sweep PRESET --parallel N` subprocesses) with each N in turn on this host, so the wall times are measured
side by side; each sweep with N != 1 is then judged against N = 1 with the verdicts of `quiclab compare`
(lab/stats/verdict.py), and, with `--against FOLDER`, every sweep against that committed folder too. Wall time is
the whole command's: start-up, the extra labs' bring-up and tear-down, the report.

Two uses: the default (preset parallel-check: 2 MB at 4 Mbit/s, 40 ms RTT, loss 0 and 2 %, h2 and h3, 10 repeats,
fixed seed; N = 1, 2, 3, 4) shows how the wall time scales; `--preset loss --labs 1,auto --against
results/reference/connectify-loss` times the set-up's default job (`sweep loss --parallel auto`) against one lab."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.bench import launch
from lab.errors import UsageError
from lab.report.report import judge_sweeps
from lab.results import store
from lab.run.reproduce import point_share

PRESET = "parallel-check"


@dataclass
class ParallelFigures:
    labs: int  # the labs the sweep used (read from its manifest; `auto` resolved)
    folder: str
    wall_s: float
    runs: int
    ok: int
    host_bound_attempts: int  # runs the fidelity guard set aside (and ran again)
    labs_joined_s: dict[str, float | None]  # when each lab took its first group (s after the coordinator started)
    vs_one: str = ""  # verdict tally against N = 1
    points_equivalent: str = ""
    any_differs: bool | None = None
    requested: str = ""  # what --parallel was given ("auto", or the number); "" in folders made before it existed
    preset: str = PRESET
    vs_reference: str = ""  # verdict tally against --against FOLDER
    reference_points_equivalent: str = ""
    reference_any_differs: bool | None = None
    reference: str = ""  # that folder

    @property
    def label(self) -> str:
        return f"auto ({self.labs})" if self.requested == "auto" else str(self.labs)


def _sweep(labs: str, out: Path, preset: str) -> ParallelFigures:
    t0 = time.monotonic()
    folder = launch.sweep(preset, ["--parallel", labs], out, f"the sweep with --parallel {labs}")
    wall = time.monotonic() - t0
    records = store.load_runs(folder)
    manifest = store.read_manifest(folder)
    aside = folder / store.HOST_BOUND
    set_aside = max(0, len(aside.read_text().splitlines()) - 1) if aside.exists() else 0
    joined = {k: v.get("joined_s") for k, v in (manifest.get("labs") or {}).items()}
    used = int((manifest.get("parallel") or {}).get("labs") or 1)
    return ParallelFigures(labs=used, requested=labs, preset=preset, folder=str(folder), wall_s=round(wall, 1),
                           runs=len(records),
                           ok=sum(r.status == "ok" for r in records), host_bound_attempts=set_aside,
                           labs_joined_s=joined)


def parse_labs(text: str) -> list[str]:
    """`--labs 1,2,auto` -> ["1", "2", "auto"]: each a value `sweep --parallel` takes, one of them 1 (the baseline
    every other is judged against), none twice; a bad list is one line naming it (exit 2)."""
    from lab.run import parallel as labs_rule

    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    for item in items:
        labs_rule.parse(item)  # raises the sweep's own one-line error for a bad value
    if "1" not in items or len(set(items)) != len(items):
        raise UsageError(f"invalid --labs {text!r}: allowed is a comma-separated list of --parallel values "
                         "(N or auto), each once, including 1 (the baseline)")
    return items


def run(counts: list[str], out: Path, preset: str = PRESET, against: Path | None = None) -> list[ParallelFigures]:
    out.mkdir(parents=True, exist_ok=True)
    figures = [_sweep(n, out, preset) for n in counts]
    base = next((f for f in figures if f.requested == "1"), None)
    for f in figures:
        if base is not None and f is not base:
            j = judge_sweeps(Path(base.folder), Path(f.folder))
            share = point_share(j)
            f.vs_one, f.any_differs = j.tally, j.any_differs
            f.points_equivalent = f"{share.equivalent} of {share.points}"
        if against is not None:
            j = judge_sweeps(against, Path(f.folder))
            share = point_share(j)
            f.vs_reference, f.reference_any_differs = j.tally, j.any_differs
            f.reference_points_equivalent = f"{share.equivalent} of {share.points}"
            f.reference = str(against)
    return figures


def to_json(figures: list[ParallelFigures]) -> str:
    return json.dumps([asdict(f) for f in figures], indent=2)


def load(path: Path) -> list[ParallelFigures]:
    return [ParallelFigures(**doc) for doc in json.loads(path.read_text())]


def baseline(figures: list[ParallelFigures]) -> ParallelFigures:
    """The one-lab sweep (older files have no `requested`: their N = 1 row)."""
    return next(f for f in figures if (f.requested or str(f.labs)) == "1")


def markdown(figures: list[ParallelFigures]) -> str:
    """The benchmark's table as docs/benchmarks.md quotes it (generated from parallel.json, never typed)."""
    one = baseline(figures)
    against = next((f.reference for f in figures if f.reference), "")
    head = ("| labs | wall s | x one lab | runs ok | host-bound attempts set aside | points equivalent to one lab "
            "| verdicts vs one lab (goodput, p95 time, TTFB) |")
    rule = "|---|---|---|---|---|---|---|"
    if against:
        head += f" points equivalent to {against} | verdicts vs {against} |"
        rule += "---|---|"
    lines = [head, rule]
    for f in figures:
        row = (f"| {f.label} | {f.wall_s:.0f} | {f.wall_s / one.wall_s:.2f} | {f.ok}/{f.runs} | "
               f"{f.host_bound_attempts} | {f.points_equivalent or '-'} | {f.vs_one or '-'} |")
        if against:
            row += f" {f.reference_points_equivalent or '-'} | {f.vs_reference or '-'} |"
        lines.append(row)
    return "\n".join(lines) + "\n"
