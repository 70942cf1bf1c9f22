"""The trace plots of a sweep over mahimahi traces (plots/trace-<point>.{png,svg}; issue 35): per point, the
downlink trace's capacity over time (top) above each run's delivered bytes (bottom, one line a run, coloured by
protocol), each with the bytes the trace could have delivered to it from its own start (dashed, same colour). The
trace is read again from the scenario in the manifest and checked against the digest each run recorded. Uses
matplotlib's object API (no pyplot).

The time axis, and what it rests on: linkem builds a new trace server with its origin at the instant it applies a
configuration (linkem/src/pipeline.rs `reconfigure` -> `build_server(cfg, at)`, `at` stamped by the control thread
when the PUT /config arrives: linkem/src/control.rs), whether or not the link changed; the runner applies the run's
link before every run (lab/run/runner.py `execute`) and keeps the time linkem answered (`applied_unix`, a few ms
after `at`). So every run of a point meets the trace from its beginning, at its own application: x = time since the
run's link was applied = time on the trace, the same axis for every run. A run does not start then: its capture,
probes and sender start first (0.2-0.9 s in the first cellular trial), and the trace's opportunities in that time
go unused. So the capacity a run could have used is counted from its own start on the trace: the client's first
packet to the server in its capture (the `delivered` cell's `start_s`, lab/evidence/delivered.py). A record from
before `start_s` was kept gets the capacity from the link's application, and the legend says so.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from lab.errors import UsageError
from lab.evidence.delivered import Delivered, parse
from lab.plan.checks import validate
from lab.plan.plan import points
from lab.report.plots import COLORS, FORMATS, save_figure
from lab.report.traced import downlink_trace, plot_stem, trace_points
from lab.results.folder import Manifest, as_doc
from lab.results.schema import RunRecord
from lab.stats.stats import protocol_label

OPPORTUNITY_BYTES = 1500  # one mahimahi delivery opportunity


@dataclass(frozen=True)
class Curve:
    protocol: str
    repeat: int
    series: Delivered


def capacity_bytes(trace_ms: Sequence[int], bin_s: float, until_s: float, start_s: float = 0.0) -> list[int]:
    """The trace's delivery opportunities x 1500 bytes per bin [start_s + k * bin_s, start_s + (k + 1) * bin_s) up
    to `until_s` (times on the trace, s since its application; an opportunity at start_s counts), the trace looping
    with period = its last timestamp (linkem's and mahimahi's rule: an entry at the period and one at 0 are two
    opportunities at the same instant)."""
    bin_ms = max(1, round(bin_s * 1000))
    start_ms = max(0, round(start_s * 1000))
    n = max(1, math.ceil(round(until_s * 1000 - start_ms, 6) / bin_ms))
    acc = [0] * n
    period = trace_ms[-1]
    cycle = start_ms // period
    while cycle * period < start_ms + n * bin_ms:
        for t in trace_ms:
            at = cycle * period + t
            if at < start_ms:
                continue
            k = (at - start_ms) // bin_ms
            if k >= n:
                break
            acc[k] += OPPORTUNITY_BYTES
        cycle += 1
    return acc


def could_deliver(trace_ms: Sequence[int], bin_s: float, start_s: float, until_s: float) -> tuple[list[float],
                                                                                                  list[float]]:
    """(times, MB) of what the trace could deliver from `start_s` on, at every bin edge up to `until_s`."""
    cap = capacity_bytes(trace_ms, bin_s, until_s, start_s)
    total, xs, ys = 0, [round(start_s, 6)], [0.0]
    for k, b in enumerate(cap):
        total += b
        xs.append(round(start_s + (k + 1) * bin_s, 6))
        ys.append(total / 1e6)
    return xs, ys


def capacity_bin(end_s: float) -> float:
    """The capacity panel's bin: about 100 steps over the plot, at least 0.1 s, in 0.1 s steps."""
    return max(0.1, math.ceil(end_s / 100 * 10) / 10)


