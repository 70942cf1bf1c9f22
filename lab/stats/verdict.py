"""Do two sweeps agree? Per point x method x metric one verdict: equivalent, differs or inconclusive.

docs/results.md "Do two sweeps agree?" states the rules for readers; this module implements them, once, for every
comparison the product states: `quiclab compare` and `reproduce` (judge_records), a report's "In short" and the
seed atlas (judge_runs); `decide` is the one rule.

Design (judge_metric): **paired** where every result of A has exactly one result of B with the same repeat and link
seed and vice versa (lab/stats/paired.py: B/A = the median of the per-pair ratios, its CI the sign-based
order-statistic interval, censored pairs at their least favourable value for each end; the unpaired estimate below
is kept beside it); **unpaired** otherwise (the row says why) and always for the p95: the statistics below.

Metrics (per point and method present in both sweeps):
- `goodput`: the median goodput; for a page workload (`page:NxSIZE`) the median page time instead (`page_time`,
  the run's `total_s` = `page_time_s`);
- `time_p95`: the 95th percentile of the transfer time;
- `ttfb`: the median time to the first byte.

Samples are the *results* of lab/stats/stats.py and nothing else: completed runs, and failed or timed-out runs
right-censored at their own end (stats.censored_at: when they failed or timed out; worst rank: a censored time
ranks above every completed one, a censored goodput below); excluded runs are counted, never silently dropped. A
TTFB is exact when the run recorded one (a run that failed after its first byte still has it); a censored run
without one is censored at its own end the same way; a completed run without a TTFB is counted as missing for
that metric.

Equivalence is a TOST on the log ratio: with margin m, the (1 - 2*alpha) CI of log(B/A) must lie inside
+-log(1 + m), i.e. the ratio B/A inside (1/(1+m), 1+m): a symmetric margin on the log scale, so A vs B and B vs A
give the same verdict. m = 10 % for medians, 20 % for the p95, and for the TTFB max(m, 1 ms / median TTFB of A)
(the absolute floor converted to the log scale at the baseline median).

The CI is exact and distribution-free, not a bootstrap (no random numbers: the same runs always give the same
verdict, as every statistic of the reports; a percentile bootstrap of a median covers less than it says at the
5-10 repeats sweeps have, and of a p95 far less). Order-statistic intervals have discrete levels; every CI carries
the level it reaches:
- medians: the Hodges-Lehmann interval from the Mann-Whitney distribution: the sorted nA*nB pairwise log ratios
  log(b_j / a_i), [D(k), D(nA*nB - k + 1)] with the largest k whose coverage 1 - 2*P(U <= k-1) is at least
  1 - 2*alpha (exact for continuous data when B is A scaled; n = 3 per side: exactly 90 %; 2 per side: 66.7 %).
  Its point estimate, shown as the ratio, is the median of the pairwise ratios (the ratio of the medians when B is
  A scaled).
- p95: each side's order-statistic interval [x(r), x(s)] of its 95th percentile (coverage from Binomial(n, 0.95)),
  the narrowest reaching sqrt(1 - 2*alpha); the ratio's interval [lo_B / hi_A, hi_B / lo_A] covers with at least
  the product of the two levels. Below 58 runs per side (alpha 0.05) no such interval reaches 90 %: the p95 is
  then inconclusive and says so.
Pairwise ratios with a censored side are bounds ranking beyond every exact one (as the paired ratios of the
reports); a pair censored on both sides is indeterminate and taken as the least favourable end of the CI.

Differs: the whole CI lies outside the margin; unpaired, a two-sided Mann-Whitney rank test (exact; with ties the
exact permutation distribution; beyond 60 runs in all the normal approximation with tie and continuity correction)
must also give p < alpha (paired, the distribution-free sign interval is its own test) (criterion.rs style: a
change smaller than the margin is not called a difference). Censored values tie
with each other beyond every completed one. The CI must reach 1 - 2*alpha for either verdict.

Inconclusive: neither; the row says why. With nA and nB runs no two-sided rank test can reach a p below
2 / C(nA + nB, nA) (n = n per side: 3 -> 0.10, 4 -> 0.029, 5 -> 0.0079): at alpha 0.05 three runs per side can
never show an unpaired difference; paired, no interval reaches 90 % below 5 pairs; every such row carries that
warning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from lab.errors import UsageError
from lab.quantiles import position
from lab.results.schema import RunRecord
from lab.stats.fmt import fmt_est, sig3
from lab.stats.paired import Key as PairKey
from lab.stats.paired import pair_up, pairs_needed, sign_interval, sign_level
from lab.stats.stats import (
    Bound,
    Est,
    Obs,
    censored_at,
    exclusion_reason,
    fallback_timeout,
    group_records,
    is_censored,
    method_label,
    quantile,
    run_obs,
)

Metric = Literal["goodput", "page_time", "time_p95", "ttfb", "time"]  # "time": the median transfer time
Verdict = Literal["equivalent", "differs", "inconclusive"]
LevelKind = Literal["exact", "at least", "approximate"]
TestMethod = Literal["exact", "exact with ties", "normal approximation", "none"]
Design = Literal["paired", "unpaired"]

METRIC_LABELS: dict[str, str] = {"goodput": "median goodput Mbit/s", "page_time": "median page time s",
                                 "time_p95": "p95 time s", "ttfb": "median TTFB ms", "time": "median time s"}
METRIC_SCALE: dict[str, float] = {"goodput": 1e-6, "page_time": 1.0, "time_p95": 1.0, "ttfb": 1e3, "time": 1.0}
P95 = 0.95
#: the exact rank-test and Hodges-Lehmann distributions are used up to this many runs in all (both sides)
EXACT_MAX_N = 60
_EPS = 1e-12


# ---------------------------------------------------------------------------------------------------------------
# Settings


class Margins(BaseModel):
    """The equivalence margins (relative: 0.1 = 10 %) and the significance level. Defaults: issue 24."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    median: float = Field(0.10, gt=0, le=1, description="margin of the medians (goodput / page time, TTFB)")
    p95: float = Field(0.20, gt=0, le=1, description="margin of the transfer-time p95")
    ttfb_ms: float = Field(1.0, ge=0, le=1000, description="absolute floor of the TTFB margin (ms)")
    alpha: float = Field(0.05, gt=0, le=0.25, description="rank test level; CIs at 1 - 2*alpha (TOST)")


