"""Build a sweep folder's reports (summary.md, plots/, report.html) and compare two sweeps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.errors import UsageError
from lab.report import matrix
from lab.report.heatmap import heatmap_svg
from lab.report.html import METHOD_PLOTS, report_html, shown_folder
from lab.report.summary import (
    CI_NOTE,
    PAIR_COLUMNS,
    Table,
    fmt_est,
    header_items,
    md_table,
    pair_cells,
    summary_markdown,
)
from lab.report.traced import summary_line
from lab.results.folder import RUNS, Manifest, read_manifest, write_atomic
from lab.results.schema import RunRecord, read_runs
from lab.stats.stats import (
    GroupStats,
    RunObs,
    group_obs,
    group_records,
    method_label,
    paired_ratio,
    summarize,
)
from lab.stats.sweep_stats import SweepStats, sweep_stats
from lab.stats.verdict import Judgement, Margins, judge_records

SUMMARY = "summary.md"
PLOTS = "plots"
HTML = "report.html"


def load_folder(folder: Path) -> tuple[list[RunRecord], Manifest]:
    """runs.csv and manifest.json of a sweep folder, read once each by the folder's one readers (a missing manifest
    reads as an empty one, a manifest without a scenario is read too); bad input is a UsageError."""
    runs = folder / RUNS
    if not runs.is_file():
        raise UsageError(f"no {RUNS} in {folder}: expected a sweep results folder (results/<timestamp>-<name>/)")
    records = read_runs(runs).records  # the one reader: a torn last line is ignored, any other bad row an error
    return records, read_manifest(folder, required=False)


def load_sweep(folder: Path) -> tuple[list[RunRecord], dict[str, Any]]:
    """load_folder with the manifest as its JSON document ({} when there is none)."""
    records, manifest = load_folder(folder)
    return records, manifest.doc()


def summary_text(records: list[RunRecord], manifest: Manifest | Mapping[str, Any], workloads: bool,
                 stats: SweepStats | None = None) -> str:
    """summary.md's text; `workloads`: the sweep has a workloads report (workloads.md) to point to; `stats`: the
    records' statistics when already computed (sweep_stats)."""
    text = summary_markdown(records, manifest, stats)
    if traces := summary_line(records):
        text = text.rstrip("\n") + "\n\n" + traces
    if workloads:
        text = (text.rstrip("\n") + "\n\nWorkloads (page times, per-object completion, connections, resumption, "
                "0-RTT): [workloads.md](workloads.md)\n")
    return text


@dataclass(frozen=True)
class Built:
    """A report built: the files written and what they were built from (read and computed once)."""

    paths: list[Path]
    records: list[RunRecord]
    manifest: Manifest
    stats: SweepStats


def build(folder: Path) -> Built:
    """(Re)write folder/summary.md, folder/plots/{goodput,time}.{png,svg} and folder/report.html from runs.csv
    and manifest.json, each read once, with the statistics computed once and passed to every writer. A stack
    matrix draws its heatmap (plots/matrix.svg) and table in place of the per-method goodput and time plots."""
    records, manifest = load_folder(folder)
    doc = manifest.doc()
    stats = sweep_stats(records)
    from lab.report.plots import make_plots  # matplotlib takes ~2 s to import: only when a report is built
    from lab.report.trace_plots import make_trace_plots
    from lab.report.workload_report import build as build_workloads  # page tables and plots (lab/workloads)

    summary = folder / SUMMARY
    write_atomic(summary, summary_text(records, doc, workloads=False, stats=stats))
    if matrix.is_matrix(doc):  # ~94 methods at one point: the heatmap is its figure, a marker per method is not
        plots = []
        for stale in (folder / PLOTS / f"{m}.{fmt}" for m in METHOD_PLOTS for fmt in ("png", "svg")):
            stale.unlink(missing_ok=True)  # (drawn by an older report)
    else:
        plots = make_plots(records, doc, folder / PLOTS, stats.groups)
    plots += make_trace_plots(records, doc, folder / PLOTS)  # (only for points over a trace)
    extra = build_workloads(folder, records)
    if extra:
        write_atomic(summary, summary_text(records, doc, workloads=True, stats=stats))
    if matrix.is_matrix(doc):
        extra += write_matrix(folder, records, doc)
    html = folder / HTML
    write_atomic(html, report_html(records, doc, folder / PLOTS, stats))
    return Built([summary, *plots, *extra, html], records, manifest, stats)


def write_matrix(folder: Path, records: list[RunRecord], doc: Mapping[str, Any]) -> list[Path]:
    """A stack matrix's table (matrix.md, also at the end of summary.md) and heatmap (plots/matrix.svg)."""
    m = matrix.build(records, doc, folder)
    svg, md = folder / PLOTS / matrix.MATRIX_SVG, folder / matrix.MATRIX_MD
    svg.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(svg, heatmap_svg(m))
    text = matrix.markdown(m, shown_folder(folder))
    write_atomic(md, text)
    summary = folder / SUMMARY
    write_atomic(summary, with_matrix(summary.read_text(), text))
    return [svg, md]


def with_matrix(summary: str, matrix_md: str) -> str:
    """summary.md's text with a stack matrix's matrix.md at its end (its headings one level down)."""
    return (summary.rstrip("\n") + "\n\n" + matrix_md.replace("# Stack matrix", "## Stack matrix")
            .replace("\n## Needs a why", "\n### Needs a why"))


