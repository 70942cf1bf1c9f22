"""Statistics over a sweep's runs: per-group medians with IQR and order-statistic CIs, and paired ratios.

Definitions (docs/results.md "How to read the statistics" states them for readers; the reports' notes repeat them):
- A *result* is a run with status "ok" and a measured time (completed), or a run with status "failed" or
  "timeout": a transfer that did not deliver the verified object within its timeout, counted as right-censored at
  its own end (`total_s`, when it failed or timed out; `timeout_s` when that is unknown): its time is known only to
  be above that, its goodput below size*8/that. Every other run
  ("unsupported": never ran; "interrupted": legacy rows; "ok" without a time; a lab failure older versions
  recorded as a failed run) is not a result: it is excluded and counted per reason (`exclusion_reason`), never
  dropped silently. Which rows are results at all is the folder's one rule (lab.results.folder.is_result).
- Worst rank: a censored time ranks above every completed time, a censored goodput below every completed goodput.
  A median, quartile or CI end that falls on a censored value is reported as the bound it has (Est.bound ">"
  or "<"), never as a number.
- Runs without either (runs.csv written before `timeout_s` existed) are censored at the largest completed
  transfer time of their group (every completed run of a group finished within the group's one timeout, so the
  bound holds); with no completed run in the group the bound is unknown (Est.value None).
- Median and quartiles interpolate linearly between order statistics (numpy's default percentile rule; the lab's
  one rule, lab/quantiles.py).
- CI of the median: the distribution-free order-statistic interval [x(k), x(n-k+1)] with the largest k (the
  narrowest symmetric pair) whose exact coverage 1 - 2*P(Binom(n, 1/2) <= k-1) is at least 95 %. For n < 6 no
  pair reaches 95 %: the CI is the range [x(1), x(n)] at the level it has (50 % at n=2 ... 93.75 % at n=5).
  No CI for n < 2. Every CI carries its achieved level (exact for continuous data; ties only raise it).
- Paired ratio numerator/denominator: the median of the per-pair ratios, a pair being the same point, client,
  server and repeat (and so the same link seed), with the order-statistic CI of that median. A pair with one side
  censored has a ratio bounded on one side and ranks beyond every pair that both completed (time ratio "> T/t"
  above them when the numerator did not complete, "< t/T" below them when the denominator did not); a pair with
  both sides censored is indeterminate: excluded and counted, as are repeats with a result on one side only.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np

from lab.quantiles import lerp, position
from lab.results.folder import is_result
from lab.results.schema import RunRecord

PROTOCOL_ORDER = ("h1", "h2", "h3")
PROTOCOL_LABELS = {"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}
CI_TARGET = Fraction(95, 100)  # the coverage a CI must reach where n allows it
CENSORED_STATUSES = ("failed", "timeout")  # results that did not complete within their timeout
NO_TIMING = "ok-without-timing"  # exclusion reason of an "ok" row that lacks total_s or goodput_bps
LEGACY_LAB_FAILURE = "lab failure (legacy)"  # exclusion reason of a lab failure older versions recorded as "failed"
BOTH_CENSORED = "both censored"  # a pair whose ratio is indeterminate
UNPAIRED = "unpaired"  # a repeat with a result on one side only
SEEDS_DIFFER = "seeds differ"  # compare: the same repeat in two sweeps ran over different link seeds

Bound = Literal["", ">", "<", "?"]
Rank = Literal[-1, 0, 1]


@dataclass(frozen=True)
class Est:
    """A statistic that censoring may leave known only as a bound.

    bound "": `value` is the statistic; ">": the statistic is above `value`; "<": below `value`;
    "?": not determinable (it falls between values censored on opposite sides). value None with ">" or "<": the
    bound itself is unknown (censored runs without a timeout and nothing completed to bound them).
    """

    value: float | None
    bound: Bound = ""

    @property
    def exact(self) -> bool:
        return self.bound == "" and self.value is not None


@dataclass(frozen=True)
class Obs:
    """One result: exact (rank 0), or censored and known only to lie beyond `value` (rank 1: above every exact
    value; rank -1: below). value None: a censored value whose bound is unknown."""

    value: float | None
    rank: Rank = 0


@dataclass(frozen=True)
class CI:
    """Order-statistic CI of the median: [x(k), x(n-k+1)], whose coverage is `level` (exact, e.g. 0.9375)."""

    lo: Est
    hi: Est
    level: float
    k: int


@dataclass(frozen=True)
class Dist:
    """Summary of one metric over the results of a group (or over the per-pair ratios of a comparison)."""

    n: int  # results: exact + censored
    n_censored: int
    median: Est
    q1: Est
    q3: Est
    ci: CI | None  # None when n < 2
    mean: float | None  # None when n == 0 or any value is censored (a mean needs every value)
    sd: float | None  # sample standard deviation (ddof=1); None when n < 2 or any value is censored


@dataclass(frozen=True)
class GroupStats:
    point: int
    point_label: str
    x_name: str
    x: float
    client: str
    server: str
    protocol: str
    n: int  # results: completed + censored runs
    n_censored: int = 0
    n_excluded: int = 0
    censored: dict[str, int] = field(default_factory=dict)  # status (failed, timeout) -> count
    excluded: dict[str, int] = field(default_factory=dict)  # exclusion reason (status or NO_TIMING) -> count
    total_s: Dist | None = None  # None when n == 0
    goodput_bps: Dist | None = None

    @property
    def n_completed(self) -> int:
        return self.n - self.n_censored


@dataclass(frozen=True)
class PairedRatio:
    """Per-pair ratios numerator/denominator of transfer time and of goodput over the same pairs."""

    n_pairs: int  # pairs that enter: a result on both sides, at most one of them censored
    n_censored: int  # of those, pairs with one side censored (ratio known as a bound)
    excluded: dict[str, int]  # repeats that do not enter, by reason (BOTH_CENSORED, UNPAIRED, SEEDS_DIFFER)
    time: Dist | None  # None when n_pairs == 0
    goodput: Dist | None

    @property
    def n_excluded(self) -> int:
        return sum(self.excluded.values())


@dataclass(frozen=True)
class RatioStats:
    """numerator/denominator (e.g. HTTP/3 / HTTP/1.1) at one point and client/server pair."""

    point: int
    point_label: str
    x_name: str
    x: float
    client: str
    server: str
    numerator: str
    denominator: str
    pairs: PairedRatio

    @property
    def n_pairs(self) -> int:
        return self.pairs.n_pairs

    @property
    def time_ratio(self) -> Est | None:  # < 1: the numerator (HTTP/3) was faster
        return self.pairs.time.median if self.pairs.time else None

    @property
    def time_ci(self) -> CI | None:
        return self.pairs.time.ci if self.pairs.time else None

    @property
    def goodput_ratio(self) -> Est | None:  # > 1: the numerator was faster
        return self.pairs.goodput.median if self.pairs.goodput else None

    @property
    def goodput_ci(self) -> CI | None:
        return self.pairs.goodput.ci if self.pairs.goodput else None


def protocol_label(protocol: str) -> str:
    return PROTOCOL_LABELS.get(protocol, protocol)


def method_label(protocol: str, client: str, server: str) -> str:
    """E.g. "HTTP/3 curl→nginx"."""
    return f"{protocol_label(protocol)} {client}→{server}"


# ---------------------------------------------------------------------------------------------------------------
# Order statistics


def order_stat_ci_rank(n: int, target: Fraction = CI_TARGET) -> tuple[int, Fraction] | None:
    """(k, exact coverage) of the order-statistic CI [x(k), x(n-k+1)] of the median of n values.

    k is the largest (narrowest interval) whose coverage 1 - 2*P(Binom(n, 1/2) <= k-1) reaches `target`; when
    none does (n < 6 for 95 %), k = 1 (the range) with the coverage it has. None for n < 2.
    """
    if n < 2:
        return None
    total = 2**n
    tail = 1  # P(B <= k-1) * 2**n for k = 1: C(n, 0)
    k = 1
    while True:
        next_tail = tail + math.comb(n, k)  # P(B <= k) * 2**n: the tail of k+1
        if 2 * (k + 1) > n + 1 or Fraction(total - 2 * next_tail, total) < target:
            break
        k, tail = k + 1, next_tail
    return k, Fraction(total - 2 * tail, total)


def _sort_key(o: Obs) -> tuple[int, float]:
    if o.value is None:  # unknown bound: the weakest statement of its side
        return o.rank, -math.inf if o.rank > 0 else math.inf
    return o.rank, o.value


def _est(o: Obs) -> Est:
    return Est(o.value, "" if o.rank == 0 else ">" if o.rank > 0 else "<")


def quantile(obs: Sequence[Obs], p: float) -> Est:
    """The lab's quantile rule (lab/quantiles.py: linear interpolation, numpy's default) over observations sorted by
    _sort_key (worst rank)."""
    j, w = position(len(obs), p)
    a = obs[j]
    if w == 0 or j + 1 >= len(obs):
        return _est(a)
    b = obs[j + 1]
    if a.rank == 0 and b.rank == 0:
        return Est(lerp(a.value, b.value, w)) if a.value is not None and b.value is not None else Est(None, "?")
    if a.rank < 0 < b.rank:
        return Est(None, "?")
    bound: Bound = ">" if b.rank > 0 else "<"  # (exact, high), (high, high): above; (low, *): below
    value = lerp(a.value, b.value, w) if a.value is not None and b.value is not None else None
    return Est(value, bound)


def as_obs(values: Sequence[float | Obs]) -> list[Obs]:
    return [v if isinstance(v, Obs) else Obs(float(v)) for v in values]


def median_ci(values: Sequence[float | Obs]) -> CI | None:
    """Order-statistic CI of the median (see order_stat_ci_rank); censored ends are bounds. None for n < 2."""
    obs = sorted(as_obs(values), key=_sort_key)
    rank = order_stat_ci_rank(len(obs))
    if rank is None:
        return None
    k, level = rank
    return CI(lo=_est(obs[k - 1]), hi=_est(obs[len(obs) - k]), level=float(level), k=k)


def describe(values: Sequence[float | Obs]) -> Dist | None:
    """Median, quartiles, order-statistic CI of the median, and (with nothing censored) mean and sd; None when
    empty. Plain floats are exact values; Obs may be censored (worst rank)."""
    obs = sorted(as_obs(values), key=_sort_key)
    if not obs:
        return None
    n_censored = sum(1 for o in obs if o.rank != 0)
    mean = sd = None
    if n_censored == 0:
        a = np.asarray([o.value for o in obs], dtype=float)
        mean = float(np.mean(a))
        sd = float(np.std(a, ddof=1)) if a.size >= 2 else None
    return Dist(n=len(obs), n_censored=n_censored, median=quantile(obs, 0.5), q1=quantile(obs, 0.25),
                q3=quantile(obs, 0.75), ci=median_ci(obs), mean=mean, sd=sd)


# ---------------------------------------------------------------------------------------------------------------
# Runs -> observations


def is_censored(r: RunRecord) -> bool:
    """A failed or timed-out run that is a result (lab.results.folder.is_result): right-censored at its own end."""
    return r.status in CENSORED_STATUSES and is_result(r)


def exclusion_reason(r: RunRecord) -> str | None:
    """Why a run does not enter the statistics, or None when it does (completed or censored).

    First the folder's one rule for what a recorded row is (lab.results.folder.is_result, which a resume and a merge
    apply too): a row that is no result is excluded (a legacy "interrupted" row by its status, a legacy lab failure
    as LEGACY_LAB_FAILURE). Then the statistics' own rule: of the results, failed and timed-out runs count
    (censored), "ok" runs count with a measured time (else NO_TIMING), any other status (unsupported) is excluded
    by its status."""
    if not is_result(r):
        return r.status if r.status != "failed" else LEGACY_LAB_FAILURE
    if is_censored(r):
        return None
    if r.status != "ok":
        return r.status
    if r.total_s is None or r.goodput_bps is None:
        return NO_TIMING
    return None


def excluded_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in records if exclusion_reason(r) is not None]


def censored_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in records if is_censored(r)]


def _counts(keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def exclusion_counts(records: Sequence[RunRecord]) -> dict[tuple[str, str], int]:
    """(reason, failure text) -> number of excluded runs (not results), most frequent first."""
    return _counts([(exclusion_reason(r) or "", r.failure.strip()) for r in excluded_runs(records)])


def censored_counts(records: Sequence[RunRecord]) -> dict[tuple[str, str], int]:
    """(status, failure text) -> number of censored runs (failed, timeout), most frequent first."""
    return _counts([(r.status, r.failure.strip()) for r in censored_runs(records)])


def _protocol_rank(p: str) -> tuple[int, str]:
    return (PROTOCOL_ORDER.index(p), "") if p in PROTOCOL_ORDER else (len(PROTOCOL_ORDER), p)


GroupKey = tuple[int, str, str, str]  # point, client, server, protocol


def group_records(records: Sequence[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
    """Records by (point, client, server, protocol): points ascending, client/server pairs in order of first
    appearance, then h1, h2, h3 (other protocols after, alphabetically)."""
    combos: dict[tuple[str, str], int] = {}
    groups: dict[GroupKey, list[RunRecord]] = {}
    for r in records:
        combos.setdefault((r.client, r.server), len(combos))
        groups.setdefault((r.point, r.client, r.server, r.protocol), []).append(r)
    order = sorted(groups, key=lambda k: (k[0], combos[(k[1], k[2])], _protocol_rank(k[3])))
    return {k: groups[k] for k in order}


@dataclass(frozen=True)
class RunObs:
    """One result run as observations: its transfer time and its goodput, and the link seed it ran over."""

    time: Obs
    goodput: Obs
    seed: int


def fallback_timeout(rs: Sequence[RunRecord]) -> float | None:
    """The censoring point for runs without timeout_s: the largest completed transfer time of their group."""
    done = [r.total_s for r in rs if exclusion_reason(r) is None and not is_censored(r) and r.total_s is not None]
    return max(done) if done else None


def censored_at(r: RunRecord, fallback: float | None) -> float | None:
    """Where a censored run's time is censored: its own end (total_s: when it failed or timed out; a run that
    aborted at 65.9 s of a 150 s timeout is known only to need more than 65.9 s), else its timeout, else
    `fallback` (the group's largest completed time, for rows written before timeout_s existed)."""
    if r.total_s is not None and r.total_s > 0:
        return r.total_s
    return r.timeout_s if r.timeout_s else fallback


def run_obs(r: RunRecord, fallback: float | None) -> RunObs:
    """A result run's observations (exclusion_reason(r) must be None): exact when completed, censored at its own
    end (censored_at) when not: time above that, goodput below size*8/that."""
    if not is_censored(r):
        if r.total_s is None or r.goodput_bps is None:
            raise ValueError(f"run {r.run_key} is not a result ({NO_TIMING})")
        return RunObs(Obs(r.total_s), Obs(r.goodput_bps), r.seed)
    t = censored_at(r, fallback)
    return RunObs(Obs(t, 1), Obs(r.size_bytes * 8 / t if t else None, -1), r.seed)


def group_obs(rs: Sequence[RunRecord]) -> dict[int, RunObs]:
    """The results of one group by repeat (a later row of the same repeat wins)."""
    fb = fallback_timeout(rs)
    return {r.repeat: run_obs(r, fb) for r in rs if exclusion_reason(r) is None}


def summarize(records: Sequence[RunRecord]) -> list[GroupStats]:
    """One GroupStats per (point, client, server, protocol), in report order (see group_records)."""
    out = []
    for (point, client, server, protocol), rs in group_records(records).items():
        fb = fallback_timeout(rs)
        results = [run_obs(r, fb) for r in rs if exclusion_reason(r) is None]
        excluded: dict[str, int] = {}
        censored: dict[str, int] = {}
        for r in rs:
            reason = exclusion_reason(r)
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + 1
            elif is_censored(r):
                censored[r.status] = censored.get(r.status, 0) + 1
        first = rs[0]
        out.append(GroupStats(
            point=point, point_label=first.point_label, x_name=first.x_name, x=first.x,
            client=client, server=server, protocol=protocol, n=len(results), n_censored=sum(censored.values()),
            n_excluded=sum(excluded.values()), censored=censored, excluded=excluded,
            total_s=describe([o.time for o in results]), goodput_bps=describe([o.goodput for o in results]),
        ))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Paired ratios


def ratio_obs(num: Obs, den: Obs) -> Obs:
    """num/den of one pair, at most one side censored. Numerator censored: the ratio is censored the same way
    (time: above T/t); denominator censored: the opposite way (time: below t/T)."""
    if num.rank != 0 and den.rank != 0:
        raise ValueError("both sides censored: the ratio is indeterminate")
    rank: Rank = num.rank if num.rank != 0 else {-1: 1, 0: 0, 1: -1}[den.rank]
    if num.value is None or den.value is None:
        return Obs(None, rank)
    return Obs(num.value / den.value if den.value else math.inf, rank)


def paired_ratio(num: Mapping[Hashable, RunObs], den: Mapping[Hashable, RunObs]) -> PairedRatio:
    """Median of per-pair ratios num/den over the keys (repeats) both sides have, with the same link seed."""
    excluded: dict[str, int] = {}
    times: list[Obs] = []
    goodputs: list[Obs] = []
    n_censored = 0
    for key in dict.fromkeys([*num, *den]):
        a, b = num.get(key), den.get(key)
        if a is None or b is None:
            reason = UNPAIRED
        elif a.seed != b.seed:
            reason = SEEDS_DIFFER
        elif a.time.rank != 0 and b.time.rank != 0:
            reason = BOTH_CENSORED
        else:
            reason = ""
        if a is None or b is None or reason:
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        n_censored += a.time.rank != 0 or b.time.rank != 0
        times.append(ratio_obs(a.time, b.time))
        goodputs.append(ratio_obs(a.goodput, b.goodput))
    return PairedRatio(n_pairs=len(times), n_censored=n_censored, excluded=excluded, time=describe(times),
                       goodput=describe(goodputs))


def ratios(records: Sequence[RunRecord], numerator: str = "h3",
           denominators: Sequence[str] = ("h1", "h2")) -> list[RatioStats]:
    """Paired ratios numerator/denominator per (point, client, server, denominator): the median of the per-pair
    ratios (pairs: the same repeat, so the same link seed) with its order-statistic CI (see the module doc)."""
    groups = group_records(records)
    cells: dict[tuple[int, str, str], dict[str, dict[int, RunObs]]] = {}
    for (point, client, server, protocol), rs in groups.items():
        if all(r.status == "unsupported" for r in rs):
            continue  # a combination that cannot run has nothing to compare (e.g. gtlsclient over HTTP/2)
        cells.setdefault((point, client, server), {})[protocol] = group_obs(rs)
    out = []
    for (point, client, server), by_proto in cells.items():
        if numerator not in by_proto:
            continue
        first = groups[(point, client, server, numerator)][0]
        for den_proto in denominators:
            if den_proto not in by_proto:
                continue
            out.append(RatioStats(
                point=point, point_label=first.point_label, x_name=first.x_name, x=first.x, client=client,
                server=server, numerator=numerator, denominator=den_proto,
                pairs=paired_ratio(by_proto[numerator], by_proto[den_proto]),
            ))
    return out
