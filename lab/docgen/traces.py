"""The generated section of a sweep over recorded traces (block `traces-PRESET`, e.g. the `cellular` preset in
docs/results.md; issue 35 item 4): per trace x direction x size, each protocol's median transfer time with its
order-statistic CI at the level it reaches for its n, HTTP/3 against HTTP/2 and against HTTP/1.1 by the one
comparison rule (lab/stats/verdict.py judge_runs, as `quiclab compare` and the atlas: paired where the design pairs),
the trace's mean capacity over each run's own span, and the folder's trace plots linked.

Every figure comes from the folder: runs.csv (times; `link`: each direction's trace as count, period and SHA-256;
`delivered`: each run's start on the trace), manifest.json (the scenario, which names the trace files) and
plots/. Failed and timed-out runs are censored at their own end (a time above it), counted, never dropped. Each run
is a download: the `.down` trace carries the transfer and is the direction the times measure; the `.up` trace
carries its requests and ACKs. The capacity over a run's span counts the trace's delivery opportunities (1500 bytes
each; lab/report/trace_plots.py capacity_bytes, the plots' own rule) from the run's first packet on the trace
(`delivered.start_s`) to its end (`total_s`, a censored run's own end), per direction; it needs the trace file the
scenario names beside the clone with the digest the runs recorded, and says so where it is not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.docgen.answer_stats import compare, judged_cell, median_text, n_text, times
from lab.evidence.delivered import parse
from lab.link.model import trace_mean_bps
from lab.quantiles import median
from lab.report.traced import plot_stem, trace_of
from lab.results.schema import RunRecord
from lab.stats.stats import PROTOCOL_ORDER, protocol_label
from lab.stats.verdict import Judged

DIRECTIONS = (("downlink", "down"), ("uplink", "up"))
NUMERATOR = "h3"
DENOMINATORS = ("h2", "h1")
_TRACE = re.compile(r"(?:^|\s)traces?=(\S+)")


@dataclass(frozen=True)
class Cell:
    """One trace x direction x size: its runs (never the unsupported ones) and the point they ran at."""

    trace: str
    direction: str  # the direction the transfer ran in (every run is a download: "down")
    size: int
    point: int
    runs: tuple[RunRecord, ...]

    def of(self, protocol: str) -> list[RunRecord]:
        return [r for r in self.runs if r.protocol == protocol]


def trace_name(r: RunRecord) -> str:
    m = _TRACE.search(r.point_label)
    return m.group(1) if m else "?"


def cells(records: Sequence[RunRecord]) -> list[Cell]:
    """The folder's traced points as cells, in point order."""
    by: dict[int, list[RunRecord]] = {}
    for r in sorted(records, key=lambda r: (r.point, r.repeat)):
        if r.status != "unsupported" and trace_of(r, "downlink") is not None:
            by.setdefault(r.point, []).append(r)
    return [Cell(trace_name(rs[0]), "down", rs[0].size_bytes, p, tuple(rs)) for p, rs in by.items()]


def size_text(size: int) -> str:
    for unit, k in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= k and size % k == 0:
            return f"{size // k} {unit}"
    return f"{size} B"


# ---------------------------------------------------------------------------------------------------------------
# The trace's capacity over a run's span


def span_capacity_bps(trace_ms: Sequence[int], start_s: float, span_s: float) -> float:
    """The trace's mean capacity over [start_s, start_s + span_s) on the trace's clock (s since its application),
    counted by the plots' rule (1 ms bins)."""
    from lab.report.trace_plots import capacity_bytes  # matplotlib: only when a capacity is counted

    return sum(capacity_bytes(trace_ms, 0.001, start_s + span_s, start_s)) * 8 / span_s


def run_span(r: RunRecord) -> tuple[float, float] | None:
    """(start on the trace, span) of a result run: its first packet (`delivered.start_s`) to its end (`total_s`,
    the censored run's own end too); None when the folder does not record it."""
    d = parse(r.delivered)
    if d is None or d.start_s is None or r.total_s is None or r.total_s <= 0:
        return None
    return d.start_s, r.total_s


@dataclass(frozen=True)
class Capacity:
    """One direction's capacity over the cell's runs' spans (Mbit/s per run), or why there is none."""

    per_run: tuple[float, ...]
    without: int  # runs whose span the folder does not record
    why: str = ""

    def text(self) -> str:
        if self.why:
            return f"- ({self.why})"
        if not self.per_run:
            return "- (no run's span recorded)"
        xs = [v / 1e6 for v in self.per_run]
        out = f"{median(xs):.2f} [{min(xs):.2f}\u2013{max(xs):.2f}], {len(xs)} runs"
        return out + (f"; {self.without} without a recorded span" if self.without else "")


def capacity(cell: Cell, direction: str, trace_ms: Sequence[int] | None, why: str) -> Capacity:
    """`direction`'s capacity over each run's span, if the trace file (checked by the digest every run recorded)
    is at hand."""
    from lab.report.trace_plots import digest

    recorded = {str((trace_of(r, direction) or {}).get("sha256")) for r in cell.runs}
    if trace_ms is None:
        return Capacity((), len(cell.runs), why or "the scenario names no trace here now")
    if recorded != {digest(trace_ms)}:
        return Capacity((), len(cell.runs), "the trace file differs now from the one the runs used (SHA-256)")
    spans = [run_span(r) for r in cell.runs]
    got = tuple(span_capacity_bps(trace_ms, *s) for s in spans if s is not None)
    return Capacity(got, sum(1 for s in spans if s is None))


