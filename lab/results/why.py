"""The report's "why, per point" section (issue 25): for each point and method, the median run among those with an
explanation (`explain.json` beside the run's evidence, lab/explain) — its round trips before the request, the
drops the captures counted and whether the emulator's counters agree, what the sender retransmitted and how often
it cut its window — with the explanation's own ranked reasons and a link to the record. Nothing when no run of
the sweep was explained (sweeps without captures), so their reports are unchanged."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lab.explain.model import EXPLAIN_JSON, Explanation, Figure
from lab.results.schema import RunRecord
from lab.results.stats import method_label

NOTE = ("Per point and method: the explanation of the run with the median time among the explained runs (the lower "
        "of the two middle ones for an even count), from that run's own captures and the emulator's counters "
        "(docs/explain.md says what each figure means and where it comes from). A run whose captures disagree with "
        "the emulator's counters is shown as invalid, not explained.")


@dataclass(frozen=True)
class Why:
    point: int
    point_label: str
    method: str
    run_key: str
    link: str  # explain.json, relative to the sweep folder
    explained: int  # explained runs of this point and method
    explanation: Explanation


def _value(f: Figure | None) -> Any:
    return None if f is None else f.value


def facts(e: Explanation) -> str:
    """One line of the explanation's main figures (what the run's evidence showed)."""
    if e.status != "explained":
        return f"{e.status}: {e.why}" if e.why else e.status
    out = []
    if e.handshake is not None and (rt := _value(e.handshake.round_trips)) is not None:
        out.append(f"{rt:g} round trip{'s' if rt != 1 else ''} before the request (expected "
                   f"{e.handshake.expected_round_trips})")
    down = e.path.down if e.path is not None else None
    if down is not None and (d := _value(down.dropped)) is not None:
        agree = {True: ", as the emulator counted", False: ", the emulator counted otherwise", None: ""}[down.agree]
        out.append(f"{d:g} packet{'s' if d != 1 else ''} dropped toward the client{agree}")
    if e.loss is not None and (b := _value(e.loss.bytes_retransmitted)) is not None:
        out.append(f"{b:,.0f} bytes retransmitted")
    if e.window is not None and (w := _value(e.window.loss_episodes)) is not None:
        out.append(f"{w:g} window reduction{'s' if w != 1 else ''} inferred")
    return "; ".join(out)


def collect(folder: Path, records: list[RunRecord]) -> list[Why]:
    """The median explained run per (point, method), in the report's order."""
    groups: dict[tuple[int, str], list[tuple[float, RunRecord, Path]]] = defaultdict(list)
    for r in records:
        path = folder / "evidence" / r.run_key.replace("/", "_") / EXPLAIN_JSON
        if r.status == "ok" and r.total_s is not None and path.is_file():
            groups[(r.point, method_label(r.protocol, r.client, r.server))].append((r.total_s, r, path))
    out = []
    for (point, method), runs in sorted(groups.items()):
        runs.sort(key=lambda t: (t[0], t[1].run_key))
        _, rec, path = runs[(len(runs) - 1) // 2]
        try:
            e = Explanation.model_validate_json(path.read_text())
        except (OSError, ValidationError, ValueError):
            continue  # an unreadable record: the table of `quiclab explain` says why; nothing invented here
        out.append(Why(point, rec.point_label, method, rec.run_key, str(path.relative_to(folder)), len(runs), e))
    return out


def section(folder: Path, records: list[RunRecord]) -> str:
    """The report's HTML section ("" when no run was explained)."""
    from html import escape

    whys = collect(folder, records)
    if not whys:
        return ""
    parts = ["<h2>Why, per point</h2>", f'<p class="note">{escape(NOTE)}</p>']
    by_point: dict[int, list[Why]] = defaultdict(list)
    for w in whys:
        by_point[w.point].append(w)
    for point in sorted(by_point):
        items = by_point[point]
        parts.append(f"<h3>{escape(items[0].point_label)}</h3><ul>")
        for w in items:
            reasons = "".join(f"<li>{escape(r.text)}</li>" for r in w.explanation.reasons)
            parts.append(f'<li><b>{escape(w.method)}</b>: run <a href="{escape(w.link)}">{escape(w.run_key)}</a> '
                         f"(median of {w.explained} explained): {escape(facts(w.explanation))}"
                         + (f"<ul>{reasons}</ul>" if reasons else "") + "</li>")
        parts.append("</ul>")
    return "\n".join(parts)
