"""Goodput and transfer-time figures of a sweep (PNG and SVG): median markers and line per protocol, the IQR as
error bars and the order-statistic CI of the median as a shaded band, its achieved level(s) in the title (on a
categorical x, for multi-dimensional grids: markers without connecting lines and the CI as a wide translucent bar).
Censored runs (docs/results.md): a median known only as a bound is a hollow triangle at the bound pointing where
the median lies, off the connecting line; an IQR or CI end known only as a bound reaches the edge of the axes.
Uses matplotlib's object API (no pyplot, no GUI)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from lab.report.html import METHOD_PLOTS
from lab.results.folder import Manifest, as_doc, write_atomic
from lab.results.schema import RunRecord
from lab.stats.stats import Dist, Est, GroupStats, method_label, protocol_label, summarize

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


@dataclass
class _Bar:
    """One vertical extent to draw once the y limits are known: an end that is only a bound (censored: the true end
    lies beyond it) is drawn to the edge of the axes."""

    x: float
    lo: Est
    hi: Est


@dataclass
class _Pending:
    """A series' CIs and IQRs, drawn by _finish."""

    color: str
    categorical: bool
    scales: list[float]
    cis: list[_Bar]
    iqrs: list[_Bar]


def _val(e: Est, scale: float) -> float | None:
    return None if e.value is None else e.value * scale


def _end(e: Est, scale: float, edge: float) -> float:
    """Where to draw a range's end: its value when exact, the axes' edge when the end is only a bound."""
    v = _val(e, scale)
    return edge if not e.exact or v is None else v


def ci_levels(groups: Sequence[GroupStats]) -> str:
    """The levels the plotted CIs actually have: "93.8 %", or the lowest and highest (they vary with n)."""
    levels = sorted({round(g.total_s.ci.level * 100, 1) for g in groups if g.total_s and g.total_s.ci})
    if not levels:
        return "none (n < 2)"
    return f"{levels[0]:.1f} %" if len(levels) == 1 else f"{levels[0]:.1f}\u2013{levels[-1]:.1f} % (by n)"


def _draw(ax: Axes, groups: Sequence[GroupStats], metric: str, categorical: bool) -> list[_Pending]:
    """Plot every series' medians; returns what is left to draw once the y limits are fixed (see _finish)."""
    series = _series(groups)
    combos = list(dict.fromkeys((c, s) for c, s, _ in series))
    positions = {p: i for i, p in enumerate(dict.fromkeys(g.point for g in groups))}
    pending: list[_Pending] = []
    for n_series, ((client, server, protocol), gs) in enumerate(series.items()):
        pts: list[tuple[float, Dist, float]] = []
        for g in gs:
            d, scale = _metric(g, metric)
            if d is not None and d.median.value is not None:
                pts.append((float(positions[g.point]) if categorical else g.x, d, scale))
        if not pts:
            continue
        pts.sort(key=lambda p: p[0])
        if categorical:  # dodge the series sideways so error bars don't overlap
            shift = (n_series - (len(series) - 1) / 2) * 0.1
            pts = [(x + shift, d, s) for x, d, s in pts]
        color = COLORS.get(protocol, f"C{3 + n_series % 7}")
        line, marker = STYLES[combos.index((client, server)) % len(STYLES)]
        label = method_label(protocol, client, server) if len(combos) > 1 else protocol_label(protocol)
        xs = [p[0] for p in pts]
        exact = [p[1].median.value * p[2] if p[1].median.exact and p[1].median.value is not None else math.nan
                 for p in pts]
        ax.plot(xs, exact, color=color, linestyle="none" if categorical else line, marker=marker, markersize=5,
                linewidth=1.6, label=label)
        for x, d, scale in pts:  # a median known only as a bound: a hollow triangle pointing where it lies
            if not d.median.exact and d.median.value is not None:
                ax.plot([x], [d.median.value * scale], linestyle="none", marker="^" if d.median.bound == ">" else "v",
                        markersize=8, markerfacecolor="none", markeredgecolor=color)
        cis = [_Bar(x, d.ci.lo if d.ci else d.median, d.ci.hi if d.ci else d.median) for x, d, _ in pts]
        iqrs = [_Bar(x, d.q1, d.q3) for x, d, _ in pts]
        pending.append(_Pending(color, categorical, [p[2] for p in pts], cis, iqrs))
    return pending


