from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from lab import terminal
from lab.results.report import build_report, load_sweep
from lab.results.stats import summarize
from lab.results.summary import stats_table


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        folder: Annotated[Path, typer.Argument(help="A sweep results folder (results/<timestamp>-<name>/).")],
    ) -> None:
        """Rebuild a sweep's summary.md, plots and self-contained report.html from its runs.csv."""
        paths = build_report(folder)
        records, _ = load_sweep(folder)
        cols, rows = stats_table(summarize(records))
        terminal.table(f"{folder}", cols, [[escape(c) for c in r] for r in rows], right=cols[2:])
        for p in paths:
            terminal.out.print(escape(str(p)))
