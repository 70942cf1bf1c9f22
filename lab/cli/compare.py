from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lab import terminal
from lab.cli.report import check_sweep_folder
from lab.results.report import compare_sweeps


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        a: Annotated[Path, typer.Argument(help="Sweep folder A (the baseline).")],
        b: Annotated[Path, typer.Argument(help="Sweep folder B.")],
    ) -> None:
        """Compare two sweeps' medians side by side (B/A ratios); writes nothing."""
        for folder in (a, b):
            check_sweep_folder(folder)
        c = compare_sweeps(a, b)
        cols, rows = c.table
        title = f"A = {c.name_a}\nB = {c.name_b}\nB/A < 1 for time (> 1 for goodput): B faster"
        if rows:
            terminal.table(title, cols, rows, right=cols[2:])
        else:
            terminal.line(title + "\nno point and method in common")
        for name, only in (("A", c.only_a), ("B", c.only_b)):
            if only:
                terminal.line(f"only in {name}: " + ", ".join(only))
