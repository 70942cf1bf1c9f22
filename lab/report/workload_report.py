"""Workload reports: a page-time table per workload and point (with per-object completion times, connections,
handshakes, resumption and 0-RTT), the CDF of object completion times per point, and page time against the
swept parameter. Written beside the standard reports (whose time column is the page time: total_s) as
`workloads.md` and `plots/page_time.*`, `plots/objects_cdf_<point>.*`; summary.md links them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lab.endpoints import loads_bulk_as_page
from lab.quantiles import median, quantile, quantiles
from lab.report.summary import EN, NA, fmt_ci, fmt_est, fmt_level, md_table, sig3
from lab.results import objects_csv as objects_file
from lab.results.objects_csv import ObjectRow
from lab.results.schema import RunRecord
from lab.stats.stats import Dist, group_records, method_label, summarize

WORKLOADS_MD = "workloads.md"
_X = {"loss": ("loss (%)", "loss_pct"), "rtt": ("RTT (ms)", "rtt_ms"), "rate": ("bandwidth (Mbit/s)", "rate_mbit"),
      "delay": ("delay (ms)", "delay_ms"), "jitter": ("jitter (ms)", "jitter_ms")}


def has_workloads(records: Sequence[RunRecord]) -> bool:
    return any(r.workload not in ("", "bulk") or loads_bulk_as_page(r.client) for r in records)


def _ok(rs: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in rs if r.status == "ok" and r.page_time_s is not None]


def _fmt_dist(d: Dist | None) -> str:
    """median [IQR] (CI of the median, its level), censoring shown as bounds (lab/stats/stats.py)."""
    if d is None:
        return NA
    ci = f" (CI {fmt_ci(d.ci)}, {fmt_level(d.ci)})" if d.ci else ""
    return f"{fmt_est(d.median)} [{fmt_est(d.q1)}{EN}{fmt_est(d.q3)}]{ci}"


def _rate(rs: Sequence[RunRecord], attr: str) -> str:
    vals = [getattr(r, attr) for r in rs if getattr(r, attr) is not None]
    return f"{sum(1 for v in vals if v)}/{len(vals)}" if vals else NA


def _median(values: Sequence[float | int | None]) -> str:
    xs = [float(v) for v in values if v is not None]
    return sig3(median(xs)) if xs else NA


def page_table(records: Sequence[RunRecord], objs: dict[str, list[ObjectRow]]) -> tuple[list[str], list[list[str]]]:
    """Per point and method: the page time as the standard statistics see it (lab/stats/stats.py: failed and
    timed-out runs are censored at their own end), object completion percentiles, connections, handshakes."""
    cols = ["parameter", "method", "n ok/all", "page time s median [IQR] (CI of the median, level)",
            "object done s p50", "object done s p95", "connections", "handshakes", "resumed", "0-RTT accepted"]
    stats = {(g.point, g.client, g.server, g.protocol): g for g in summarize(records)}
    rows = []
    for key, rs in group_records(records).items():
        if all(r.status == "unsupported" for r in rs):
            continue
        _, client, server, protocol = key
        ok = _ok(rs)
        done = [o.done_s for r in ok for o in objs.get(r.run_key, [])]
        g = stats.get(key)
        rows.append([rs[0].point_label, method_label(protocol, client, server), f"{len(ok)}/{len(rs)}",
                     _fmt_dist(g.total_s if g else None),
                     sig3(quantile(done, 0.5)) if done else NA,
                     sig3(quantile(done, 0.95)) if done else NA,
                     _median([r.connections for r in ok]), _median([r.handshakes for r in ok]),
                     _rate(ok, "resumed"), _rate(ok, "early_data")])
    return cols, rows


def _split_label(label: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in label.split() if "=" in part)


def markdown(records: Sequence[RunRecord], objs: dict[str, list[ObjectRow]], plots: Sequence[Path]) -> str:
    parts = ["# Workloads", "",
             "Page time is the workload's time (`page_time_s` = `total_s`): page loads from the first request to "
             "the last byte, reuse/new the sum of the requests' times, resume/0rtt the resumed connection's "
             "request; its statistics are the sweep's (summary.md: failed and timed-out runs censored at their "
             "timeout, order-statistic CI of the median with its exact level). Object completion times are from "
             "the first request (objects.csv), pooled over the ok "
             "runs of a group. Connections and handshakes: medians over ok runs. docs/results.md \"Workloads\".",
             "", md_table(page_table(records, objs)), ""]
    for p in plots:
        if p.suffix == ".png":
            parts += [f"![{p.stem}](plots/{p.name})", ""]
    return "\n".join(parts)


def plot(records: Sequence[RunRecord], objs: dict[str, list[ObjectRow]], out: Path) -> list[Path]:
    """plots/page_time.{png,svg} (page time vs the one swept link parameter, per workload and method) and
    plots/objects_cdf_<point>.{png,svg} (CDF of object completion times per method at each page point)."""
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    groups = group_records(records)
    # page time vs the swept parameter
    series: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    xlabel = ""
    for (_, client, server, protocol), rs in groups.items():
        ok = _ok(rs)
        if not ok:
            continue
        setting = _split_label(rs[0].point_label)
        workload = setting.pop("workload", rs[0].workload or "bulk")
        if len(setting) != 1 or next(iter(setting)) not in _X:
            continue
        key = next(iter(setting))
        xlabel = _X[key][0]
        x = {"loss": rs[0].loss_pct, "rtt": rs[0].rtt_s * 1000,
             "rate": (rs[0].rate_bps or 0) / 1e6}.get(key, float(rs[0].x))
        q1, med, q3 = quantiles([r.page_time_s for r in ok], (0.25, 0.5, 0.75))
        series.setdefault((workload, method_label(protocol, client, server)), []).append((x, med, q1, q3))
    if series:
        fig = Figure(figsize=(8, 5))
        ax = fig.add_subplot()
        for (workload, method), pts in series.items():
            pts.sort()
            xs, med, lo, hi = (np.asarray(v) for v in zip(*pts, strict=True))
            ax.errorbar(xs, med, yerr=[med - lo, hi - med], marker="o", capsize=3, label=f"{workload} {method}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("page time (s), median and IQR")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        for fmt in ("png", "svg"):
            p = out / f"page_time.{fmt}"
            fig.savefig(p, dpi=120 if fmt == "png" else None, bbox_inches="tight")
            written.append(p)
    # CDF of object completion times per point
    by_point: dict[int, dict[str, list[float]]] = {}
    labels: dict[int, str] = {}
    for (point, client, server, protocol), rs in groups.items():
        done = [o.done_s for r in _ok(rs) for o in objs.get(r.run_key, [])]
        if len(done) > 1:
            by_point.setdefault(point, {})[method_label(protocol, client, server)] = sorted(done)
            labels[point] = rs[0].point_label
    for point, methods in sorted(by_point.items()):
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for method, xs in methods.items():
            ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=method)
        ax.set_xlabel("object completion time from the first request (s)")
        ax.set_ylabel("fraction of objects")
        ax.set_title(labels[point], fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        for fmt in ("png", "svg"):
            p = out / f"objects_cdf_{point}.{fmt}"
            fig.savefig(p, dpi=120 if fmt == "png" else None, bbox_inches="tight")
            written.append(p)
    return written


def build(folder: Path, records: list[RunRecord]) -> list[Path]:
    """workloads.md and the workload plots for a sweep folder (nothing when it has no workload runs)."""
    if not has_workloads(records):
        return []
    objs = objects_file.read(folder, records)
    plots = plot(records, objs, folder / "plots")
    md = folder / WORKLOADS_MD
    md.write_text(markdown(records, objs, plots), encoding="utf-8")
    return [md, *plots]
