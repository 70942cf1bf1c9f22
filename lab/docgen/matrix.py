"""The stack matrix in the docs (issue 33 item 5), generated from the committed matrix folders
results/reference/matrix-LINK (one per link of lab/plan/matrix.py LINKS; `quiclab matrix --link LINK`, then
`quiclab publish FOLDER matrix-LINK`):

- block `matrix-LINK` (docs/results.md, "The stack matrix"): the folder's source line (status and runs, date,
  commit, labs: lab/docgen/source.py, as every block), the matrix table its own report renders (lab/report/matrix.py
  `table`: the one cell format), its heatmap linked and its "needs a why" list;
- block `matrixgrid-all` (docs/implementations.md): per link, servers x clients with each HTTP/3 cell's outcome
  against the TCP baseline (`outcome`: the cell's verdict, or what kept it from having one), the heatmap beside;
- block `matrixsummary-all` (README.md): one sentence per committed link folder, counting its cells' outcomes.

Every number is the folder's (its runs.csv, manifest and explain.json files, through lab/report/matrix.py build); a
link without a committed folder says "Not run yet" with the command that makes it.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.docgen.source import made, source_line
from lab.errors import UsageError
from lab.plan.matrix import LINKS
from lab.report import matrix
from lab.report.report import PLOTS, load_sweep
from lab.report.summary import md_table
from lab.results.schema import RunRecord

#: A cell's outcome against its TCP baseline, in the order they are counted: compare's verdicts (B = the cell's
#: HTTP/3 goodput, A = the baseline's), then what kept a cell from having one.
OUTCOMES = ("faster", "equivalent", "slower", "inconclusive", "failed", "no result", "unsupported", "not run",
            "no verdict")
ALWAYS = OUTCOMES[:5]  # counted in a sentence even when none


@dataclass(frozen=True)
class Folder:
    """A committed matrix folder: where it is, its records and manifest, and its matrix."""

    link: str
    path: Path
    rel: str  # as the repository names it: results/reference/matrix-LINK
    records: list[RunRecord]
    manifest: dict[str, Any]
    matrix: matrix.Matrix


def check_link(link: str, block: str) -> str:
    if link not in LINKS:
        raise UsageError(f"generated block {block!r}: unknown matrix link {link!r}: allowed are {', '.join(LINKS)}")
    return link


def not_run(link: str) -> str:
    return f"Not run yet: `uv run quiclab matrix --link {link} --parallel auto`"


def load(reference: Path, link: str) -> Folder | None:
    """The link's committed folder (None when there is none); a folder there that is no matrix of that link is bad
    input."""
    path = reference / LINKS[link]
    rel = f"results/reference/{path.name}"
    if not (path / "runs.csv").is_file():
        return None
    records, manifest = load_sweep(path)
    if not matrix.is_matrix(manifest) or matrix.scenario_of(manifest).get("matrix") != link:
        raise UsageError(f"{rel}: not a stack matrix of the {link} link (its scenario's matrix is "
                         f"{matrix.scenario_of(manifest).get('matrix')!r}); publish `quiclab matrix --link {link}`'s "
                         "folder there")
    return Folder(link, path, rel, records, manifest, matrix.build(records, manifest, path))


def outcome(c: matrix.Cell) -> str:
    """One HTTP/3 cell's outcome against its TCP baseline: its verdict (faster, equivalent, slower, inconclusive),
    else failed (every run censored; its verdict, if any, is against censored times), no result, unsupported, not
    run, or no verdict (no baseline result to judge against)."""
    if c.status in ("failed", "no result", "unsupported", "not run"):
        return c.status
    return c.verdict.verdict if c.verdict is not None else "no verdict"


def tally(m: matrix.Matrix) -> Counter[str]:
    return Counter(outcome(c) for c in m.cells.values())


def _svg(f: Folder, link_from: str) -> str | None:
    """The heatmap's path as the document reaches it (None when the folder has none)."""
    svg = f.path / PLOTS / matrix.MATRIX_SVG
    return f"{link_from}/{PLOTS}/{svg.name}" if svg.is_file() else None


