"""All terminal output goes through here (rich), so commands stay small and errors look the same everywhere."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

# Off a terminal (pipes, CI logs) rich would assume 80 columns and cut table cells; use a wide page instead.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 160)


def error(message: str) -> None:
    """One line on stderr, no traceback."""
    err.print(f"[bold red]error:[/] {message}", markup=True)


def warning(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")


def info(message: str) -> None:
    err.print(f"[dim]·[/] {message}")


def success(message: str) -> None:
    err.print(f"[green]✓[/] {message}")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[str] = ()) -> None:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    out.print(t)


def raw(line: str) -> None:
    """Machine-readable output (JSON): stdout, unstyled."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (only on a terminal)."""
    if err.is_terminal:
        with err.status(message):
            yield
    else:
        info(message)
        yield
