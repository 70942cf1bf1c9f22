from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lab import config, terminal
from lab.cli.compare import verdict_title, why_lines
from lab.errors import UsageError
from lab.results.verdict import margins_from_options, verdict_table
from lab.run import parallel as parallel_labs
from lab.run import reproduce as repro
from lab.run import sweep


def register(app: typer.Typer) -> None:
    @app.command()
    def reproduce(
        folder: Annotated[Path, typer.Argument(help="A finished sweep folder (its manifest holds the plan).")],
        parallel: Annotated[str | None, typer.Option(
            "--parallel", help="Labs to run the reproduction on (N or auto; default: as many as the original).")]
        = None,
        out: Annotated[Path | None, typer.Option(help="Where the new sweep folder goes (default results/).")] = None,
        margin: Annotated[float, typer.Option(help="Equivalence margin of the medians (goodput or page time, "
                                                   "TTFB), a fraction: 0.1 = \u00b110 %.")] = 0.10,
        margin_p95: Annotated[float, typer.Option(help="Equivalence margin of the transfer-time p95.")] = 0.20,
        margin_ttfb_ms: Annotated[float, typer.Option(help="Absolute floor of the TTFB margin, ms.")] = 1.0,
        alpha: Annotated[float, typer.Option(help="Rank test level; CIs at 1 - 2*alpha (TOST).")] = 0.05,
    ) -> None:
        """Run a finished sweep again from its manifest (same plan, seeds, link, implementations, sender CC) and
        judge every point, method and metric: equivalent, differs or inconclusive. Writes reproduce.md and
        reproduce.json beside the new sweep; exits 0 when nothing differs, 1 when something does."""
        margins = margins_from_options(margin, margin_p95, margin_ttfb_ms, alpha)
        labs = parallel_labs.parse(parallel) if parallel is not None else None
        original = repro.load_original(folder)
        out = out if out is not None else config.ROOT / "results"
        if out.exists() and not out.is_dir():
            raise UsageError(f"invalid --out {str(out)!r}: not a folder")
        config.check_all()
        changed = repro.commit_now_differs(original)
        if changed:
            terminal.warning(f"reproducing at another commit than the original's: {changed}")
        n = labs if parallel is not None else original.labs
        guard = original.manifest.host_guard or "flag"
        s = original.scenario
        new, _ = sweep.start(s, original.preset, out, labs=n, host_guard=guard)  # (None: --parallel auto)
        r = repro.judge(folder, new, margins)
        for line in r.differences:
            terminal.info(f"differs from the original: {line}")
        if r.judgement.rows:
            cols, rows = verdict_table(r.judgement)
            terminal.table(verdict_title(margins), cols, rows, right=cols[3:10])
            for line in why_lines(r.judgement):
                terminal.line(line)
        s_ = r.share
        terminal.line(f"{s_.equivalent} of {s_.points} points equivalent ({s_.share:.0%}), {s_.differ} differ; "
                      f"metrics: {r.judgement.tally}")
        terminal.line(f"reproduction: {new}/ ({repro.REPORT_MD}, {repro.REPORT_JSON})")
        raise typer.Exit(r.exit_code)
