"""report.html: one self-contained page (inline CSS, plots as inline SVG, no scripts, fonts or URLs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab import config
from lab.report import matrix, why
from lab.report.headline import HEADLINE_NOTE, sentences
from lab.report.heatmap import heatmap_svg
from lab.report.summary import (
    CENSORING_RULE,
    CI_NOTE,
    EXCLUSION_RULE,
    NA,
    RATIO_NOTE,
    ManifestLike,
    Table,
    censored_table,
    clean,
    excluded_table,
    header_items,
    implementations_table,
    ratio_table,
    receiver_drops_note,
    self_check_table,
    stats_table,
)
from lab.report.svg import svg_element
from lab.report.traced import plot_stem, trace_points
from lab.report.until_report import TITLE as UNTIL_TITLE
from lab.report.until_report import until_section
from lab.results.folder import as_doc
from lab.results.schema import RunRecord
from lab.stats.stats import censored_runs, excluded_runs, exclusion_reason
from lab.stats.sweep_stats import SweepStats, sweep_stats

if TYPE_CHECKING:
    from lab.stats import cc_check

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d232a;
       margin: 0 auto; max-width: 1200px; padding: 1.5em 2em 4em; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #d8dee4; }
p.note { color: #57606a; margin: .3em 0 .8em; }
p.warn { color: #9a6700; font-weight: 600; margin: .3em 0 .8em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f5f7; } tr:nth-child(even) td { background: #fafbfc; }
td.num { text-align: right; white-space: nowrap; }
table.kv td:first-child { font-weight: 600; min-width: 11em; } table.kv td.num { text-align: left; }
.plot { margin: 1em 0 2em; } .plot svg { width: 100%; max-width: 1000px; height: auto; display: block; }
pre { background: #f6f8fa; padding: 1em; overflow-x: auto; font-size: 12px; }
details summary { cursor: pointer; font-weight: 600; }
"""
def _td(c: str) -> str:
    numeric = c.lstrip("<>")[:1].isdigit() or c in (NA, "?", ">?", "<?")  # bounds (">120") are numbers too
    return f'<td class="num">{escape(c)}</td>' if numeric else f"<td>{escape(c)}</td>"


def html_table(table: Table, css_class: str = "", header: bool = True) -> str:
    cols, rows = table
    head = "<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in cols) + "</tr></thead>" if header else ""
    body = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in rows)
    cls = f' class="{css_class}"' if css_class else ""
    return f"<table{cls}>{head}<tbody>{body}</tbody></table>"


#: The per-method plots of a sweep (lab/report/plots.py make_plots draws plots/NAME.{png,svg}); a stack matrix has its
#: heatmap instead.
METHOD_PLOTS = ("goodput", "time")


def inline_svg(path: Path) -> str:
    """An SVG file as an inline element: XML prologue, doctype, metadata and fixed size removed."""
    if not path.is_file():
        return f'<p class="note">plot missing: {escape(path.name)}</p>'
    return svg_element(path.read_text())


def _kv(items: Sequence[tuple[str, str]]) -> str:
    return html_table((["", ""], [[k, v] for k, v in items]), "kv", header=False)


def _manifest_section(records: Sequence[RunRecord], manifest: dict[str, Any]) -> str:
    parts = [_kv(header_items(records, manifest)[1:])]
    impls = implementations_table(manifest)
    if impls:
        parts += ["<h3>Implementations</h3>", html_table(impls)]
    versions = manifest.get("versions")
    if isinstance(versions, dict) and versions:
        parts += ["<h3>Versions</h3>", _kv([(str(k), clean(str(v), 300)) for k, v in versions.items()])]
    if not manifest:
        parts.append('<p class="note">manifest.json is missing or empty.</p>')
    return "\n".join(parts)


def _runs_section(runs: Sequence[RunRecord], total: int, rule: str, table: Table, verb: str, none: str) -> str:
    """The rule, "k of N runs <verb>.", counts by status and reason, and every such run (folded when many)."""
    parts = [f'<p class="note">{escape(rule)}</p>']
    if not runs:
        return parts[0] + f"<p>{escape(none)}</p>"
    parts += [f"<p>{len(runs)} of {total} runs {escape(verb)}.</p>", html_table(table),
              f"<details{' open' if len(runs) <= 50 else ''}><summary>Every such run</summary>",
              html_table((["run", "status", "reason", "timeout s", "started"],
                          [[r.run_key, exclusion_reason(r) or r.status, clean(r.failure, 400) or NA,
                            NA if r.timeout_s is None else f"{r.timeout_s:g}", r.started_at] for r in runs])),
              "</details>"]
    return "\n".join(parts)


def _cc_section(records: Sequence[RunRecord], checks: Sequence[cc_check.Check]) -> str:
    from lab.stats import cc_check

    senders = cc_check.sender_table(records)
    if senders is None and not checks:
        return ""
    parts = ["<h2>Sender congestion control and loss response</h2>"]
    if senders is not None:
        parts.append(html_table(senders))
    if checks:
        parts += ["<h3>Claims vs the Reno model</h3>", f'<p class="note">{escape(cc_check.note())}</p>',
                  html_table(cc_check.table(checks))]
    figs = cc_check.figures(records)
    if figs:
        links = "".join(f'<li><a href="{escape(path)}">{escape(key)}</a></li>' for key, path in figs)
        parts += ["<details><summary>Loss-response figures (per run)</summary>", f"<ul>{links}</ul>", "</details>"]
    return "\n".join(parts)


