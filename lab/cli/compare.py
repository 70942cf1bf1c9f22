from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from lab import terminal
from lab.cli.report import check_sweep_folder
from lab.results.report import COMPARE_NOTE, compare_loaded, load_sweep, sweep_name
from lab.results.verdict import Judgement, Margins, judge_records, margins_from_options, verdict_table


class TableDump(BaseModel):
    columns: list[str]
    rows: list[list[str]]


class CompareDump(BaseModel):
    """`quiclab compare --json`: everything the tables show, and the verdicts."""

    a: str
    b: str
    medians: TableDump  # n, censored, excluded, median time and goodput of A and B per point and method
    paired_ratios: TableDump  # paired B/A ratios (median of per-pair ratios) with their CIs and levels
    paired_ratios_note: str
    judgement: Judgement


def verdict_title(m: Margins) -> str:
    level = (1 - 2 * m.alpha) * 100
    return (f"verdicts, B against A: equivalent = the {level:.3g} % CI of B/A inside \u00b1{m.median * 100:.3g} % "
            f"(medians), \u00b1{m.p95 * 100:.3g} % (p95), TTFB \u00b1max({m.ttfb_ms:g} ms, {m.median * 100:.3g} %) "
            f"on the log scale; differs = the CI wholly outside (unpaired: and rank test p < {m.alpha:g}). Paired "
            "where every run has its partner over the same repeat and link seed: the CI of the median per-pair "
            "ratio (sign-based); else unpaired (Hodges-Lehmann) (docs/results.md \"Do two sweeps agree?\")")


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        a: Annotated[Path, typer.Argument(help="Sweep folder A (the baseline).")],
        b: Annotated[Path, typer.Argument(help="Sweep folder B.")],
        margin: Annotated[float, typer.Option(help="Equivalence margin of the medians (goodput or page time, "
                                                   "TTFB), a fraction: 0.1 = \u00b110 %.")] = 0.10,
        margin_p95: Annotated[float, typer.Option(help="Equivalence margin of the transfer-time p95.")] = 0.20,
        margin_ttfb_ms: Annotated[float, typer.Option(help="Absolute floor of the TTFB margin, ms: the margin is "
                                                           "max(this, --margin of A's median TTFB).")] = 1.0,
        alpha: Annotated[float, typer.Option(help="Rank test level; CIs at 1 - 2*alpha (TOST).")] = 0.05,
        json_out: Annotated[bool, typer.Option("--json", help="Print everything as JSON instead.")] = False,
    ) -> None:
        """Compare two sweeps: medians, paired B/A ratios, and per point, method and metric (goodput or page time
        median, transfer-time p95, TTFB median) a verdict: equivalent, differs or inconclusive (and why). Writes
        nothing; exits 0 whatever the verdicts."""
        margins = margins_from_options(margin, margin_p95, margin_ttfb_ms, alpha)
        for folder in (a, b):
            check_sweep_folder(folder)
        (ra, ma), (rb, mb) = load_sweep(a), load_sweep(b)
        c = compare_loaded(ra, ma, a, rb, mb, b)
        j = judge_records(ra, rb, margins, sweep_name(ra, ma, a), sweep_name(rb, mb, b))
        if json_out:
            dump = CompareDump(a=c.name_a, b=c.name_b, medians=TableDump(columns=c.table[0], rows=c.table[1]),
                               paired_ratios=TableDump(columns=c.ratio_table[0], rows=c.ratio_table[1]),
                               paired_ratios_note=COMPARE_NOTE, judgement=j)
            terminal.raw(dump.model_dump_json(indent=2))
            return
        title = f"A = {c.name_a}\nB = {c.name_b}"
        cols, rows = c.table
        if not rows:
            terminal.line(title + "\nno point and method in common")
        else:
            terminal.table(title + "\nmedians (n = results: completed + censored)", cols, rows, right=cols[2:])
            rcols, rrows = c.ratio_table
            terminal.table("paired ratios B/A: " + COMPARE_NOTE, rcols, rrows, right=rcols[2:])
        for name, only in (("A", c.only_a), ("B", c.only_b)):
            if only:
                terminal.line(f"only in {name}: " + ", ".join(only))
        if j.rows:
            vcols, vrows = verdict_table(j)
            terminal.table(verdict_title(margins), vcols, vrows, right=vcols[3:10])
            for line in why_lines(j):
                terminal.line(line)
        terminal.line(j.tally)


def why_lines(j: Judgement) -> list[str]:
    """Why each inconclusive row is inconclusive (rows with the same metric and reason share a line), and the
    too-few warnings of rows that are not (an equivalent row at n = 3 could never have differed)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in j.rows:
        if r.verdict == "inconclusive":
            groups.setdefault((r.label, r.reason), []).append(f"{r.point} {r.method}")
    lines = [f"inconclusive, {label}: {reason} ({', '.join(where)})" for (label, reason), where in groups.items()]
    broken: dict[tuple[str, str], list[str]] = {}
    for r in j.rows:
        if r.design == "unpaired" and r.pairing.startswith("unpaired (pairing broken"):
            broken.setdefault((r.label, r.pairing), []).append(f"{r.point} {r.method}")
    lines += [f"{label}: {why}, judged unpaired ({', '.join(where)})" for (label, why), where in broken.items()]
    warned: dict[str, list[str]] = {}
    for r in j.rows:
        if r.too_few and r.verdict != "inconclusive":
            warned.setdefault(r.too_few, []).append(f"{r.point} {r.method} {r.label}")
    lines += [f"too few runs to show a difference: {w} ({', '.join(where)})" for w, where in warned.items()]
    return lines