def whole_trace(records: Sequence[RunRecord], direction: str) -> str:
    """The trace's mean over its whole period, as the runs recorded it (count and period), e.g. "16.7 Mbit/s over
    140 s"."""
    seen = {(t["entries"], t["period_ms"]) for r in records if (t := trace_of(r, direction))
            and "entries" in t and "period_ms" in t}
    return "; ".join(f"{trace_mean_bps(n, p) / 1e6:.1f} Mbit/s over {p / 1000:.0f} s" for n, p in sorted(seen)) or "-"


# ---------------------------------------------------------------------------------------------------------------
# The section


def verdicts(cell: Cell) -> dict[str, Judged | None]:
    """HTTP/3 against each denominator (as A), by the one rule."""
    return {d: compare(cell.of(NUMERATOR), cell.of(d)) for d in DENOMINATORS}


def _said(j: Judged | None, den: str) -> str:
    return judged_cell(j, (protocol_label(NUMERATOR), protocol_label(den)))


def _direction_word(j: Judged | None, den: str) -> str:
    return judged_cell(j, (protocol_label(NUMERATOR), protocol_label(den))).rsplit(": ", 1)[-1]


def section(folder: Path, records: Sequence[RunRecord], manifest: dict[str, Any], rel: str, link_from: str) -> str:
    """The markdown: a table of medians and capacities, a table of verdicts, one sentence per comparison naming the
    folder and its verdicts; `link_from` is the folder as the document reaches it (for the plots' links)."""
    from lab.report.trace_plots import scenario_traces

    cs = cells(records)
    if not cs:
        return f"*`{rel}/` has no run over a recorded trace.*\n"
    traces = {d: scenario_traces(manifest, d) for d, _ in DIRECTIONS}
    protocols = [p for p in PROTOCOL_ORDER if any(r.protocol == p for r in records)]
    rtts = sorted({round(r.rtt_s * 1000, 3) for r in records})
    names = list(dict.fromkeys(c.trace for c in cs))
    out = [f"Every run is a download over the recorded pair: the `.down` trace carries the transfer (the direction "
           f"the times measure), the `.up` trace its requests and ACKs; base RTT {', '.join(f'{v:g}' for v in rtts)} "
           "ms added to the traces' delivery opportunities. The traces' means over their whole period, as the runs "
           "recorded them (runs.csv `link`): "
           + "; ".join(f"{n}: down {whole_trace([r for r in records if trace_name(r) == n], 'downlink')}, up "
                       f"{whole_trace([r for r in records if trace_name(r) == n], 'uplink')}" for n in names) + ".",
           "",
           "Transfer time per protocol: n results (censored among them: failed or timed out, above their own end), "
           "median s [order-statistic CI of the median, the level it reaches at that n]. Capacity: what the trace "
           "could deliver over each run's own span on it (from its first packet to its end; 1500 bytes per "
           "delivery opportunity), Mbit/s, median [range] over the runs.", ""]
    head = ["trace", "direction", "size", *(protocol_label(p) for p in protocols), "down capacity over the runs",
            "up capacity over the runs", "plot"]
    out += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for c in cs:
        caps = [capacity(c, d, traces[d][0].get(c.point), traces[d][1]).text() for d, _ in DIRECTIONS]
        svg = folder / "plots" / f"{plot_stem(c.point)}.svg"
        plot = f"[{plot_stem(c.point)}.svg]({link_from}/plots/{svg.name})" if svg.is_file() else "-"
        meds = [f"{n_text(c.of(p))}: {median_text(times(c.of(p)))}" if c.of(p) else "-" for p in protocols]
        out.append(f"| {c.trace} | {c.direction} | {size_text(c.size)} | " + " | ".join(meds)
                   + f" | {' | '.join(caps)} | {plot} |")
    out += ["", f"{protocol_label(NUMERATOR)} against each TCP protocol, by `quiclab compare`'s rule (lab/stats/"
            "verdict.py: the time ratio, its CI at the level it reaches, paired where both ran the same repeats "
            "over the same link seeds; parity when the whole CI lies within +-10 %, a direction only when it lies "
            "wholly beyond that margin on one side, else no verdict):", ""]
    dens = [d for d in DENOMINATORS if d in protocols]
    head = ["trace", "direction", "size", *(f"{protocol_label(NUMERATOR)} / {protocol_label(d)} time" for d in dens)]
    out += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    judged = [(c, verdicts(c)) for c in cs]
    for c, v in judged:
        out.append(f"| {c.trace} | {c.direction} | {size_text(c.size)} | "
                   + " | ".join(_said(v[d], d) for d in dens) + " |")
    for d in dens:
        tally: dict[str, list[str]] = {}
        for c, v in judged:
            tally.setdefault(_direction_word(v[d], d), []).append(f"{c.trace} {size_text(c.size)}")
        parts = [f"{w} at {len(where)} ({', '.join(where)})" for w, where in tally.items()]
        out += ["", f"{protocol_label(NUMERATOR)} vs {protocol_label(d)} in `{rel}/` over its {len(cs)} trace x size "
                    f"cells: {'; '.join(parts)}."]
    return "\n".join(out) + "\n"