def _excluded_section(records: Sequence[RunRecord]) -> str:
    return _runs_section(excluded_runs(records), len(records), EXCLUSION_RULE, excluded_table(records), "excluded",
                         "No runs excluded.")


def _censored_section(records: Sequence[RunRecord]) -> str:
    return _runs_section(censored_runs(records), len(records), CENSORING_RULE, censored_table(records),
                         "did not complete (censored)", "Every run that is a result completed.")


def _until_html(manifest: dict[str, Any]) -> list[str]:
    until = until_section(manifest)
    if until is None:
        return []
    return [f"<h2>{escape(UNTIL_TITLE)}</h2>", f'<p class="note">{escape(until.note)}</p>',
            *([html_table(until.table)] if until.table else [])]


def shown_folder(folder: Path) -> str:
    """A sweep folder as commands name it: relative to the clone when it is inside it."""
    try:
        return str(folder.resolve().relative_to(config.ROOT.resolve()))
    except ValueError:
        return str(folder)


def _matrix_section(records: Sequence[RunRecord], manifest: dict[str, Any], folder: Path) -> list[str]:
    """A stack matrix's heatmap, table and "needs a why" (lab/report/matrix.py); nothing for other sweeps."""
    if not matrix.is_matrix(manifest):
        return []
    m = matrix.build(records, manifest, folder)
    why = matrix.why_lines(m, shown_folder(folder))
    return [f"<h2>Stack matrix ({escape(m.link)} link)</h2>", f'<p class="note">{escape(matrix.NOTE)}</p>',
            f'<div class="plot">{svg_element(heatmap_svg(m))}</div>', html_table(matrix.table(m)),
            "<h3>Needs a why</h3>",
            "<ul>" + "".join(f"<li>{escape(w)}</li>" for w in why) + "</ul>" if why else "<p>None.</p>"]


def _plots_section(records: Sequence[RunRecord], manifest: dict[str, Any], plot_dir: Path) -> list[str]:
    """The per-method plots (none for a stack matrix: its heatmap is above) and each trace point's plot."""
    method = [] if matrix.is_matrix(manifest) else [plot_dir / f"{name}.svg" for name in METHOD_PLOTS]
    traced = [f for p in trace_points(records) if (f := plot_dir / f"{plot_stem(p)}.svg").is_file()]
    if not method and not traced:
        return []
    return ["<h2>Plots</h2>", *(f'<div class="plot">{inline_svg(f)}</div>' for f in [*method, *traced])]


def report_html(records: Sequence[RunRecord], manifest: ManifestLike, plot_dir: Path,
                stats: SweepStats | None = None) -> str:
    """report.html from the records, the manifest, the plots in plot_dir and the records' statistics (computed here
    when not given)."""
    manifest = as_doc(manifest)
    stats = stats if stats is not None else sweep_stats(records)
    name = header_items(records, manifest)[0][1]
    rat = stats.ratios
    check = self_check_table(manifest)
    short = sentences(records)
    sections = [
        f"<h1>quiclab sweep {escape(name)}</h1>",
        '<p class="note">HTTP/3 (QUIC) against HTTP/1.1 and HTTP/2 (TCP) through an emulated link.</p>',
        "<h2>In short</h2>", f'<p class="note">{escape(HEADLINE_NOTE)}</p>',
        "<ul>" + "".join(f"<li>{escape(t)}</li>" for t in short) + "</ul>" if short
        else "<p>No HTTP/3 and TCP runs to compare.</p>",
        *_matrix_section(records, manifest, plot_dir.parent),
        *([w] if (w := why.section(plot_dir.parent, list(records))) else []),  # (explained runs only)
        *_plots_section(records, manifest, plot_dir),
        "<h2>Transfer time and goodput per method</h2>", f'<p class="note">{escape(CI_NOTE)}</p>',
        html_table(stats_table(stats.groups)) if records else "<p>No runs.</p>",
        f'<p class="warn">{escape(drops)}</p>' if (drops := receiver_drops_note(records)) else "",
        *_until_html(manifest),
        "<h2>HTTP/3 vs TCP</h2>", f'<p class="note">{escape(RATIO_NOTE)}</p>',
        html_table(ratio_table(rat)) if rat else "<p>No HTTP/3 and TCP runs to compare.</p>",
        "<h2>Sweep</h2>", _manifest_section(records, manifest),
        _cc_section(records, stats.cc_checks),
        "<h2>Runs that did not complete</h2>", _censored_section(records),
        "<h2>Excluded runs</h2>", _excluded_section(records),
        "<h2>Shaper self-check</h2>",
        html_table(check, "kv") if check else "<p>No self-check in the manifest.</p>",
        "<h2>Manifest</h2>",
        "<details><summary>manifest.json</summary><pre>"
        f"{escape(json.dumps(manifest, indent=2, sort_keys=True, default=str))}</pre></details>",
    ]
    body = "\n".join(sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>quiclab {escape(name)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
