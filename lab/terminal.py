"""All terminal output goes through here (rich), so commands stay small and errors look the same everywhere.

Everything printed here is plain text: messages, table cells and titles may hold user-supplied or external text
(paths, values, tools' stderr, failure messages), so none of it is ever read as rich markup or emoji codes. The
consoles have markup and emoji off, and `plain` is the one function that turns a text into something rich prints
as it is; colour comes only from `styled` pieces built here, never from brackets inside a string.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table
from rich.text import Text

# Off a terminal (pipes, CI logs) rich would assume 80 columns and cut table cells; use a wide page instead.
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False,
              width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False,
              width=None if sys.stderr.isatty() else 160)

Cell = str | Text
#: Off a terminal, `waiting` repeats what it still waits for this often (seconds).
WAIT_REPORT_S = 5.0


def plain(text: object) -> Text:
    """`text` as rich prints it verbatim: brackets, backslashes and :codes: stay as they are."""
    return text if isinstance(text, Text) else Text(str(text))


def styled(text: object, style: str) -> Text:
    """A piece of output in a colour/style (e.g. a table cell); the text itself is still plain."""
    return Text(str(text), style=style)


def one_line(text: str) -> str:
    """Messages are one line: newlines from other tools' output become spaces."""
    return " ".join(text.split("\n")).strip()


def _say(mark: Text, message: object) -> None:
    err.print(Text.assemble(mark, " ", plain(message)))


def error(message: object) -> None:
    """One line on stderr, no traceback."""
    _say(styled("error:", "bold red"), one_line(str(message)))


def warning(message: object) -> None:
    _say(styled("warning:", "yellow"), one_line(str(message)))


def info(message: object) -> None:
    _say(styled("·", "dim"), message)


def success(message: object) -> None:
    _say(styled("✓", "green"), message)


def line(text: object = "") -> None:
    """A line of human-readable output on stdout."""
    out.print(plain(text))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Cell]],
          right: Sequence[str] = ()) -> None:
    """A table on stdout; str cells are plain text, `styled(...)` cells carry colour."""
    t = Table(title=plain(title) if title is not None else None, title_justify="left", header_style="bold")
    for c in columns:
        t.add_column(plain(c), justify="right" if c in right else "left", no_wrap=True)
    for r in rows:
        t.add_row(*(plain(c) for c in r))
    out.print(t)


def raw(text: str) -> None:
    """Machine-readable output (JSON): stdout, unstyled."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (only on a terminal)."""
    if err.is_terminal:
        with err.status(plain(message)):
            yield
    else:
        info(message)
        yield


@contextmanager
def waiting(message: str, every_s: float = WAIT_REPORT_S,
            clock: Callable[[], float] = time.monotonic) -> Iterator[Callable[[str], None]]:
    """A long wait whose state changes: yields `update(detail)`. On a terminal a spinner shows the message and the
    latest detail; off a terminal a line is printed now and then every `every_s` seconds with the latest detail,
    so a log shows what is still awaited."""
    if err.is_terminal:
        with err.status(plain(message)) as spinner:
            yield lambda detail: spinner.update(plain(f"{message}: {detail}" if detail else message))
        return
    last: float | None = None

    def update(detail: str) -> None:
        nonlocal last
        now = clock()
        if last is None or now - last >= every_s:
            last = now
            info(f"{message}: {detail}" if detail else message)

    yield update
