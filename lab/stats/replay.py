"""A replay of committed runs, not a measurement: how `--until-verdict` would have gone on a sweep folder that ran
a fixed number of repeats (e.g. results/reference/connectify-cc, 5 repeats), against that fixed design; and
(`versus_fixed`) a sweep that did run until decided against the fixed design of its own first 5 repeats.

The rounds of lab/stats/until.py are replayed over the folder's own runs in repeat order (round r hands each open
point its runs of repeat r - 1, read from the folder instead of measured); a point still open when the folder
has no more repeats is "open at the folder's end" (a real sweep would run it on, up to its most repeats). The
fixed design is the same comparisons, judged once with all the folder's repeats by the paired rule of
lab/stats/verdict.py (judge_runs: the median time, paired where the pairs are whole)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.results.schema import RunRecord
from lab.stats import until
from lab.stats.verdict import Margins, group_samples, judge_runs


@dataclass(frozen=True)
class Replayed:
    """Points decided and runs used by the replayed rounds and by the fixed design of the folder."""

    points: int
    repeats: int  # the folder's repeats per point (the fixed design)
    sequential_decided: int  # every comparison equivalent / differs
    sequential_runs: int
    sequential_open: int  # open when the folder had no more repeats
    fixed_decided: int
    fixed_runs: int
    #: at the points the fixed design decided (its large effects): runs the rounds used there and the fixed runs
    runs_where_fixed_decided: tuple[int, int]
    disagreements: list[str]  # comparisons both decide, with different verdicts
    states: list[until.PointState]


def _fixed(records: Sequence[RunRecord], rule: until.Rule) -> tuple[dict[tuple[int, until.Method], str], set[int]]:
    """The fixed design's verdict per (point, method) and the points where every comparison is decided."""
    margins = Margins(median=rule.margin, alpha=rule.alpha)
    by: dict[int, dict[until.Method, list[RunRecord]]] = {}
    for r in until.recorded(records).values():
        by.setdefault(r.point, {}).setdefault(until.method_of(r), []).append(r)
    verdicts: dict[tuple[int, until.Method], str] = {}
    decided: set[int] = set()
    for point, methods in by.items():
        base = methods.get(rule.base, [])
        if not group_samples(base).time:
            continue  # the baseline has no results here: not comparable
        judged = [(m, judge_runs(base, rs, margins)) for m, rs in methods.items()
                  if m != rule.base and group_samples(rs).time]  # (a method without results here: not compared)
        for m, j in judged:
            verdicts[(point, m)] = j.verdict
        if judged and all(j.verdict != "inconclusive" for _, j in judged):
            decided.add(point)
    return verdicts, decided


def replay(records: Sequence[RunRecord], rule: until.Rule) -> Replayed:
    """Replay the rounds over a folder's recorded runs (see the module doc)."""
    rows = until.recorded(records)
    slots = until.slots_of([(r.run_key, r.point, r.repeat) for r in rows.values()])
    labels = {r.point: r.point_label for r in rows.values()}
    seen: list[RunRecord] = []
    while True:
        pts = until.states(slots, labels, seen, rule)
        keys = until.next_round(slots, pts, seen)
        if not keys:
            break
        seen += [rows[k] for k in keys]
    return _versus(pts, seen, list(rows.values()), rule, len(slots))


def versus_fixed(records: Sequence[RunRecord], rule: until.Rule, repeats: int = 5) -> Replayed:
    """A sweep run until decided (its own runs: a measurement) against the fixed design of its own first `repeats`
    repeats (every point ran at least those unless it could not be compared: the first look is at 5 pairs): the
    same link seeds as a fixed sweep of the scenario would have used."""
    rows = until.recorded(records)
    slots = until.slots_of([(r.run_key, r.point, r.repeat) for r in rows.values()])
    labels = {r.point: r.point_label for r in rows.values()}
    pts = until.states(slots, labels, list(rows.values()), rule)
    return _versus(pts, list(rows.values()), [r for r in rows.values() if r.repeat < repeats], rule, len(slots))


def _versus(pts: list[until.PointState], seen: list[RunRecord], fixed_rows: list[RunRecord], rule: until.Rule,
            points: int) -> Replayed:
    rows = {r.run_key: r for r in fixed_rows}
    slots = until.slots_of([(r.run_key, r.point, r.repeat) for r in fixed_rows])
    fixed, fixed_decided = _fixed(fixed_rows, rule)
    disagree = [f"{p.label} {until.method_name(c.method)}: {c.verdict} (rounds) vs {fixed[(p.index, c.method)]} "
                f"(fixed)" for p in pts for c in p.comparisons
                if c.verdict in ("equivalent", "differs") and fixed.get((p.index, c.method)) in ("equivalent",
                                                                                                 "differs")
                and c.verdict != fixed[(p.index, c.method)]]
    where = (sum(p.runs for p in pts if p.index in fixed_decided),
             sum(1 for r in rows.values() if r.point in fixed_decided))
    return Replayed(points=points, repeats=max((len(v) for v in slots.values()), default=0),
                    sequential_decided=sum(1 for p in pts if p.stop == "decided"), sequential_runs=len(seen),
                    sequential_open=sum(1 for p in pts if p.stop == "open"), fixed_decided=len(fixed_decided),
                    fixed_runs=len(rows), runs_where_fixed_decided=where, disagreements=disagree, states=pts)


def describe(name: str, r: Replayed, rule: until.Rule, replayed: bool = True) -> str:
    """One paragraph, labelled as what it is: a replay of committed runs, or a sweep run until decided (measured)
    against the fixed design of its own first repeats."""
    head = ("REPLAY of committed runs, not a new measurement" if replayed
            else f"MEASURED: a sweep run until decided, against the fixed design of its own first {r.repeats} repeats")
    still = (f"{r.sequential_open} still open when the folder's {r.repeats} repeats ran out (a real sweep would go "
             "on)" if replayed else f"{r.sequential_open} still open (the sweep did not finish)")
    return (f"{head}: {name} ({r.points} points), baseline {rule.baseline}. Rounds until decided (at most "
            f"{rule.max_repeats} repeats): {r.sequential_decided} points decided with {r.sequential_runs} runs, "
            f"{still}. The fixed {r.repeats} repeats: {r.fixed_decided} points decided with {r.fixed_runs} runs. "
            f"Where the fixed design decided: {r.runs_where_fixed_decided[0]} runs by rounds, "
            f"{r.runs_where_fixed_decided[1]} fixed. Verdicts that differ between the two: {len(r.disagreements)}.")
