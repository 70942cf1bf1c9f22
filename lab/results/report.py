"""Build a sweep folder's reports (summary.md, plots/, report.html) and compare two sweeps."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.errors import UsageError
from lab.results.html import report_html
from lab.results.schema import RunRecord, read_runs
from lab.results.stats import GroupStats, method_label, summarize
from lab.results.summary import NA, Table, header_items, md_table, sig3, summary_markdown

RUNS = "runs.csv"
MANIFEST = "manifest.json"
SUMMARY = "summary.md"
PLOTS = "plots"
HTML = "report.html"


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file in the same directory, then rename over the target."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_sweep(folder: Path) -> tuple[list[RunRecord], dict[str, Any]]:
    """runs.csv and manifest.json of a sweep folder (a missing manifest reads as {}); bad input is a UsageError."""
    runs = folder / RUNS
    if not runs.is_file():
        raise UsageError(f"no {RUNS} in {folder}: expected a sweep results folder (results/<timestamp>-<name>/)")
    records = read_runs(runs).records  # the one reader: a torn last line is ignored, any other bad row an error
    manifest: Any = {}
    mpath = folder / MANIFEST
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise UsageError(f"unreadable {mpath}: {e}") from None
        if not isinstance(manifest, dict):
            raise UsageError(f"unreadable {mpath}: expected a JSON object")
    return records, manifest


def build_report(folder: Path) -> list[Path]:
    """(Re)write folder/summary.md, folder/plots/{goodput,time}.{png,svg} and folder/report.html; returns them."""
    records, manifest = load_sweep(folder)
    summary = folder / SUMMARY
    write_atomic(summary, summary_markdown(records, manifest))
    from lab.results.plots import make_plots  # matplotlib takes ~2 s to import: only when a report is built

    plots = make_plots(records, manifest, folder / PLOTS)
    from lab.workloads.report import build as build_workloads  # page tables and plots (lab/workloads)

    extra = build_workloads(folder, records)
    if extra:
        write_atomic(summary, summary.read_text(encoding="utf-8").rstrip("\n")
                     + "\n\nWorkloads (page times, per-object completion, connections, resumption, 0-RTT): "
                     "[workloads.md](workloads.md)\n")
    html = folder / HTML
    write_atomic(html, report_html(records, manifest, folder / PLOTS))
    return [summary, *plots, *extra, html]


@dataclass(frozen=True)
class Comparison:
    name_a: str
    name_b: str
    table: Table
    only_a: list[str]  # "parameter method" of groups found only in A
    only_b: list[str]


Key = tuple[str, str, str, str]  # point_label, client, server, protocol


def _by_key(groups: list[GroupStats]) -> dict[Key, GroupStats]:
    return {(g.point_label, g.client, g.server, g.protocol): g for g in groups}


def _ratio(a: float | None, b: float | None) -> str:
    return sig3(b / a) if a and b is not None else NA


def _med(g: GroupStats, metric: str) -> float | None:
    d = g.total_s if metric == "time" else g.goodput_bps
    if d is None:
        return None
    return d.median if metric == "time" else d.median / 1e6


def compare_sweeps(a: Path, b: Path) -> Comparison:
    """Medians of the groups present in both sweeps (matched by point label, client, server, protocol)."""
    (ra, ma), (rb, mb) = load_sweep(a), load_sweep(b)
    ga, gb = _by_key(summarize(ra)), _by_key(summarize(rb))
    cols = ["parameter", "method", "n A/B", "time s A", "time s B", "time B/A",
            "goodput Mbit/s A", "goodput Mbit/s B", "goodput B/A"]
    rows = []
    for key, x in ga.items():
        y = gb.get(key)
        if y is None:
            continue
        ta, tb, pa, pb = _med(x, "time"), _med(y, "time"), _med(x, "goodput"), _med(y, "goodput")
        rows.append([x.point_label, method_label(x.protocol, x.client, x.server), f"{x.n}/{y.n}",
                     sig3(ta), sig3(tb), _ratio(ta, tb), sig3(pa), sig3(pb), _ratio(pa, pb)])

    def label(k: Key) -> str:
        return f"{k[0]} {method_label(k[3], k[1], k[2])}"

    return Comparison(
        name_a=f"{header_items(ra, ma)[0][1]} ({a})", name_b=f"{header_items(rb, mb)[0][1]} ({b})",
        table=(cols, rows), only_a=[label(k) for k in ga if k not in gb], only_b=[label(k) for k in gb if k not in ga],
    )


def compare_markdown(a: Path, b: Path) -> str:
    c = compare_sweeps(a, b)
    parts = ["# quiclab comparison", "", f"- **A**: {c.name_a}", f"- **B**: {c.name_b}", "",
             "Medians over ok runs; B/A < 1 for time (> 1 for goodput) means B was faster.", "",
             md_table(c.table) if c.table[1] else "No point and method in common.", ""]
    for name, only in (("A", c.only_a), ("B", c.only_b)):
        if only:
            parts += [f"Only in {name}:", "", *[f"- {s}" for s in only], ""]
    return "\n".join(parts)
