"""All terminal output goes through here (rich), so commands stay small and errors look the same everywhere.

Everything printed here is plain text: messages, table cells and titles may hold user-supplied or external text
(paths, values, tools' stderr, failure messages), so none of it is ever read as rich markup or emoji codes. The
consoles have markup and emoji off, and `plain` is the one function that turns a text into something rich prints
as it is; colour comes only from `styled` pieces built here, never from brackets inside a string.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

# Tables size themselves to `page_width()` (see `table`); everything else on stdout is soft-wrapped (never cut).
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
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


#: Off a terminal with no COLUMNS, tables are laid out for this many columns (rich's own assumption).
DEFAULT_WIDTH = 80
#: A free-text column is not wrapped narrower than this (unless its text is shorter).
MIN_TEXT_WIDTH = 20
#: Between two columns of a table without its box: the gap.
GAP = 2


def page_width() -> int:
    """The width tables are laid out for: COLUMNS if set, else the terminal's width, else 80 (pipes, CI logs)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if out.is_terminal:
        try:
            return os.get_terminal_size(out.file.fileno()).columns or DEFAULT_WIDTH
        except (AttributeError, OSError, ValueError):
            pass
    return DEFAULT_WIDTH


def _width(text: Text) -> int:
    return max((cell_len(ln) for ln in text.plain.split("\n")), default=0)


def _longest_word(text: Text) -> int:
    return max((cell_len(w) for w in text.plain.split()), default=0)


@dataclass(frozen=True)
class _Columns:
    """What the columns of a table need: `high` shows a column on one line, `low` is the least it takes (whole
    cells; a header wrapped at its spaces; free text wrapped, no narrower than MIN_TEXT_WIDTH)."""

    high: list[int]
    low: list[int]
    free: set[int]

    def fit(self, which: Sequence[int], page: int) -> dict[int, int]:
        """Widths of the columns `which` laid out without a box in `page` columns: free text wraps first (widest
        column first), then headers; never below `low`, so the result may be wider than the page."""
        widths = {i: self.high[i] for i in which}
        excess = sum(widths.values()) + GAP * (len(which) - 1) - page
        for group in ([i for i in which if i in self.free], [i for i in which if i not in self.free]):
            while excess > 0:
                room = [i for i in group if widths[i] > self.low[i]]
                if not room:
                    break
                widths[max(room, key=lambda i: widths[i])] -= 1
                excess -= 1
        return widths

    def blocks(self, keys: Sequence[int], rest: Sequence[int], page: int) -> list[list[int]]:
        """`rest` in consecutive groups, each of which fits the page beside the key columns (a column too wide even
        alone has a group of its own)."""
        base = sum(self.low[i] for i in keys) + GAP * len(keys)
        groups: list[list[int]] = []
        used = 0
        for i in rest:
            if groups and used + GAP + self.low[i] <= page:
                groups[-1].append(i)
                used += GAP + self.low[i]
            else:
                groups.append([i])
                used = base + self.low[i]
        return groups


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Cell]],
          right: Sequence[str] = (), wrap: Sequence[str] = (), width: int | None = None) -> None:
    """A table on stdout; str cells are plain text, `styled(...)` cells carry colour.

    Columns named in `wrap` hold free text (descriptions, notes, messages): it wraps to fit the page. Every other
    column is kept whole: names, methods, parameters (what a user types or looks for) and numbers (`right`:
    right-aligned) are never cut, wrapped or ellipsized; only a header longer than its cells may wrap at its
    spaces. The page is `width`, else `page_width()` (80 columns in a pipe unless COLUMNS says otherwise).

    A table that fits as it is keeps its box. One that does not loses the box (which costs three columns a
    column), then wraps free text and headers; if it still does not fit, its columns are shown in several tables
    one under the other, each repeating the table's leading name columns (a table with only names repeats its
    first) so every row stays labelled. Only a table whose name columns alone are wider than the page is printed
    wider than it (the terminal folds those lines): a cell is never cut."""
    page = width or page_width()
    heads = [plain(c) for c in columns]
    body = [[plain(c) for c in r] for r in rows]
    n = len(heads)
    longest = [max((_width(r[i]) for r in body if i < len(r)), default=0) for i in range(n)]
    free = {i for i, c in enumerate(columns) if c in wrap}
    high = [max(longest[i], _width(heads[i]), 1) for i in range(n)]
    low = [max(_longest_word(heads[i]), min(high[i], MIN_TEXT_WIDTH) if i in free else longest[i], 1)
           for i in range(n)]
    cols = _Columns(high, low, free)
    everything = list(range(n))
    if sum(high) + 3 * n + 1 <= page:  # │ cell │ cell │: three columns a cell and one more
        _print_table(title, heads, body, right, {i: high[i] for i in everything}, boxed=True)
        return
    widths = cols.fit(everything, page)
    if sum(widths.values()) + GAP * (n - 1) <= page or n < 2:
        _print_table(title, heads, body, right, widths, boxed=False)
        return
    keys = []
    for i in everything:
        if columns[i] in right or i in free:
            break
        keys.append(i)
    keys = keys[:1] if len(keys) >= n - 1 else keys
    groups = cols.blocks(keys, [i for i in everything if i not in keys], page)
    for k, group in enumerate(groups):
        if k:
            line()
        _print_table(title if k == 0 else None, heads, body, right, cols.fit([*keys, *group], page), boxed=False)


def _print_table(title: str | None, heads: list[Text], body: list[list[Text]], right: Sequence[str],
                 widths: dict[int, int], boxed: bool) -> None:
    """The columns `widths` names (in order), each exactly as wide as given there."""
    t = Table(title=plain(title) if title is not None else None, title_justify="left", header_style="bold")
    if not boxed:  # columns GAP apart, a rule under the header, no edges
        t.box, t.show_edge, t.padding, t.pad_edge = box.SIMPLE_HEAD, False, (0, GAP - 1, 0, 0), False
    for i, w in widths.items():
        t.add_column(heads[i], justify="right" if heads[i].plain in right else "left", width=w, overflow="fold")
    for r in body:
        t.add_row(*(r[i] if i < len(r) else Text() for i in widths))
    n = len(widths)
    t.width = sum(widths.values()) + (3 * n + 1 if boxed else GAP * (n - 1))  # may be wider than the page
    lines = out.render_lines(t, out.options.update(width=t.width), pad=False)
    out.print(Segments([s for ln in lines for s in (*_rstrip(ln), Segment.line())]), end="")


def _rstrip(line: list[Segment]) -> list[Segment]:
    """A rendered line without the blanks that pad its last cell (they would trail every line of a pipe)."""
    line = list(line)
    while line and not line[-1].control and not line[-1].text.rstrip(" "):
        line.pop()
    if line and not line[-1].control:
        last = line[-1]
        line[-1] = Segment(last.text.rstrip(" "), last.style)
    return line


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
