"""The report's "why, per point" section (issue 25): for each point and method, the median run among those with an
explanation (`explain.json` beside the run's evidence, lab/explain) — its round trips before the request, the
drops the captures counted and whether the emulator's counters agree, what the sender retransmitted and how often
it cut its window — with the explanation's own ranked reasons and a link to the record; and, where two or more
methods' median runs carry a timeline (explain.json's `timeline`, lab/explain/timeline.py), the versus part: each
one's transfer time split into handshake, loss recovery and the rest, the differences against the first method
(lab/explain/versus.py's `versus`), and their delivered-bytes-vs-time curves on one plot. Nothing when no run of
the sweep was explained (sweeps without captures), so their reports are unchanged; records without a timeline
(explained before it existed) get no versus part."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lab.explain import versus as vs
from lab.explain.model import EXPLAIN_JSON, Explanation, Figure, Timeline
from lab.quantiles import median, middle
from lab.results.schema import RunRecord
from lab.stats.stats import method_label

NOTE = ("Per point and method: the explanation of the run with the median time among the explained runs (the lower "
        "of the two middle ones for an even count), from that run's own captures and the emulator's counters "
        "(docs/explain.md says what each figure means and where it comes from). A run whose captures disagree with "
        "the emulator's counters is shown as invalid, not explained.")
MINUS = "\u2212"  # of the difference rows: "B \u2212 A"
VERSUS_NOTE = ("The methods at this point compared, each by its median explained run (as above): the run's transfer "
               "time (runs.csv) split into handshake (the client's first packet to its request), loss recovery (the "
               "time the link sat unused while a hole was open, plus the link time of the re-sent bytes) and the "
               "rest, which add up to the run's total; as `quiclab explain --versus` splits it (docs/explain.md). A "
               "row B \u2212 A is each component's difference against the first method: they add up to the "
               "difference of the two runs' totals; the difference of the two methods' medians over all their "
               "explained runs is shown beside it. The plot: the bytes delivered in order at the client's side of "
               "the emulator over time, for the same runs.")


@dataclass(frozen=True)
class Why:
    point: int
    point_label: str
    method: str
    run_key: str
    link: str  # explain.json, relative to the sweep folder
    explained: int  # explained runs of this point and method
    explanation: Explanation
    median_s: float | None = None  # the median transfer time of those runs


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
        _, rec, path = middle(runs)
        try:
            e = Explanation.model_validate_json(path.read_text())
        except (OSError, ValidationError, ValueError):
            continue  # an unreadable record: the table of `quiclab explain` says why; nothing invented here
        out.append(Why(point, rec.point_label, method, rec.run_key, str(path.relative_to(folder)), len(runs), e,
                       median(t for t, _, _ in runs)))
    return out


def _side(w: Why, t: Timeline) -> vs.Components:
    """A method's side of versus.py's comparison from its median explained run's timeline."""
    return vs.Components(method=w.method, runs=w.explained, median_ms=round((w.median_s or 0.0) * 1000, 3),
                         run_key=w.run_key, total_ms=t.total_ms, handshake_ms=t.handshake_ms,
                         loss_recovery_ms=t.loss_recovery_ms, rest_ms=t.rest_ms, stalled_ms=t.stalled_ms,
                         resent_ms=t.resent_ms, episodes=t.episodes, resent_bytes=t.resent_bytes,
                         last_byte_ms=t.last_byte_ms)


def _timed(items: Sequence[Why]) -> list[tuple[Why, Timeline]]:
    """The methods whose median explained run has a timeline (records written before it existed have none)."""
    return [(w, w.explanation.timeline) for w in items if w.explanation.timeline is not None and w.median_s is not None]


def comparisons(items: Sequence[Why]) -> list[vs.Versus]:
    """One point's methods whose median explained run has a timeline, each against the first of them (the
    report's order): versus.py's `versus` of their sides; empty for fewer than two such methods."""
    sides = _timed(items)
    if len(sides) < 2:
        return []
    (wa, ta), rest = sides[0], sides[1:]
    a = _side(wa, ta)
    return [vs.versus(wa.point_label, a, _side(wb, tb), ta.rate_bps) for wb, tb in rest]


def versus_table(pairs: Sequence[vs.Versus]) -> tuple[list[str], list[list[str]]]:
    """The split per method (ms) and a row "B - A" per pair (with a minus sign)."""
    f = "{:.1f}".format
    cols = ["method", "run", "explained runs", "their median ms", "the run's transfer time ms", "handshake ms",
            "loss recovery ms", "rest ms"]
    sides = [pairs[0].a, *(v.b for v in pairs)]
    rows = [[c.method, c.run_key, str(c.runs), f(c.median_ms), f(c.total_ms), f(c.handshake_ms),
             f(c.loss_recovery_ms), f(c.rest_ms)] for c in sides]
    rows += [[f"{v.b.method} {MINUS} {v.a.method}", "", "", f(v.median_difference_ms), f(v.difference_ms),
              f(v.handshake_ms), f(v.loss_recovery_ms), f(v.rest_ms)] for v in pairs]
    return cols, rows


def _numbers_table(table: tuple[list[str], list[list[str]]]) -> str:
    """An HTML table whose columns after the first two are numbers (right-aligned, negative ones too)."""
    from html import escape

    cols, rows = table
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f'<td class="num">{escape(c)}</td>' if i >= 2 else f"<td>{escape(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _literal(text: str) -> str:
    """Text matplotlib draws as given: `$` would start math mode, a leading `_` hide a legend entry."""
    return text.replace("$", r"\$").lstrip("_") or "?"


def curves_svg(title: str, curves: Sequence[tuple[str, Timeline]], salt: str) -> str:
    """The in-order curves (bytes vs ms) of the runs on one axis, as an inline SVG element (matplotlib, imported
    here: it is slow to import); `salt` keeps the element ids of several plots in one page apart."""
    import matplotlib
    from matplotlib.figure import Figure

    from lab.report.svg import svg_element

    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for i, (label, t) in enumerate(curves):
        ax.step(t.t_ms, t.in_order_bytes, where="post", color=f"C{i}", linewidth=1.4, label=_literal(label))
    ax.set_xlim(left=0)  # from the client's first packet: the handshake is the stretch before the first byte
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time from the client's first packet (ms)")
    ax.set_ylabel("bytes delivered in order (client side)")
    ax.set_title(_literal(title), fontsize=10)
    ax.grid(True, alpha=0.35)
    ax.legend(loc="best", fontsize=9)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return svg_element(buf.getvalue().decode())


def versus_part(items: Sequence[Why]) -> str:
    """One point's versus part (HTML): the table and the plot; "" for fewer than two methods with a timeline."""
    from html import escape

    pairs = comparisons(items)
    if not pairs:
        return ""
    notes = list(dict.fromkeys(n for v in pairs for n in v.notes))
    curves = [(w.method, t) for w, t in _timed(items)]
    title = f"{pairs[0].point}: bytes delivered in order, the median explained run of each method"
    parts = [f'<p class="note">{escape(VERSUS_NOTE)}</p>', _numbers_table(versus_table(pairs)),
             *(f'<p class="note">note: {escape(n)}</p>' for n in notes),
             f'<div class="plot">{curves_svg(title, curves, salt=f"why-{items[0].point}")}</div>']
    return "\n".join(parts)


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
        if versus := versus_part(items):
            parts.append(versus)
    return "\n".join(parts)
