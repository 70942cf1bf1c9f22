"""The report's "Runs until decided" section of a sweep run with `--until-verdict`: per point the repeats it
needed (or reached) and why it stopped, from the manifest's until_verdict section (lab/stats/until.py Record)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lab.results.folder import Manifest, as_doc
from lab.stats.until import Record

TITLE = "Runs until decided"
Table = tuple[list[str], list[list[str]]]


@dataclass(frozen=True)
class Section:
    note: str
    table: Table | None  # None: the section could not be read (note says why)


def _note(rec: Record) -> str:
    r, lv = rec.rule, rec.levels
    first = f"from {lv.first_look} pairs on" if lv.first_look else "at no look (the boundary never spends enough)"
    return (f"Repeats ran in rounds (one repeat of every open point, all its methods over that repeat's link seed) "
            f"until each other method's {rec.metric.split(':')[0]} against the baseline {r.baseline} was decided "
            f"(equivalent: the ratio's interval inside \u00b1{r.margin * 100:g} %; differs: wholly outside), or "
            f"{r.max_repeats} repeats. Rule: {rec.method}; rho = {r.rho:g}; a verdict is possible {first}. Each "
            f"error (a false \"differs\", a false \"equivalent\") is at most {lv.nominal:g} per comparison over the "
            f"whole sequence (nominal); the boundary spends {lv.spent:.4g} (exact, discrete sign walk). Censored "
            f"(failed, timed-out) runs count at their least favourable value; none is dropped. n = the repeats the "
            f"point needed (or reached); a comparison's n = the pairs at its deciding look. {rec.runs} runs in all"
            f"{f', {rec.open} points still open (the sweep did not finish)' if rec.open else ''}.")


def until_section(manifest: Manifest | Mapping[str, Any]) -> Section | None:
    """The section of a sweep run until decided; None for any other sweep."""
    doc = as_doc(manifest).get("until_verdict")
    if not doc:
        return None
    try:
        rec = Record.model_validate(doc)
    except ValidationError as e:
        return Section(f"The manifest's until_verdict section is not readable ({e.error_count()} problems).", None)
    cols = ["parameter", "n needed", "runs", "stopped", "why", "comparisons with the baseline"]
    rows = [[p.label, f"{p.n}" if p.stop != "open" else f"{p.n} (open)", str(p.runs), p.stop, p.reason,
             "; ".join(f"{c.method}: {c.verdict}" + (f" at {c.n} [{c.lo}\u2013{c.hi}]" if c.lo != "-" else "")
                       for c in p.comparisons) or "-"]
            for p in rec.points]
    return Section(_note(rec), (cols, rows))
