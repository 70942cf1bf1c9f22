"""A sweep run until decided (issue 37 part 2, `quiclab sweep --until-verdict BASELINE`): which points are still
open after the runs recorded so far, and which runs the next round holds. Pure: from the planned run keys and the
recorded rows (what is on disk), nothing else; lab/run/rounds.py runs the rounds.

- **Rounds.** A round is one repeat of every open point: all its methods (protocol, client, server) over that
  repeat's one link seed (lab/plan/plan.py link_seed), so every comparison stays paired. A point's repeats complete
  in order; a repeat with some of its runs recorded (an interrupted round) is finished first by the next round.
- **The comparisons.** At each point, every other method's median transfer time (page time for pages) against the
  baseline's, by the paired sequential rule of lab/stats/sequential.py over the completed repeats: the per-pair
  ratios method/baseline, censored (failed, timed-out) pairs at their least favourable value for each end
  (lab/stats/paired.py), never dropped. Each comparison's verdict is the one at its first deciding look (n pairs),
  kept from then on; its guarantees are those of the sequential rule (each error at most alpha over the whole
  sequence, per comparison).
- **A point stops** when every comparison is decided (equivalent / differs), at the most repeats (the undecided
  ones: no verdict), or when it cannot be judged by the paired rule: the baseline has no results there (e.g. it is
  unsupported at that point) or a pairing is broken (a result without its partner). A method with no results at a
  point (unsupported there) is not compared and is listed as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lab.errors import UsageError
from lab.results.folder import is_result
from lab.results.schema import RunRecord
from lab.stats.fmt import fmt_est
from lab.stats.paired import pair_up
from lab.stats.sequential import Look, SequentialPlan, boundaries, look
from lab.stats.stats import Obs
from lab.stats.verdict import group_samples

Method = tuple[str, str, str]  # protocol, client, server
Slot = tuple[int, int]  # point index, repeat
Stop = Literal["open", "decided", "most repeats", "not comparable"]
Verdict = Literal["equivalent", "differs", "no verdict", "continue", "unsupported", "unpaired"]

DEFAULT_MAX_REPEATS = 20
DEFAULT_RHO = 0.3  # spends enough by 5 pairs (1/32 <= alpha (5/20)^0.3 = 0.033) for a verdict at the first look
METRIC = "median transfer time (page time for pages): per-pair ratios method / baseline"


def method_name(m: Method) -> str:
    """"h3/curl/nginx" (as the run keys name a method)."""
    return "/".join(m)


def method_of(r: RunRecord) -> Method:
    return (r.protocol, r.client, r.server)


def resolve_baseline(text: str, methods: Sequence[Method], flag: str = "--until-verdict") -> Method:
    """The one method that `text` names: "/"-separated parts each equal to its protocol, client or server (e.g.
    "h1", "h2/curl", "h3/gtlsclient/ngtcp2"); anything else is a UsageError naming the value and what is allowed."""
    parts = [p.strip() for p in text.split("/") if p.strip()]
    hits = [m for m in methods if parts and all(p in m for p in parts)]
    if len(hits) == 1:
        return hits[0]
    allowed = ", ".join(method_name(m) for m in methods)
    if not hits:
        raise UsageError(f"invalid {flag} {text!r}: no method of the plan is that; allowed: {allowed} (or any "
                         "part that names one alone, e.g. its protocol)")
    raise UsageError(f"invalid {flag} {text!r}: names {len(hits)} methods ({', '.join(map(method_name, hits))}); "
                     f"allowed: {allowed}")


class Rule(BaseModel):
    """What a sweep run until decided compares and how: recorded in the manifest (lab/results/folder.py
    UntilVerdict)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    baseline: str = Field(description="the method every other is compared with, e.g. h1/curl/nginx")
    max_repeats: int = Field(DEFAULT_MAX_REPEATS, ge=1, le=1000)
    margin: float = Field(0.10, gt=0, le=1, description="equivalence band 1/(1+m) .. 1+m of the ratio")
    alpha: float = Field(0.05, gt=0, le=0.25, description="bound on each error, per comparison, over the sequence")
    rho: float = Field(DEFAULT_RHO, gt=0, le=10, description="spending alpha * (n / max_repeats) ** rho")

    @property
    def base(self) -> Method:
        p, c, s = self.baseline.split("/")
        return p, c, s

    def plan(self) -> SequentialPlan:
        """A look after every round: 1 .. max_repeats pairs (the boundary allows no verdict before it can spend)."""
        return SequentialPlan(looks=tuple(range(1, self.max_repeats + 1)), margin=self.margin, alpha=self.alpha,
                              rho=self.rho)


