from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from lab import terminal
from lab.errors import EnvironmentProblem, UsageError
from lab.report.report import build
from lab.report.summary import stats_table
from lab.results.folder import RUNS
from lab.results.schema import RunRecord

#: The columns every runs.csv has had (later ones have defaults, so older sweeps still read).
REQUIRED_COLUMNS = tuple(f.name for f in dataclasses.fields(RunRecord)
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def check_sweep_folder(folder: Path) -> None:
    """A sweep results folder with a runs.csv whose header is quiclab's, else a one-line UsageError naming it."""
    if not folder.exists():
        raise UsageError(f"no folder {str(folder)!r}: give a sweep results folder (results/<timestamp>-<name>/)")
    if not folder.is_dir():
        raise UsageError(f"{str(folder)!r} is not a folder: give a sweep results folder "
                         "(results/<timestamp>-<name>/)")
    runs = folder / RUNS
    if not runs.is_file():
        return  # load_sweep says what is missing
    try:
        with runs.open(newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        why = e.strerror if isinstance(e, OSError) else str(e)
        raise UsageError(f"unreadable {runs}: {why}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise UsageError(f"{runs} is not a quiclab runs.csv: its header lacks {shown}")


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        folder: Annotated[Path, typer.Argument(help="A sweep results folder (results/<timestamp>-<name>/).")],
    ) -> None:
        """Rebuild a sweep's summary.md, plots and self-contained report.html from its runs.csv."""
        check_sweep_folder(folder)
        try:
            built = build(folder)
        except OSError as e:
            raise EnvironmentProblem(f"cannot write the report into {folder}: {e.strerror or e}") from None
        cols, rows = stats_table(built.stats.groups)  # the statistics the report was built with
        terminal.table(f"{folder}", cols, rows, right=cols[2:])
        for p in built.paths:
            terminal.line(p)