def _link_from(f: Folder, doc: Path | None) -> str:
    return Path(os.path.relpath(f.path, doc.parent)).as_posix() if doc is not None else f.rel


def _no_svg(f: Folder) -> str:
    return f"no {PLOTS}/{matrix.MATRIX_SVG} in `{f.rel}/` (`quiclab report {f.rel}` draws it)"


def section(reference: Path, link: str, doc: Path | None) -> str:
    """Block `matrix-LINK`: the folder's table, heatmap and "needs a why", or "Not run yet"."""
    f = load(reference, link)
    if f is None:
        return not_run(link) + "\n"
    m = f.matrix
    svg = _svg(f, _link_from(f, doc))
    heat = f"Heatmap: [{PLOTS}/{matrix.MATRIX_SVG}]({svg})" if svg else f"Heatmap: {_no_svg(f)}"
    why = matrix.why_lines(m, f.rel)  # commands run from the clone's root
    out = [source_line(f.path, f.manifest, f.records, f.rel), "", f"{matrix.scope_line(m)} {heat}.", "",
           md_table(matrix.table(m)), "", f"Needs a why. {matrix.why_intro(m)}", ""]
    out += [f"- {w}" for w in why] if why else ["- none"]
    return "\n".join(out) + "\n"


def grid(reference: Path, doc: Path | None) -> str:
    """Block `matrixgrid-all`: per link, servers (rows) x clients (columns), each cell's outcome."""
    out = []
    for link in LINKS:
        f = load(reference, link)
        if f is None:
            out += [f"**{link}**: {not_run(link)}.", ""]
            continue
        m = f.matrix
        svg = _svg(f, _link_from(f, doc))
        out += [f"**{link}**: {source_line(f.path, f.manifest, f.records, f.rel)}", "",
                f"HTTP/3 server (row) x client (column): each cell's outcome against its TCP baseline "
                f"({baselines(m)}; {sentence_rule()}); the numbers: docs/results.md \"The stack matrix\"; the "
                + (f"heatmap: [{PLOTS}/{matrix.MATRIX_SVG}]({svg})." if svg else f"heatmap: {_no_svg(f)}."), "",
                md_table((["server \\ client", *m.clients],
                          [[s, *(outcome(m.cell(s, c)) for c in m.clients)] for s in m.servers])), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def baselines(m: matrix.Matrix) -> str:
    """The baselines the folder's cells were judged against, as the verdicts name them."""
    names = list(dict.fromkeys(c.verdict.baseline for c in m.cells.values() if c.verdict is not None))
    return ", ".join(names) if names else "no baseline result"


def sentence_rule() -> str:
    return "by `quiclab compare`'s rule on the median goodput, paired over repeat and link seed"


def sentence(f: Folder) -> str:
    """One folder's outcomes counted: "Stack matrix, goodput link (`results/reference/matrix-goodput/`, ...): of its
    N HTTP/3 cells, a faster, b equivalent, ... than the HTTP/2 TCP baseline"."""
    m = f.matrix
    t = tally(m)
    counts = ", ".join(f"{t[o]} {o}" for o in OUTCOMES if o in ALWAYS or t[o])
    partly = sum(1 for c in m.cells.values() if c.status == "partly failed")
    some = f"; {partly} of them with some runs failed (counted by their verdict)" if partly else ""
    return (f"Stack matrix, {f.link} link (`{f.rel}/`, {made(f.manifest, f.records)}): of its {len(m.cells)} HTTP/3 "
            f"server x client cells against the TCP baseline ({baselines(m)}; {sentence_rule()}): {counts}{some}.")


def summary(reference: Path) -> str:
    """Block `matrixsummary-all`: a sentence per committed link folder, then the links not run yet."""
    out, missing = [], []
    for link in LINKS:
        f = load(reference, link)
        if f is None:
            missing.append(link)
        else:
            out.append(sentence(f))
    if missing:
        links = ", ".join(missing)
        out.append(f"Not run yet: the stack matrix on the {links} link{'s' if len(missing) > 1 else ''}: "
                   f"`uv run quiclab matrix --link {','.join(missing)} --parallel auto`.")
    return "\n\n".join(out) + "\n"