@dataclass(frozen=True)
class Comparison:
    """One method against the baseline at one point: its verdict and the pairs it was reached with."""

    method: Method
    verdict: Verdict
    n: int  # pairs at the deciding look (else the pairs so far)
    lo: str  # the interval's ends as shown ("-" when none)
    hi: str
    reason: str


@dataclass(frozen=True)
class PointState:
    """A point after the runs recorded so far."""

    index: int
    label: str
    repeats: int  # completed repeats (every planned run of the repeat recorded), counted from repeat 0
    stop: Stop
    reason: str
    comparisons: tuple[Comparison, ...]
    runs: int  # runs recorded at this point (a partly recorded repeat's too)


def _first_deciding(pairs: Sequence[tuple[Obs, Obs]], rule: Rule) -> Look:
    """The look that decided over these pairs (in repeat order), else the look at all of them."""
    plan = rule.plan()
    bounds = boundaries(plan)
    result = None
    for n in range(1, len(pairs) + 1):
        result = look(pairs[:n], plan, bounds)
        if result.outcome in ("equivalent", "differs", "no verdict"):
            return result
    assert result is not None
    return result


def _compare(base: Sequence[RunRecord], other: Sequence[RunRecord], method: Method, rule: Rule) -> Comparison:
    sa, sb = group_samples(base), group_samples(other)
    if not sb.time:
        return Comparison(method, "unsupported", 0, "-", "-", "no results at this point (" + (
            ", ".join(sorted({r.status for r in other})) or "no runs") + "): not compared")
    pairing = pair_up(sa.time, sa.keys, sb.time, sb.keys)
    if pairing.pairs is None:
        return Comparison(method, "unpaired", 0, "-", "-", pairing.why)
    lk = _first_deciding(pairing.pairs, rule)
    verdict: Verdict = lk.outcome
    return Comparison(method, verdict, lk.n, fmt_est(lk.lo), fmt_est(lk.hi), lk.reason)


def point_state(index: int, label: str, slots: Mapping[int, set[str]], records: Mapping[str, RunRecord],
                rule: Rule) -> PointState:
    """One point: `slots` its planned run keys per repeat (0 .. max_repeats - 1), `records` the recorded results by
    run key."""
    done = 0
    while done in slots and all(k in records for k in slots[done]):
        done += 1
    runs = sum(1 for keys in slots.values() for k in keys if k in records)
    used = [records[k] for rep in range(done) for k in slots[rep]]
    by: dict[Method, list[RunRecord]] = {}
    for r in used:
        by.setdefault(method_of(r), []).append(r)
    base = by.pop(rule.base, [])
    if done == 0:
        return PointState(index, label, 0, "open", "no repeat complete yet", (), runs)
    if not group_samples(base).time:
        return PointState(index, label, done, "not comparable", f"the baseline {rule.baseline} has no results here ("
                          + (", ".join(sorted({r.status for r in base})) or "no runs") + ")", (), runs)
    comps = tuple(_compare(base, rs, m, rule) for m, rs in sorted(by.items()))
    judged = [c for c in comps if c.verdict != "unsupported"]
    broken = [c for c in judged if c.verdict == "unpaired"]
    if broken:
        return PointState(index, label, done, "not comparable",
                          f"{method_name(broken[0].method)}: {broken[0].reason}", comps, runs)
    if not judged:
        return PointState(index, label, done, "not comparable", "no other method has results here", comps, runs)
    open_ = [c for c in judged if c.verdict == "continue"]
    if open_ and done < rule.max_repeats:
        return PointState(index, label, done, "open", f"{len(open_)} of {len(judged)} comparisons undecided", comps,
                          runs)
    undecided = [c for c in judged if c.verdict not in ("equivalent", "differs")]
    if undecided:
        return PointState(index, label, done, "most repeats",
                          f"{len(undecided)} of {len(judged)} comparisons without a verdict at {done} repeats (the "
                          "most allowed)", comps, runs)
    return PointState(index, label, done, "decided", f"all {len(judged)} comparisons decided", comps, runs)