def trace_figure(trace_ms: Sequence[int] | None, curves: Sequence[Curve], title: str, note: str = "") -> Figure:
    """The two panels for one point; without the trace (`note` says why) the bottom panel alone is drawn."""
    end = max([_end(c) for c in curves] + [1.0]) * 1.05
    fig = Figure(figsize=(9.6, 7.2), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1, 2))
    width = capacity_bin(end)
    if trace_ms:
        cap = capacity_bytes(trace_ms, width, end)
        edges = [round(k * width, 6) for k in range(len(cap) + 1)]
        top.stairs([b * 8 / width / 1e6 for b in cap], edges, fill=True, color="#9e9e9e", alpha=0.6,
                   label=f"trace capacity ({width:g} s bins)")
        top.legend(loc="upper right", fontsize=8)
        # Each run's ceiling from its own start on the trace (the module's docstring says why that is where it
        # starts); a record without its start: from the link's application, said in the legend.
        unknown = [c for c in curves if c.series.start_s is None]
        if unknown:
            xs, ys = could_deliver(trace_ms, width, 0.0, max(_end(c) for c in unknown))
            bottom.plot(xs, ys, color="black", linestyle="--", linewidth=1.2,
                        label="what the trace could deliver from the link's application (IP bytes; "
                              f"{len(unknown)} run(s) without a recorded start)")
        started = [c for c in curves if c.series.start_s is not None]
        for c in sorted(started, key=lambda c: (c.protocol, c.repeat)):
            assert c.series.start_s is not None
            xs, ys = could_deliver(trace_ms, width, c.series.start_s, max(_end(c), c.series.start_s + width))
            bottom.plot(xs, ys, color=COLORS.get(c.protocol, "#555555"), linestyle="--", linewidth=0.9, alpha=0.7)
        if started:  # one legend entry for them all
            bottom.plot([], [], color="black", linestyle="--", linewidth=0.9,
                        label="what the trace could deliver from the run's first packet (IP bytes; run's colour)")
    else:
        top.text(0.5, 0.5, f"trace not drawn: {note}", transform=top.transAxes, ha="center", va="center",
                 fontsize=9, wrap=True)
    top.set_ylabel("capacity (Mbit/s)")
    top.grid(True, alpha=0.35)
    labelled: set[str] = set()
    for c in sorted(curves, key=lambda c: (c.protocol, c.repeat)):
        xs, ys = zip(*((t, b / 1e6) for t, b in c.series.cumulative()), strict=True)
        n = sum(1 for d in curves if d.protocol == c.protocol)
        label = None if c.protocol in labelled else f"{protocol_label(c.protocol)} ({n} run{'s' * (n != 1)})"
        labelled.add(c.protocol)
        bottom.plot(xs, ys, color=COLORS.get(c.protocol, "#555555"), linewidth=1.0, alpha=0.85, label=label)
    bottom.set_xlim(0, end)
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("time on the trace (s): since the run's link was applied, when the trace starts (every run)")
    bottom.set_ylabel("delivered (MB)")
    bottom.grid(True, alpha=0.35)
    bottom.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{title}\nthe downlink trace's capacity (top); each run's delivered bytes (bottom)\n"
                 "(transport payload in the client-side capture, retransmissions included)"
                 + (f"\n{note}" if note and trace_ms else ""), fontsize=10)
    return fig


def _end(c: Curve) -> float:
    return len(c.series.bytes) * c.series.bin_s


def scenario_traces(manifest: Mapping[str, Any], direction: str = "downlink") -> tuple[dict[int, list[int]], str]:
    """Per point index its trace in `direction` ("downlink", "uplink"), read again from the manifest's scenario (the
    files it names); or {} and why not."""
    scenario = manifest.get("scenario")
    if not isinstance(scenario, dict):
        return {}, "the manifest holds no scenario to read the trace from"
    try:
        s = validate(dict(scenario), "the manifest's scenario")
    except UsageError as e:
        return {}, str(e)
    out = {}
    for p in points(s):
        t = getattr(p.link, direction).trace_ms
        if t:
            out[p.index] = t
    return out, ""


def digest(trace_ms: Sequence[int]) -> str:
    return hashlib.sha256("".join(f"{t}\n" for t in trace_ms).encode()).hexdigest()


def make_trace_plots(records: Sequence[RunRecord], manifest: Manifest | Mapping[str, Any],
                     out_dir: Path) -> list[Path]:
    """plots/trace-<point>.{png,svg} for every point traced.trace_points names; returns the files written."""
    pts = trace_points(records)
    if not pts:
        return []
    doc = as_doc(manifest)
    traces, why = scenario_traces(doc)
    name = str(doc.get("name") or records[0].sweep)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for p in pts:
        rs = [r for r in records if r.point == p]
        curves = [Curve(r.protocol, r.repeat, d) for r in rs if r.status == "ok" and (d := parse(r.delivered))]
        trace, note = traces.get(p), why
        recorded = downlink_trace(rs[0]) or {}
        if trace is not None and digest(trace) != recorded.get("sha256"):
            trace, note = None, "the trace file differs now from the one the runs used (SHA-256)"
        elif trace is None and not note:
            note = "the scenario has no trace at this point now"
        without = len([r for r in rs if r.status != "unsupported"]) - len(curves)
        if without:
            note = "; ".join(x for x in (note, f"{without} run(s) without a series (not ok, or not captured)") if x)
        fig = trace_figure(trace, curves, f"{name}: {rs[0].point_label}", note)
        for fmt in FORMATS:
            path = out_dir / f"{plot_stem(p)}.{fmt}"
            save_figure(fig, path, fmt, salt=plot_stem(p))
            written.append(path)
    return written