#: CLI flag -> (Margins field, the allowed range as the error line says it)
OPTIONS: dict[str, tuple[str, str]] = {
    "--margin": ("median", "more than 0 and at most 1 (a fraction: 0.1 = 10 %)"),
    "--margin-p95": ("p95", "more than 0 and at most 1 (a fraction: 0.2 = 20 %)"),
    "--margin-ttfb-ms": ("ttfb_ms", "0 to 1000 (milliseconds)"),
    "--alpha": ("alpha", "more than 0 and at most 0.25"),
}


def margins_from_options(margin: float = 0.10, margin_p95: float = 0.20, margin_ttfb_ms: float = 1.0,
                         alpha: float = 0.05) -> Margins:
    """Margins from the command-line options; a bad value is one UsageError naming the option, the value and the
    allowed range (exit 2)."""
    given = {"--margin": margin, "--margin-p95": margin_p95, "--margin-ttfb-ms": margin_ttfb_ms, "--alpha": alpha}
    for flag, value in given.items():
        field, allowed = OPTIONS[flag]
        try:
            Margins(**{field: value})
        except ValidationError:
            raise UsageError(f"invalid {flag} {value:g}: allowed is {allowed}") from None
    return Margins(median=margin, p95=margin_p95, ttfb_ms=margin_ttfb_ms, alpha=alpha)


# ---------------------------------------------------------------------------------------------------------------
# Models at the boundary


class Bounded(BaseModel):
    """A number, or the bound censoring leaves of it (bound ">" above value, "<" below, "?" not determinable;
    value None with a bound: the bound itself is unknown). Same meaning as stats.Est."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    bound: Bound = ""

    @classmethod
    def of(cls, e: Est) -> Bounded:
        return cls(value=e.value, bound=e.bound)

    def est(self) -> Est:
        return Est(self.value, self.bound)


class RatioCI(BaseModel):
    model_config = ConfigDict(frozen=True)

    lo: Bounded
    hi: Bounded
    level: float  # the coverage it reaches (see level_kind)
    level_kind: LevelKind  # exact (continuous data), "at least" (p95: product of two levels), approximate (large n)
    method: str


class RankTest(BaseModel):
    model_config = ConfigDict(frozen=True)

    p: float | None  # two-sided; None when a side is empty
    method: TestMethod
    smallest_p: float | None  # the smallest two-sided p any data could give at these n (no ties): 2 / C(nA+nB, nA)


class Unpaired(BaseModel):
    """The unpaired estimate, shown beside a paired verdict: the Hodges-Lehmann ratio and interval, the rank test,
    and the verdict the unpaired rule would give."""

    model_config = ConfigDict(frozen=True)

    ratio: Bounded | None
    ci: RatioCI | None
    test: RankTest
    verdict: Verdict
    reason: str


class MetricVerdict(BaseModel):
    """One point x method x metric."""

    model_config = ConfigDict(frozen=True)

    point: str  # point label
    method: str  # e.g. "HTTP/3 curl→nginx"
    protocol: str
    client: str
    server: str
    metric: Metric
    label: str  # e.g. "median goodput Mbit/s"
    n_a: int  # results entering this metric (completed + censored)
    n_b: int
    censored_a: int
    censored_b: int
    excluded_a: int  # runs of the group that are not results (stats.exclusion_reason), plus, for the TTFB,
    excluded_b: int  # completed runs without a TTFB
    a: Bounded | None  # the statistic (median or p95) in SI units (bit/s, s); None when the side is empty
    b: Bounded | None
    ratio: Bounded | None  # B/A: the Hodges-Lehmann estimate (medians) or p95_B / p95_A
    ci: RatioCI | None
    margin: float  # the relative margin in force (TTFB: after the absolute floor); equivalent inside 1/(1+m)..1+m
    test: RankTest
    verdict: Verdict
    reason: str  # why (always set; for inconclusive rows every reason that applies)
    too_few: str  # "" or the warning that no verdict of the design can be reached at these n
    design: Design = "unpaired"  # paired: ratio, ci and verdict are the paired ones (lab/stats/paired.py)
    pairing: str = ""  # "5 pairs (same repeat and link seed)", or why the design is unpaired
    unpaired: Unpaired | None = None  # beside a paired verdict: what the unpaired rule says


class Judgement(BaseModel):
    """All verdicts of A (the baseline) against B."""

    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    margins: Margins
    rows: list[MetricVerdict]
    only_a: list[str] = []  # "point method" found in one sweep only (no verdict)
    only_b: list[str] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        return {v: sum(1 for r in self.rows if r.verdict == v) for v in ("equivalent", "differs", "inconclusive")}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def any_differs(self) -> bool:
        """Something differs: what `quiclab reproduce` exits 1 on."""
        return any(r.verdict == "differs" for r in self.rows)

    @property
    def tally(self) -> str:
        """"12 equivalent, 0 differ, 3 inconclusive"."""
        c = self.counts
        return f"{c['equivalent']} equivalent, {c['differs']} differ, {c['inconclusive']} inconclusive"


# ---------------------------------------------------------------------------------------------------------------
# Rank test (Mann-Whitney) and its exact distributions


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p of an exact rank test with these sizes (no ties): 2 / C(nA + nB, nA), at most 1."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def needed_per_side(alpha: float) -> int:
    """The fewest runs per side (equal sizes) with which a two-sided rank test can reach p < alpha."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