def _finish(ax: Axes, pending: list[_Pending]) -> None:
    """Draw CIs (shaded band, or a wide translucent bar on a categorical x) and IQR error bars, with ends that are
    only bounds drawn to the edge of the axes."""
    bottom, top = ax.get_ylim()
    for p in pending:
        color = p.color
        for bars, kind in ((p.cis, "ci"), (p.iqrs, "iqr")):
            xs = [b.x for b in bars]
            lo = [_end(b.lo, s, bottom) for b, s in zip(bars, p.scales, strict=True)]
            hi = [_end(b.hi, s, top) for b, s in zip(bars, p.scales, strict=True)]
            if kind == "ci" and not p.categorical:
                ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
                continue
            mids = [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]
            err = [[m - a for m, a in zip(mids, lo, strict=True)], [b - m for m, b in zip(mids, hi, strict=True)]]
            if kind == "ci":
                ax.errorbar(xs, mids, yerr=err, fmt="none", ecolor=color, elinewidth=9, alpha=0.25)
            else:
                ax.errorbar(xs, mids, yerr=err, fmt="none", ecolor=color, capsize=3, linewidth=1.6)
    ax.set_ylim(bottom, top)


def _limits(ax: Axes, groups: Sequence[GroupStats], metric: str, log: bool) -> None:
    """y limits that hold every exact median, quartile and CI end and every bound, with a margin."""
    values: list[float] = []
    for g in groups:
        d, scale = _metric(g, metric)
        if d is None:
            continue
        for e in (d.median, d.q1, d.q3, *((d.ci.lo, d.ci.hi) if d.ci else ())):
            v = _val(e, scale)
            if v is not None and math.isfinite(v) and (v > 0 or not log):
                values.append(v)
    if not values:
        return
    lo, hi = min(values), max(values)
    if log:
        ax.set_ylim(lo / 1.5, hi * 1.5)
    else:
        ax.set_ylim(0, hi * 1.08 if hi > 0 else 1)


def _figure(groups: Sequence[GroupStats], manifest: dict[str, Any], metric: str, title: str) -> Figure:
    x_names = list(dict.fromkeys(g.x_name for g in groups))
    x_name = x_names[0] if len(x_names) == 1 else "point"
    categorical = x_name == "point"
    fig = Figure(figsize=(9.6, 5.6), layout="constrained")
    ax = fig.add_subplot()
    pending = _draw(ax, groups, metric, categorical)
    censored = any(g.n_censored for g in groups)
    ax.set_title(f"{title}: {'goodput' if metric == 'goodput' else 'transfer time'}\n"
                 f"median (markers), IQR (error bars), order-statistic CI of the median at {ci_levels(groups)} "
                 f"({'bars' if categorical else 'shaded'})"
                 + ("\ncensored runs (failed, timeout) rank worst; \u25b3/\u25bd: median only bounded; "
                    "bounded ends reach the edge" if censored else ""), fontsize=10)
    ax.set_xlabel(x_label(x_name))
    ax.set_ylabel("goodput (Mbit/s)" if metric == "goodput" else "transfer time (s)")
    ax.grid(True, which="major", alpha=0.35)
    if categorical:
        labels = list(dict.fromkeys(g.point_label for g in groups))
        ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    elif x_name == "size_bytes":
        xs = [g.x for g in groups]
        ax.set_xscale("log" if xs and min(xs) > 0 else "symlog")
    if pending:
        log = metric == "goodput" and bool(manifest.get("log_y") or x_name == "size_bytes")
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        _limits(ax, groups, metric, log)
        _finish(ax, pending)
        ax.legend(loc="best", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", va="center", fontsize=14)
    return fig


def save_figure(fig: Figure, path: Path, fmt: str, salt: str) -> None:
    """The figure rendered in memory, then written with the folder's one atomic writer."""
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        meta = {"Date": None} if fmt == "svg" else None
        fig.savefig(buf, format=fmt, dpi=120, metadata=meta)
    write_atomic(path, buf.getvalue())


def make_plots(records: Sequence[RunRecord], manifest: Manifest | Mapping[str, Any], out_dir: Path,
               groups: Sequence[GroupStats] | None = None) -> list[Path]:
    """Write goodput.png/.svg and time.png/.svg into out_dir (created if needed); returns the paths. `groups`: the
    records' per-group statistics when already computed (stats.summarize)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = as_doc(manifest)
    groups = groups if groups is not None else summarize(records)
    title = str(manifest.get("name") or next((r.sweep for r in records), "sweep"))
    written = []
    for metric in METHOD_PLOTS:
        fig = _figure(groups, manifest, metric, title)
        for fmt in FORMATS:
            path = out_dir / f"{metric}.{fmt}"
            save_figure(fig, path, fmt, salt=metric)
            written.append(path)
    return written
