from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lab import terminal
from lab.cli.report import check_sweep_folder
from lab.results.report import COMPARE_NOTE, compare_sweeps


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        a: Annotated[Path, typer.Argument(help="Sweep folder A (the baseline).")],
        b: Annotated[Path, typer.Argument(help="Sweep folder B.")],
    ) -> None:
        """Compare two sweeps: medians side by side and paired B/A ratios with their CI levels; writes nothing."""
        for folder in (a, b):
            check_sweep_folder(folder)
        c = compare_sweeps(a, b)
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
