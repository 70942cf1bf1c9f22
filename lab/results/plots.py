"""Goodput and transfer-time figures of a sweep (PNG and SVG): median markers and line per protocol, the IQR as
error bars and the 95 % CI of the median as a shaded band (on a categorical x, for multi-dimensional grids: markers
without connecting lines and the CI as a wide translucent bar). Uses matplotlib's object API (no pyplot, no GUI)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from lab.results.schema import RunRecord
from lab.results.stats import Dist, GroupStats, method_label, protocol_label, summarize

X_LABELS = {
    "loss_pct": "loss (%)",
    "rtt_ms": "RTT (ms)",
    "delay_ms": "delay (ms)",
    "jitter_ms": "jitter (ms)",
    "rate_mbit": "bandwidth (Mbit/s)",
    "size_bytes": "object size (bytes)",
    "fault_s": "fault duration (s)",
    "point": "link condition",
}
COLORS = {"h1": "#1f77b4", "h2": "#ff7f0e", "h3": "#2ca02c"}
STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"), ("-.", "*"),
          ((0, (5, 1, 1, 1)), "h")]  # one per client→server pair (the implementations matrix has 6)
FORMATS = ("png", "svg")
SeriesKey = tuple[str, str, str]  # client, server, protocol


def x_label(x_name: str) -> str:
    return X_LABELS.get(x_name, x_name.replace("_", " "))


def _series(groups: Sequence[GroupStats]) -> dict[SeriesKey, list[GroupStats]]:
    out: dict[SeriesKey, list[GroupStats]] = {}
    for g in groups:
        out.setdefault((g.client, g.server, g.protocol), []).append(g)
    return out


def _metric(g: GroupStats, metric: str) -> tuple[Dist | None, float]:
    """The metric's Dist and the factor to its plotted unit."""
    return (g.total_s, 1.0) if metric == "time" else (g.goodput_bps, 1e-6)


def _draw(ax: Axes, groups: Sequence[GroupStats], metric: str, categorical: bool) -> int:
    """Plot every series; returns how many points were drawn."""
    series = _series(groups)
    combos = list(dict.fromkeys((c, s) for c, s, _ in series))
    positions = {p: i for i, p in enumerate(dict.fromkeys(g.point for g in groups))}
    drawn = 0
    for n_series, ((client, server, protocol), gs) in enumerate(series.items()):
        pts = []
        for g in gs:
            d, scale = _metric(g, metric)
            if d is not None:
                pts.append((float(positions[g.point]) if categorical else g.x, d, scale))
        if not pts:
            continue
        pts.sort(key=lambda p: p[0])
        if categorical:  # dodge the series sideways so error bars don't overlap
            shift = (n_series - (len(series) - 1) / 2) * 0.1
            pts = [(x + shift, d, s) for x, d, s in pts]
        xs = [p[0] for p in pts]
        med = [p[1].median * p[2] for p in pts]
        lo = [(p[1].ci[0] if p[1].ci else p[1].median) * p[2] for p in pts]
        hi = [(p[1].ci[1] if p[1].ci else p[1].median) * p[2] for p in pts]
        err = [[m - p[1].q1 * p[2] for m, p in zip(med, pts, strict=True)],
               [p[1].q3 * p[2] - m for m, p in zip(med, pts, strict=True)]]
        color = COLORS.get(protocol, f"C{3 + n_series % 7}")
        line, marker = STYLES[combos.index((client, server)) % len(STYLES)]
        label = method_label(protocol, client, server) if len(combos) > 1 else protocol_label(protocol)
        if categorical:  # separate link conditions: no connecting line, the CI as a wide translucent bar
            ci_err = [[m - v for m, v in zip(med, lo, strict=True)], [v - m for m, v in zip(med, hi, strict=True)]]
            ax.errorbar(xs, med, yerr=ci_err, fmt="none", ecolor=color, elinewidth=9, alpha=0.25)
            line = "none"
        else:
            ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
        ax.errorbar(xs, med, yerr=err, color=color, linestyle=line, marker=marker, markersize=5, capsize=3,
                    linewidth=1.6, label=label)
        drawn += len(pts)
    return drawn


def _figure(groups: Sequence[GroupStats], manifest: dict[str, Any], metric: str, title: str) -> Figure:
    x_names = list(dict.fromkeys(g.x_name for g in groups))
    x_name = x_names[0] if len(x_names) == 1 else "point"
    categorical = x_name == "point"
    fig = Figure(figsize=(9.6, 5.6), layout="constrained")
    ax = fig.add_subplot()
    drawn = _draw(ax, groups, metric, categorical)
    ax.set_title(f"{title}: {'goodput' if metric == 'goodput' else 'transfer time'}\n"
                 "median (markers), IQR (error bars), 95 % CI of the median (shaded)", fontsize=11)
    ax.set_xlabel(x_label(x_name))
    ax.set_ylabel("goodput (Mbit/s)" if metric == "goodput" else "transfer time (s)")
    ax.grid(True, which="major", alpha=0.35)
    if categorical:
        labels = list(dict.fromkeys(g.point_label for g in groups))
        ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    elif x_name == "size_bytes":
        xs = [g.x for g in groups]
        ax.set_xscale("log" if xs and min(xs) > 0 else "symlog")
    if drawn:
        if metric == "goodput" and (manifest.get("log_y") or x_name == "size_bytes"):
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no successful runs", transform=ax.transAxes, ha="center", va="center", fontsize=14)
    return fig


def _save(fig: Figure, path: Path, fmt: str, salt: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
            meta = {"Date": None} if fmt == "svg" else None
            fig.savefig(tmp, format=fmt, dpi=120, metadata=meta)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def make_plots(records: Sequence[RunRecord], manifest: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write goodput.png/.svg and time.png/.svg into out_dir (created if needed); returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = summarize(records)
    title = str(manifest.get("name") or next((r.sweep for r in records), "sweep"))
    written = []
    for metric in ("goodput", "time"):
        fig = _figure(groups, manifest, metric, title)
        for fmt in FORMATS:
            path = out_dir / f"{metric}.{fmt}"
            _save(fig, path, fmt, salt=metric)
            written.append(path)
    return written
