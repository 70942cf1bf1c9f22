"""Which points of a sweep ran over a mahimahi trace and have delivered-bytes series to draw beside it (the trace
plots, lab/report/trace_plots.py): read from runs.csv alone, so that summary.md, report.html and the plots agree
without matplotlib."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lab.results.schema import RunRecord

PREFIX = "trace-"


def trace_of(record: RunRecord, direction: str = "downlink") -> dict[str, Any] | None:
    """The record's trace in one direction ("downlink", "uplink") as its run kept it ({entries, period_ms,
    sha256}), or None (no trace)."""
    try:
        t = json.loads(record.link)[direction].get("trace_ms") if record.link else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return t if isinstance(t, dict) else None


def downlink_trace(record: RunRecord) -> dict[str, Any] | None:
    """The record's downlink trace as its run kept it (trace_of)."""
    return trace_of(record, "downlink")


def trace_points(records: Sequence[RunRecord]) -> list[int]:
    """The points whose link had a downlink trace and that have at least one run with a delivered series."""
    return sorted({r.point for r in records if r.delivered and downlink_trace(r) is not None})


def plot_stem(point: int) -> str:
    return f"{PREFIX}{point}"


def summary_line(records: Sequence[RunRecord]) -> str:
    """summary.md's pointer to the trace plots ("" when there are none)."""
    pts = trace_points(records)
    if not pts:
        return ""
    files = ", ".join(f"[{plot_stem(p)}](plots/{plot_stem(p)}.png)" for p in pts)
    return (f"Trace plots (the trace's capacity over time beside each run's delivered bytes, per point): {files}\n")