def folder_texts(folder: Path, records: list[RunRecord], doc: Mapping[str, Any]) -> dict[Path, str]:
    """The markdown `quiclab report` writes into a sweep folder, as its runs.csv and manifest give it now:
    summary.md, and a stack matrix's matrix.md (also at the end of summary.md; commands in it name the folder where
    it is). What `quiclab docs` regenerates in every reference sweep folder."""
    summary = summary_text(records, doc, (folder / "workloads.md").is_file())
    if not matrix.is_matrix(doc):
        return {folder / SUMMARY: summary}
    text = matrix.markdown(matrix.build(records, doc, folder), shown_folder(folder))
    return {folder / SUMMARY: with_matrix(summary, text), folder / matrix.MATRIX_MD: text}


def build_report(folder: Path) -> list[Path]:
    """(Re)write folder/summary.md, folder/plots/{goodput,time}.{png,svg} and folder/report.html; returns them."""
    return build(folder).paths


@dataclass(frozen=True)
class Comparison:
    name_a: str
    name_b: str
    table: Table  # per group present in both: n, censored, excluded, median time and goodput of A and B
    ratio_table: Table  # per group present in both: paired ratios B/A (median of per-pair ratios, CI, level)
    only_a: list[str]  # "parameter method" of groups found only in A
    only_b: list[str]


Key = tuple[str, str, str, str]  # point_label, client, server, protocol
COMPARE_NOTE = ("B/A = the median of the per-pair ratios B \u00f7 A, a pair being the same point, method and repeat "
                "run over the same link seed in both sweeps (sweeps of one scenario and seed pair up; others do "
                "not: \"seeds differ\"); CI and censoring as in the summaries. B/A < 1 for time (> 1 for goodput) "
                "means B was faster.")


def _by_key(groups: list[GroupStats]) -> dict[Key, GroupStats]:
    return {(g.point_label, g.client, g.server, g.protocol): g for g in groups}


def _obs_by_key(records: list[RunRecord]) -> dict[Key, dict[int, RunObs]]:
    return {(rs[0].point_label, c, s, p): group_obs(rs) for (_, c, s, p), rs in group_records(records).items()}


def sweep_name(records: list[RunRecord], manifest: Manifest | Mapping[str, Any], folder: Path) -> str:
    """How a comparison names a sweep: its name and its folder."""
    return f"{header_items(records, manifest)[0][1]} ({folder})"


def compare_sweeps(a: Path, b: Path) -> Comparison:
    """The groups present in both sweeps (matched by point label, client, server, protocol): medians side by side
    and paired ratios B/A."""
    (ra, ma), (rb, mb) = load_sweep(a), load_sweep(b)
    return compare_loaded(ra, ma, a, rb, mb, b)


def compare_loaded(ra: list[RunRecord], ma: Manifest | Mapping[str, Any], a: Path, rb: list[RunRecord],
                   mb: Manifest | Mapping[str, Any], b: Path) -> Comparison:
    """compare_sweeps on sweeps already read (load_sweep)."""
    ga, gb = _by_key(summarize(ra)), _by_key(summarize(rb))
    oa, ob = _obs_by_key(ra), _obs_by_key(rb)
    cols = ["parameter", "method", "n A/B", "censored A/B", "excluded A/B", "time s A", "time s B",
            "goodput Mbit/s A", "goodput Mbit/s B"]
    rcols = ["parameter", "method", *[c.replace("ratio", "B/A") for c in PAIR_COLUMNS]]
    rows, rrows = [], []
    for key, x in ga.items():
        y = gb.get(key)
        if y is None:
            continue
        method = method_label(x.protocol, x.client, x.server)
        rows.append([x.point_label, method, f"{x.n}/{y.n}", f"{x.n_censored}/{y.n_censored}",
                     f"{x.n_excluded}/{y.n_excluded}",
                     fmt_est(x.total_s.median if x.total_s else None), fmt_est(y.total_s.median if y.total_s else None),
                     fmt_est(x.goodput_bps.median if x.goodput_bps else None, 1e-6),
                     fmt_est(y.goodput_bps.median if y.goodput_bps else None, 1e-6)])
        rrows.append([x.point_label, method, *pair_cells(paired_ratio(ob.get(key, {}), oa.get(key, {})))])

    def label(k: Key) -> str:
        return f"{k[0]} {method_label(k[3], k[1], k[2])}"

    return Comparison(
        name_a=sweep_name(ra, ma, a), name_b=sweep_name(rb, mb, b),
        table=(cols, rows), ratio_table=(rcols, rrows),
        only_a=[label(k) for k in ga if k not in gb], only_b=[label(k) for k in gb if k not in ga],
    )


def judge_sweeps(folder_a: Path, folder_b: Path, margins: Margins | None = None) -> Judgement:
    """Judge sweep folder B against A (the baseline): what `quiclab compare` prints and `reproduce` decides on
    (`Judgement.any_differs`). Bad folders are UsageErrors (exit 2)."""
    (ra, ma), (rb, mb) = load_sweep(folder_a), load_sweep(folder_b)
    return judge_records(ra, rb, margins, sweep_name(ra, ma, folder_a), sweep_name(rb, mb, folder_b))


def compare_markdown(a: Path, b: Path) -> str:
    c = compare_sweeps(a, b)
    parts = ["# quiclab comparison", "", f"- **A**: {c.name_a}", f"- **B**: {c.name_b}", ""]
    if not c.table[1]:
        parts += ["No point and method in common.", ""]
    else:
        parts += ["## Medians", "", CI_NOTE, "", md_table(c.table), "",
                  "## Paired ratios B/A", "", COMPARE_NOTE, "", md_table(c.ratio_table), ""]
    for name, only in (("A", c.only_a), ("B", c.only_b)):
        if only:
            parts += [f"Only in {name}:", "", *[f"- {s}" for s in only], ""]
    return "\n".join(parts)