@lru_cache(maxsize=256)
def _sum_counts(weights: tuple[int, ...], m: int) -> np.ndarray:
    """Counts of the subsets of size m of `weights` (non-negative integers) by their sum: the permutation
    distribution of a rank sum (float64 counts: exact integers up to 2**53, relative precision beyond)."""
    total = sum(sorted(weights)[-m:]) if m else 0
    dp = np.zeros((m + 1, total + 1))
    dp[0, 0] = 1.0
    for w in weights:
        if w == 0:
            dp[1:] = dp[1:] + dp[:-1]
        else:
            dp[1:, w:] = dp[1:, w:] + dp[:-1, :-w]
    return dp[m]


def _keys(obs: Sequence[Obs]) -> list[tuple[int, float]]:
    """Sort keys for the rank test: censored values tie with each other beyond every exact value."""
    return [(o.rank, 0.0) if o.rank else (0, float(o.value if o.value is not None else 0.0)) for o in obs]


def rank_test(a: Sequence[Obs], b: Sequence[Obs]) -> RankTest:
    """Two-sided Mann-Whitney (Wilcoxon rank-sum) test of A against B, censored values by worst rank (tied with
    each other). Exact when nA + nB <= EXACT_MAX_N (with ties: the exact permutation distribution of the mid-rank
    sum), else the normal approximation with tie and continuity correction. p = 2 * min(lower, upper tail)."""
    m, n = len(a), len(b)
    if not m or not n:
        return RankTest(p=None, method="none", smallest_p=None)
    keys = _keys(a) + _keys(b)
    order = sorted(range(m + n), key=lambda i: keys[i])
    ranks2 = [0] * (m + n)  # twice the mid-ranks: integers
    ties: list[int] = []
    i = 0
    while i < m + n:
        j = i
        while j + 1 < m + n and keys[order[j + 1]] == keys[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks2[order[t]] = i + j + 2  # 2 * mid-rank of positions i..j (1-based)
        ties.append(j - i + 1)
        i = j + 1
    has_ties = any(t > 1 for t in ties)
    small = min(m, n)
    small_idx = range(m) if m <= n else range(m, m + n)
    s2 = sum(ranks2[i] for i in small_idx)
    sp = smallest_p(m, n)
    big = m + n
    if big <= EXACT_MAX_N:
        counts = _sum_counts(tuple(sorted(ranks2)), small)
        total = float(counts.sum())
        lower = float(counts[: s2 + 1].sum()) / total
        upper = float(counts[s2:].sum()) / total
        p = min(1.0, 2 * min(lower, upper))
        return RankTest(p=p, method="exact with ties" if has_ties else "exact", smallest_p=sp)
    u = s2 / 2 - small * (small + 1) / 2
    mean = m * n / 2
    var = m * n / 12 * ((big + 1) - sum(t**3 - t for t in ties) / (big * (big - 1)))
    if var <= 0:
        return RankTest(p=1.0, method="normal approximation", smallest_p=sp)
    z = max(0.0, abs(u - mean) - 0.5) / math.sqrt(var)
    return RankTest(p=min(1.0, math.erfc(z / math.sqrt(2))), method="normal approximation", smallest_p=sp)


@lru_cache(maxsize=256)
def _u_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u), u = 0..m*n, of the Mann-Whitney U for sizes m, n under the null (continuous data)."""
    counts = _sum_counts(tuple(range(1, m + n + 1)), min(m, n))  # rank sums; U = S - s(s+1)/2
    s0 = min(m, n) * (min(m, n) + 1) // 2
    pmf = counts[s0:s0 + m * n + 1]
    return np.cumsum(pmf) / pmf.sum()


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def hl_rank(m: int, n: int, alpha: float) -> tuple[int, float, LevelKind]:
    """(k, level, kind) of the Hodges-Lehmann interval [D(k), D(mn-k+1)] of the mn pairwise differences: the
    largest k whose coverage 1 - 2*P(U <= k-1) reaches 1 - 2*alpha, else k = 1 with the level it has."""
    mn = m * n
    if m + n <= EXACT_MAX_N:
        cdf = _u_cdf(m, n)
        k = 1
        while 2 * (k + 1) <= mn + 1 and cdf[k] <= alpha + _EPS:  # k+1 still reaches the level
            k += 1
        return k, max(0.0, 1 - 2 * float(cdf[k - 1])), "exact"
    sd = math.sqrt(mn * (m + n + 1) / 12)

    def cdf_at(u: int) -> float:
        return _normal_cdf((u + 0.5 - mn / 2) / sd)

    # the largest u with cdf_at(u) <= alpha, plus one (k - 1 is the last u the lower tail may hold)
    k = max(1, min(math.floor(mn / 2 - 0.5 + sd * NormalDist().inv_cdf(alpha)) + 1, (mn + 1) // 2))
    return k, max(0.0, 1 - 2 * cdf_at(k - 1)), "approximate"


# ---------------------------------------------------------------------------------------------------------------
# Intervals


def _log(v: float | None) -> float:
    if v is None:
        return math.nan
    return math.log(v) if v > 0 else -math.inf


def _as_est(rank: int, value: float) -> Est:
    """An element of a sorted difference list as an estimate; rank +-2: indeterminate."""
    if abs(rank) == 2:
        return Est(None, "?")
    v = None if math.isnan(value) else math.exp(value)
    return Est(v, "" if rank == 0 else ">" if rank > 0 else "<")


def _as_obs_est(o: Obs) -> Est:
    return Est(o.value, "" if o.rank == 0 else ">" if o.rank > 0 else "<")


def _pair_quantile(sorted_ranks: np.ndarray, sorted_vals: np.ndarray, p: float) -> Est:
    """stats.quantile (numpy's linear rule) over an already sorted list of log ratios, as a ratio; "?" when it
    involves an indeterminate pair."""
    j, w = position(len(sorted_vals), p)
    used = [j, j + 1] if w else [j]
    if any(abs(int(sorted_ranks[i])) == 2 for i in used):
        return Est(None, "?")
    obs = [Obs(None if math.isnan(v := float(sorted_vals[i])) else v, int(sorted_ranks[i]))  # type: ignore[arg-type]
           for i in used]
    e = quantile(obs, w) if w else _as_obs_est(obs[0])
    return Est(None if e.value is None else math.exp(e.value), e.bound)


def _pairwise(a: Sequence[Obs], b: Sequence[Obs]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log(b_j) - log(a_i) for every pair: values, worst ranks (b above: +1; a above: -1), indeterminate mask."""
    va = np.array([_log(o.value) for o in a])
    vb = np.array([_log(o.value) for o in b])
    ra = np.array([o.rank for o in a])
    rb = np.array([o.rank for o in b])
    with np.errstate(invalid="ignore"):
        vals = (vb[None, :] - va[:, None]).ravel()
    rank_a = np.broadcast_to(ra[:, None], (len(a), len(b))).ravel()
    rank_b = np.broadcast_to(rb[None, :], (len(a), len(b))).ravel()
    indeterminate = (rank_a != 0) & (rank_b != 0)
    ranks = np.where(rank_a == 0, rank_b, -rank_a)
    return vals, ranks, indeterminate


def _sorted(vals: np.ndarray, ranks: np.ndarray, indeterminate: np.ndarray, side: int) -> tuple[np.ndarray, ...]:
    """Sorted by worst rank; indeterminate pairs at the `side` end (-2: bottom, +2: top); an unknown bound is the
    weakest statement of its side (stats._sort_key)."""
    r = np.where(indeterminate, side, ranks)
    key = np.where(np.isnan(vals), np.where(r > 0, -np.inf, np.inf), vals)
    key = np.where(np.abs(r) == 2, 0.0, key)
    order = np.lexsort((key, r))
    return r[order], vals[order]


def hodges_lehmann(a: Sequence[Obs], b: Sequence[Obs], alpha: float) -> tuple[Est, RatioCI | None]:
    """B/A: the Hodges-Lehmann estimate (median of the pairwise ratios) and its Mann-Whitney interval."""
    vals, ranks, ind = _pairwise(a, b)
    lo_r, lo_v = _sorted(vals, ranks, ind, -2)
    hi_r, hi_v = _sorted(vals, ranks, ind, 2)
    est_lo, est_hi = _pair_quantile(lo_r, lo_v, 0.5), _pair_quantile(hi_r, hi_v, 0.5)
    est = est_lo if est_lo == est_hi else Est(None, "?")
    if len(a) < 1 or len(b) < 1 or len(a) + len(b) < 3:
        return est, None
    k, level, kind = hl_rank(len(a), len(b), alpha)
    mn = len(vals)
    lo = _as_est(int(lo_r[k - 1]), float(lo_v[k - 1]))
    hi = _as_est(int(hi_r[mn - k]), float(hi_v[mn - k]))
    return est, RatioCI(lo=Bounded.of(lo), hi=Bounded.of(hi), level=level, level_kind=kind,
                        method="Hodges-Lehmann / Mann-Whitney")


def _binom_cdf(n: int, q: float) -> np.ndarray:
    """P(Y <= i), i = 0..n, Y ~ Binomial(n, q)."""
    i = np.arange(n + 1)
    logpmf = (np.array([math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in i])
              + i * math.log(q) + (n - i) * math.log1p(-q))
    return np.minimum(1.0, np.cumsum(np.exp(logpmf)))


def quantile_ci_ranks(n: int, q: float, target: float) -> tuple[int, int, float] | None:
    """(r, s, coverage) of the distribution-free interval [x(r), x(s)] (1-based) of the q-quantile of n values:
    coverage P(r <= Binomial(n, q) <= s-1); the narrowest (s - r) pair reaching `target` (ties: the higher
    coverage), else the range [x(1), x(n)] with the coverage it has. None for n < 2."""
    if n < 2:
        return None
    cdf = _binom_cdf(n, q)

    def cov(r: int, s: int) -> float:
        return float(cdf[s - 1] - (cdf[r - 2] if r >= 2 else 0.0))

    best: tuple[int, int, float] | None = None
    for r in range(1, n):
        base = cdf[r - 2] if r >= 2 else 0.0
        s = int(np.searchsorted(cdf, base + target - _EPS)) + 1  # smallest s with cdf[s-1] >= base + target
        s = max(s, r + 1)
        if s > n:
            continue
        c = cov(r, s)
        if best is None or (s - r, -c) < (best[1] - best[0], -best[2]):
            best = (r, s, c)
    return best if best is not None else (1, n, cov(1, n))


def _sorted_obs(obs: Sequence[Obs]) -> list[Obs]:
    def key(o: Obs) -> tuple[int, float]:
        if o.value is None:
            return o.rank, -math.inf if o.rank > 0 else math.inf
        return o.rank, o.value

    return sorted(obs, key=key)


def est_ratio(num: Est, den: Est) -> Est:
    """num / den of two estimates that may be bounds: num above and den below -> above, etc.; "?" otherwise."""
    if num.bound == "?" or den.bound == "?":
        return Est(None, "?")
    up = {"": 0, ">": 1, "<": -1}
    direction = {up[num.bound], -up[den.bound]} - {0}
    if len(direction) > 1:
        return Est(None, "?")
    bound: Bound = "" if not direction else ">" if direction == {1} else "<"
    if num.value is None or den.value is None:
        return Est(None, bound or "?")
    if den.value == 0:
        return Est(math.inf, bound)
    return Est(num.value / den.value, bound)


def p95_ratio(a: Sequence[Obs], b: Sequence[Obs], alpha: float) -> tuple[Est, Est, Est, RatioCI | None]:
    """(p95 of A, p95 of B, B/A, its CI): per side the order-statistic interval of the p95 at sqrt(1 - 2*alpha);
    the ratio's interval [lo_B/hi_A, hi_B/lo_A] covers with at least the product of the two levels."""
    sa, sb = _sorted_obs(a), _sorted_obs(b)
    pa = quantile(sa, P95) if sa else Est(None, "?")
    pb = quantile(sb, P95) if sb else Est(None, "?")
    ratio = est_ratio(pb, pa)
    target = math.sqrt(1 - 2 * alpha)
    ra, rb = quantile_ci_ranks(len(sa), P95, target), quantile_ci_ranks(len(sb), P95, target)
    if ra is None or rb is None:
        return pa, pb, ratio, None
    lo = est_ratio(_as_obs_est(sb[rb[0] - 1]), _as_obs_est(sa[ra[1] - 1]))
    hi = est_ratio(_as_obs_est(sb[rb[1] - 1]), _as_obs_est(sa[ra[0] - 1]))
    return pa, pb, ratio, RatioCI(lo=Bounded.of(lo), hi=Bounded.of(hi), level=ra[2] * rb[2], level_kind="at least",
                                  method="order statistics of each p95")


def p95_needed_per_side(alpha: float) -> int:
    """The fewest runs per side with which the p95 ratio's interval reaches 1 - 2*alpha."""
    target = math.sqrt(1 - 2 * alpha)
    n = 2
    while True:
        r = quantile_ci_ranks(n, P95, target)
        if r is not None and r[2] >= target - _EPS:
            return n
        n += 1


# ---------------------------------------------------------------------------------------------------------------
# The verdict of one metric


def _certainly_above(e: Bounded, x: float) -> bool:
    return e.bound in ("", ">") and e.value is not None and e.value > x


def _certainly_below(e: Bounded, x: float) -> bool:
    return e.bound in ("", "<") and e.value is not None and e.value < x


def fmt_bounded(e: Bounded | None, scale: float = 1.0) -> str:
    """"1.02", ">3.00", "<0.500", "?" (as the reports' cells); "-" for none."""
    return fmt_est(e.est() if e is not None else None, scale)


def fmt_ci(ci: RatioCI | None) -> str:
    return f"{fmt_bounded(ci.lo)}\u2013{fmt_bounded(ci.hi)}" if ci else "-"


def fmt_level(ci: RatioCI | None) -> str:
    """"90.5 %", "≥16.0 %" (p95: a lower bound), "≈90.1 %" (normal approximation)."""
    if ci is None:
        return "-"
    mark = {"exact": "", "at least": "\u2265", "approximate": "\u2248"}[ci.level_kind]
    return f"{mark}{ci.level * 100:.1f} %"


def fmt_p(p: float | None) -> str:
    return "-" if p is None else f"{p:.2g}"


def _pct(m: float) -> str:
    return f"{m * 100:.3g} %"


def too_few_warning(n_a: int, n_b: int, alpha: float) -> str:
    """"" or why no difference can be shown at these sizes."""
    sp = smallest_p(n_a, n_b)
    if sp < alpha:
        return ""
    sizes = f"n = {n_a} per side" if n_a == n_b else f"n = {n_a} (A) and {n_b} (B)"
    return (f"{sizes}: no two-sided rank test can reach p < {alpha:g} (smallest p = {sp:#.2g}); needs "
            f">= {needed_per_side(alpha)} per side")


def paired_too_few_warning(pairs: int, alpha: float) -> str:
    """"" or why no paired verdict can be reached with this many pairs."""
    target = 1 - 2 * alpha
    level = sign_level(pairs, target)
    if level >= target - 1e-9:
        return ""
    return (f"n = {pairs} pairs: the paired interval reaches at most {level * 100:.3g} % (< {target * 100:.3g} %); "
            f"needs >= {pairs_needed(target)} pairs")


def decide(ratio_ci: RatioCI | None, test: RankTest | None, margin: float, alpha: float, n_a: int, n_b: int,
           p95: bool = False, pairs: int | None = None) -> tuple[Verdict, str, str]:
    """(verdict, reason, too-few warning) from the CI of B/A and the relative margin: THE rule of every comparison
    (compare, reproduce, the report's "In short", the atlas; docs/results.md "Do two sweeps agree?").

    The CI must reach 1 - 2*alpha. equivalent: the CI wholly inside the band (1/(1+m), 1+m). differs: the CI wholly
    outside it, and for the unpaired design (`test` given, `pairs` None) also the rank test p < alpha. The paired
    design (`pairs`: the number of pairs) has no separate test: its sign-based interval is distribution-free, so a
    CI end beyond the band is itself the one-sided sign test, at (1 - level) / 2 <= alpha, that the median ratio
    lies beyond the margin on that side."""
    if pairs is not None:
        warn = paired_too_few_warning(pairs, alpha)
    else:
        warn = too_few_warning(n_a, n_b, alpha) if n_a and n_b else ""
    if not n_a or not n_b:
        missing = " and ".join(s for s, n in (("A", n_a), ("B", n_b)) if not n)
        return "inconclusive", f"no results in {missing}", warn
    up, down = 1 + margin, 1 / (1 + margin)
    band = f"\u00b1{_pct(margin)} ({sig3(down)}\u2013{sig3(up)})"
    target = 1 - 2 * alpha
    reached = ratio_ci is not None and ratio_ci.level >= target - 1e-9
    inside = outside = False
    if ratio_ci is not None and reached:
        inside = _certainly_above(ratio_ci.lo, down) and _certainly_below(ratio_ci.hi, up)
        outside = _certainly_above(ratio_ci.lo, up) or _certainly_below(ratio_ci.hi, down)
    ci_text = f"{'paired ' if pairs is not None else ''}CI {fmt_ci(ratio_ci)} ({fmt_level(ratio_ci)})"
    significant = pairs is not None or (test is not None and test.p is not None and test.p < alpha)
    p_text = f"p = {fmt_p(test.p if test else None)}"
    if inside:
        return "equivalent", f"{ci_text} inside {band}", warn
    if significant and outside:
        if pairs is not None:
            return "differs", f"{ci_text} wholly outside {band}", warn
        return "differs", f"{p_text} < {alpha:g} and {ci_text} outside {band}", warn
    why: list[str] = []
    if warn:
        why.append(warn)
    if ratio_ci is None:
        why.append("no CI from one result per side" if pairs is None else "no CI from one pair")
    elif not reached:
        need = (f"; a p95 needs >= {p95_needed_per_side(alpha)} per side" if p95 else "")
        if not warn or pairs is None:
            why.append(f"the CI reaches only {fmt_level(ratio_ci)} (< {target * 100:.3g} %){need}")
    elif outside:
        why.append(f"{ci_text} outside {band} but {p_text} is not below {alpha:g}")
    elif pairs is None and significant:
        why.append(f"{p_text} < {alpha:g} but {ci_text} reaches into {band}: a change smaller than "
                   "the margin is not ruled out")
    else:
        why.append(f"{ci_text} crosses {band}")
        if pairs is None and test is not None and test.p is not None and not warn:
            why.append(p_text)
    return "inconclusive", "; ".join(why), warn


# ---------------------------------------------------------------------------------------------------------------
# Samples of a group


@dataclass(frozen=True)
class Samples:
    """The observations of one group (one sweep, point, method) per metric."""

    time: list[Obs]
    goodput: list[Obs]
    ttfb: list[Obs]
    n_censored: int
    n_excluded: int  # not results (stats.exclusion_reason)
    ttfb_missing: int  # results without a TTFB that are not censored either
    ttfb_censored: int
    page: bool  # a page workload: the first metric is the page time
    keys: list[PairKey] = field(default_factory=list)  # (repeat, link seed) of each result, as `time`/`goodput`
    ttfb_keys: list[PairKey] = field(default_factory=list)  # (repeat, link seed) of each TTFB, as `ttfb`


def group_samples(rs: Sequence[RunRecord]) -> Samples:
    """The results of one group as stats.summarize sees them (every result row; censored at timeout_s or the
    group's fallback), and their TTFBs."""
    fb = fallback_timeout(rs)
    results = [r for r in rs if exclusion_reason(r) is None]
    obs = [run_obs(r, fb) for r in results]
    ttfb: list[Obs] = []
    ttfb_keys: list[PairKey] = []
    missing = censored_ttfb = 0
    for r in results:
        if r.ttfb_s is not None:
            ttfb.append(Obs(r.ttfb_s))
        elif is_censored(r):
            ttfb.append(Obs(censored_at(r, fb), 1))
            censored_ttfb += 1
        else:
            missing += 1
            continue
        ttfb_keys.append((r.repeat, r.seed))
    return Samples(time=[o.time for o in obs], goodput=[o.goodput for o in obs], ttfb=ttfb,
                   n_censored=sum(1 for r in results if is_censored(r)),
                   n_excluded=len(rs) - len(results), ttfb_missing=missing, ttfb_censored=censored_ttfb,
                   page=any(r.workload.split(":", 1)[0] == "page" for r in results),
                   keys=[(r.repeat, r.seed) for r in results], ttfb_keys=ttfb_keys)


def _ttfb_margin(a: Sequence[Obs], margins: Margins) -> float:
    med = quantile(_sorted_obs(a), 0.5) if a else Est(None, "?")
    if not margins.ttfb_ms or not med.exact or med.value is None or med.value <= 0:
        return margins.median
    return max(margins.median, margins.ttfb_ms / 1000 / med.value)


@dataclass(frozen=True)
class Judged:
    """One comparison B/A of one metric by the design that applies: what judge_metric returns."""

    design: Design
    pairing: str  # "5 pairs (same repeat and link seed)", or why unpaired
    a: Est  # A's statistic (median or p95)
    b: Est
    ratio: Est
    ci: RatioCI | None
    test: RankTest  # the unpaired rank test (p None for a paired verdict: it has none)
    verdict: Verdict
    reason: str
    too_few: str
    n_pairs: int  # 0 for the unpaired design
    unpaired: Unpaired | None  # beside a paired verdict


NO_TEST = RankTest(p=None, method="none", smallest_p=None)


def paired_ci(pairs: Sequence[tuple[Obs, Obs]], alpha: float) -> tuple[Est, RatioCI | None]:
    """B/A over the pairs (A, B): the median per-pair ratio and its sign-based interval (lab/stats/paired.py)."""
    si = sign_interval(pairs, 1 - 2 * alpha)
    if si.lo is None or si.hi is None:
        return si.estimate, None
    return si.estimate, RatioCI(lo=Bounded.of(si.lo), hi=Bounded.of(si.hi), level=si.level,
                                level_kind="at least" if si.n_censored else "exact",
                                method="median of the per-pair ratios / sign test")


def judge_metric(metric: Metric, xa: Sequence[Obs], xb: Sequence[Obs], keys_a: Sequence[PairKey],
                 keys_b: Sequence[PairKey], margin: float, alpha: float) -> Judged:
    """B/A of one metric by the design's rule: paired (sign-based interval of the median per-pair ratio) when every
    result of both sides pairs with one of the other over the same repeat and link seed, unpaired (Hodges-Lehmann
    and the rank test) otherwise, and for the p95 (order statistics of each side's p95); the unpaired estimate is
    kept beside a paired verdict."""
    test = rank_test(xa, xb)
    if metric == "time_p95":
        pa, pb, ratio, ci = p95_ratio(xa, xb, alpha)
        verdict, reason, warn = decide(ci, test, margin, alpha, len(xa), len(xb), p95=True)
        return Judged("unpaired", "the p95 is judged from each side's order statistics", pa, pb, ratio, ci, test,
                      verdict, reason, warn, 0, None)
    pa = quantile(_sorted_obs(xa), 0.5) if xa else Est(None, "?")
    pb = quantile(_sorted_obs(xb), 0.5) if xb else Est(None, "?")
    ratio, ci = hodges_lehmann(xa, xb, alpha) if xa and xb else (Est(None, "?"), None)
    verdict, reason, warn = decide(ci, test, margin, alpha, len(xa), len(xb))
    pairing = pair_up(xa, keys_a, xb, keys_b)
    if pairing.pairs is None:
        return Judged("unpaired", pairing.why, pa, pb, ratio, ci, test, verdict, reason, warn, 0, None)
    beside = Unpaired(ratio=Bounded.of(ratio), ci=ci, test=test, verdict=verdict, reason=reason)
    p_ratio, p_ci = paired_ci(pairing.pairs, alpha)
    n = len(pairing.pairs)
    verdict, reason, warn = decide(p_ci, None, margin, alpha, len(xa), len(xb), pairs=n)
    return Judged("paired", pairing.why, pa, pb, p_ratio, p_ci, NO_TEST, verdict, reason, warn, n, beside)


def judge_group(point: str, protocol: str, client: str, server: str, sa: Samples, sb: Samples,
                margins: Margins) -> list[MetricVerdict]:
    """The three metric verdicts of one point and method."""
    alpha = margins.alpha
    page = sa.page or sb.page
    rows: list[MetricVerdict] = []
    specs: list[tuple[Metric, list[Obs], list[Obs], list[PairKey], list[PairKey], int, int, int, int]] = [
        ("page_time" if page else "goodput", sa.time if page else sa.goodput, sb.time if page else sb.goodput,
         sa.keys, sb.keys, sa.n_censored, sb.n_censored, sa.n_excluded, sb.n_excluded),
        ("time_p95", sa.time, sb.time, sa.keys, sb.keys, sa.n_censored, sb.n_censored, sa.n_excluded,
         sb.n_excluded),
        ("ttfb", sa.ttfb, sb.ttfb, sa.ttfb_keys, sb.ttfb_keys, sa.ttfb_censored, sb.ttfb_censored,
         sa.n_excluded + sa.ttfb_missing, sb.n_excluded + sb.ttfb_missing),
    ]
    for metric, xa, xb, ka, kb, ca, cb, ea, eb in specs:
        margin = (margins.p95 if metric == "time_p95" else _ttfb_margin(xa, margins) if metric == "ttfb"
                  else margins.median)
        j = judge_metric(metric, xa, xb, ka, kb, margin, alpha)
        rows.append(MetricVerdict(
            point=point, method=method_label(protocol, client, server), protocol=protocol, client=client,
            server=server, metric=metric, label=METRIC_LABELS[metric], n_a=len(xa), n_b=len(xb),
            censored_a=ca, censored_b=cb, excluded_a=ea, excluded_b=eb,
            a=Bounded.of(j.a) if xa else None, b=Bounded.of(j.b) if xb else None,
            ratio=Bounded.of(j.ratio) if xa and xb else None, ci=j.ci, margin=margin, test=j.test,
            verdict=j.verdict, reason=j.reason, too_few=j.too_few, design=j.design, pairing=j.pairing,
            unpaired=j.unpaired))
    return rows


def judge_runs(runs_a: Sequence[RunRecord], runs_b: Sequence[RunRecord], margins: Margins | None = None) -> Judged:
    """B/A of the median transfer (or page) time of two groups of runs (e.g. TCP as A, HTTP/3 as B at one point):
    what the report's "In short" and the seed atlas state, by the same rule as `compare`."""
    margins = margins or Margins()
    sa, sb = group_samples(runs_a), group_samples(runs_b)
    return judge_metric("time", sa.time, sb.time, sa.keys, sb.keys, margins.median, margins.alpha)


# ---------------------------------------------------------------------------------------------------------------
# Two sweeps


Key = tuple[str, str, str, str]  # point_label, client, server, protocol (as `quiclab compare` matches groups)


def _groups(records: Sequence[RunRecord]) -> dict[Key, list[RunRecord]]:
    out: dict[Key, list[RunRecord]] = {}
    for (_, c, s, p), rs in group_records(records).items():
        out.setdefault((rs[0].point_label, c, s, p), []).extend(rs)
    return out


def _unsupported(rs: Sequence[RunRecord]) -> bool:
    return all(r.status == "unsupported" for r in rs)


def judge_records(records_a: Sequence[RunRecord], records_b: Sequence[RunRecord], margins: Margins | None = None,
                  name_a: str = "A", name_b: str = "B") -> Judgement:
    """Every point and method present in both (matched by point label, client, server, protocol; a combination
    neither sweep could run is skipped), three metrics each, in A's report order."""
    margins = margins or Margins()
    ga, gb = _groups(records_a), _groups(records_b)
    rows: list[MetricVerdict] = []
    for key, ra in ga.items():
        rb = gb.get(key)
        if rb is None or (_unsupported(ra) and _unsupported(rb)):
            continue
        point, client, server, protocol = key
        rows += judge_group(point, protocol, client, server, group_samples(ra), group_samples(rb), margins)

    def label(k: Key) -> str:
        return f"{k[0]} {method_label(k[3], k[1], k[2])}"

    return Judgement(a=name_a, b=name_b, margins=margins, rows=rows,
                     only_a=[label(k) for k in ga if k not in gb], only_b=[label(k) for k in gb if k not in ga])


def verdict_table(j: Judgement) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of plain strings: one row per point x method x metric."""
    cols = ["parameter", "method", "metric", "n A/B", "A", "B", "B/A", "CI", "level", "p", "design", "verdict",
            "unpaired beside"]
    rows = [[r.point, r.method, r.label, f"{r.n_a}/{r.n_b}", fmt_bounded(r.a, METRIC_SCALE[r.metric]),
             fmt_bounded(r.b, METRIC_SCALE[r.metric]), fmt_bounded(r.ratio), fmt_ci(r.ci), fmt_level(r.ci),
             fmt_p(r.test.p), design_cell(r), r.verdict, unpaired_cell(r.unpaired)] for r in j.rows]
    return cols, rows


def design_cell(r: MetricVerdict) -> str:
    """"paired" (B/A, CI and verdict from the per-pair ratios) or "unpaired" (why, when pairs were expected)."""
    return "paired" if r.design == "paired" else "unpaired"


def unpaired_cell(u: Unpaired | None) -> str:
    """The unpaired estimate beside a paired verdict: "0.833 [0.80-0.86, 90.5 %] p=0.0079 differs"; "" when the
    row's own verdict is the unpaired one."""
    if u is None:
        return ""
    ci = f" [{fmt_ci(u.ci)}, {fmt_level(u.ci)}]" if u.ci else ""
    return f"{fmt_bounded(u.ratio)}{ci} p={fmt_p(u.test.p)} {u.verdict}"