def slots_of(keys: Sequence[tuple[str, int, int]]) -> dict[int, dict[int, set[str]]]:
    """(run key, point, repeat) of each planned run -> point -> repeat -> its run keys."""
    out: dict[int, dict[int, set[str]]] = {}
    for key, point, repeat in keys:
        out.setdefault(point, {}).setdefault(repeat, set()).add(key)
    return out


def recorded(records: Sequence[RunRecord]) -> dict[str, RunRecord]:
    """The recorded results by run key (the first row of a key, as a resume keeps it)."""
    out: dict[str, RunRecord] = {}
    for r in records:
        if is_result(r) and r.run_key not in out:
            out[r.run_key] = r
    return out


def states(slots: Mapping[int, Mapping[int, set[str]]], labels: Mapping[int, str], records: Sequence[RunRecord],
           rule: Rule) -> list[PointState]:
    """Every point's state from the records on disk."""
    by_key = recorded(records)
    return [point_state(p, labels.get(p, str(p)), slots[p], by_key, rule) for p in sorted(slots)]


def next_round(slots: Mapping[int, Mapping[int, set[str]]], pts: Sequence[PointState],
               records: Sequence[RunRecord]) -> list[str]:
    """The run keys of the next round: for each open point, the runs of its first incomplete repeat not yet
    recorded (an interrupted round's rest, else the next repeat). Empty: every point has stopped."""
    by_key = recorded(records)
    out: list[str] = []
    for st in pts:
        if st.stop == "open" and st.repeats in slots[st.index]:
            out += sorted(k for k in slots[st.index][st.repeats] if k not in by_key)
    return out


# --- the manifest's record ---------------------------------------------------------------------------------------


class ComparisonRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    verdict: Verdict
    n: int
    lo: str
    hi: str
    reason: str


class PointRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    label: str
    n: int  # completed repeats: the n the point needed (or reached)
    stop: Stop
    reason: str
    runs: int
    comparisons: list[ComparisonRecord]


class Levels(BaseModel):
    """The sequential rule's levels: nominal (alpha, each error per comparison) and spent (the exact first-passage
    probability of the boundary at the most repeats, below alpha because the sign walk is discrete)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nominal: float
    spent: float
    first_look: int | None  # the fewest pairs at which a verdict is possible


class Record(BaseModel):
    """The manifest's `until_verdict` document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: Rule
    method: str = ("sequential sign test on the per-pair log ratios, alpha spending alpha * (n / max) ** rho over "
                   "a look after every round (lab/stats/sequential.py)")
    metric: str = METRIC
    levels: Levels
    points: list[PointRecord]
    open: int
    runs: int


def levels(rule: Rule) -> Levels:
    bounds = boundaries(rule.plan())
    first = next((b.n for b in bounds if b.k is not None), None)
    return Levels(nominal=rule.alpha, spent=round(bounds[-1].spent, 6), first_look=first)


def record(rule: Rule, pts: Sequence[PointState]) -> Record:
    return Record(rule=rule, levels=levels(rule), open=sum(1 for p in pts if p.stop == "open"),
                  runs=sum(p.runs for p in pts),
                  points=[PointRecord(index=p.index, label=p.label, n=p.repeats, stop=p.stop, reason=p.reason,
                                      runs=p.runs,
                                      comparisons=[ComparisonRecord(method=method_name(c.method), verdict=c.verdict,
                                                                    n=c.n, lo=c.lo, hi=c.hi, reason=c.reason)
                                                   for c in p.comparisons])
                          for p in pts])
