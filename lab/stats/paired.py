"""The paired design's statistics (issue 37): per-repeat ratios B/A over the same link seed, and the exact,
distribution-free (sign-based) interval of their median, censored pairs kept in it.

docs/results.md "Do two sweeps agree?" states the rule for readers; lab/stats/verdict.py decides with it.

- **Pairs.** A result of A and a result of B pair when they ran the same repeat over the same link seed (the lab
  gives every method at one point and repeat one seed, and a sweep of the same scenario and seed gives the same
  seeds again). The paired design applies only when *every* result of both sides has exactly one partner with the
  same seed: a result without a partner, a repeat twice on one side, or a partner over another seed (different
  points, different scenario seeds) is a broken pairing, and the comparison falls back to the unpaired design and
  says why (`Pairing.why`). No result is ever dropped to make pairs.
- **The statistic** is the median of the n per-pair log ratios d_i = log(b_i / a_i) (shown as a ratio).
- **The interval** is the order-statistic interval of that median, [d(k), d(n-k+1)], with the largest k whose
  exact coverage 1 - 2*P(Binomial(n, 1/2) <= k-1) reaches the target (stats.order_stat_ci_rank: the sign test
  inverted). It assumes nothing about the distribution of the d_i beyond independence across repeats, so its level
  is exact for continuous data at any n (ties only raise it): n = 5 pairs -> [min, max] at 93.75 %; no interval
  reaches 90 % below 5 pairs (4: 87.5 %).
- **Censored pairs** stay in, at their least favourable value for each end. A pair with B censored (B's time is
  only known to be above its censoring point: where it failed or timed out) has a time ratio known only to lie
  above a bound c; the lower end is computed with that pair at c, the upper end with it at +infinity; the opposite
  for a ratio known only to lie below a bound;
  a pair censored on both sides (indeterminate) is at -infinity for the lower end and +infinity for the upper.
  Each end so computed lies at or beyond the end the true (uncensored) values would give, so the interval covers
  with at least the stated level (marked "at least" when any pair is censored). An end that falls on a censored
  pair is shown as the bound it has (">c", "<c"), or "?" when nothing bounds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from lab.quantiles import median
from lab.stats.stats import Est, Obs, order_stat_ci_rank

#: (repeat, link seed) of one result
Key = tuple[int, int]


@dataclass(frozen=True)
class Pairing:
    """How two samples pair: the pairs (A, B) when every result has its partner, else None and why."""

    pairs: list[tuple[Obs, Obs]] | None
    why: str  # "5 pairs (same repeat and link seed)" or why the design is unpaired

    @property
    def paired(self) -> bool:
        return self.pairs is not None


def pair_up(a: Sequence[Obs], keys_a: Sequence[Key], b: Sequence[Obs], keys_b: Sequence[Key]) -> Pairing:
    """Pair A's and B's results by repeat; the paired design only when every result has one partner over the same
    link seed (see the module doc)."""
    if len(a) != len(keys_a) or len(b) != len(keys_b):
        raise ValueError("one (repeat, seed) key per observation")
    if not a or not b:
        return Pairing(None, "unpaired: a side has no results")
    by_a: dict[int, list[int]] = {}
    by_b: dict[int, list[int]] = {}
    for i, (rep, _) in enumerate(keys_a):
        by_a.setdefault(rep, []).append(i)
    for j, (rep, _) in enumerate(keys_b):
        by_b.setdefault(rep, []).append(j)
    twice = sorted(r for r, ix in [*by_a.items(), *by_b.items()] if len(ix) > 1)
    alone = sorted(set(by_a) ^ set(by_b))
    seeds = sorted(r for r in set(by_a) & set(by_b) if len(by_a[r]) == len(by_b[r]) == 1
                   and keys_a[by_a[r][0]][1] != keys_b[by_b[r][0]][1])
    problems = []
    if alone:
        problems.append(f"{len(alone)} result{'s' if len(alone) != 1 else ''} without a partner (repeat "
                        f"{', '.join(map(str, alone[:5]))}{'…' if len(alone) > 5 else ''})")
    if twice:
        problems.append(f"repeat {', '.join(map(str, sorted(set(twice))[:5]))} more than once on a side")
    if seeds:
        problems.append(f"link seeds differ at {len(seeds)} of {len(set(by_a) & set(by_b))} repeats")
    if problems:
        return Pairing(None, "unpaired (pairing broken: " + "; ".join(problems) + ")")
    pairs = [(a[by_a[r][0]], b[by_b[r][0]]) for r in sorted(by_a)]
    return Pairing(pairs, f"{len(pairs)} pairs (same repeat and link seed)")


def _log(v: float | None) -> float | None:
    if v is None:
        return None
    return math.log(v) if v > 0 else -math.inf


@dataclass(frozen=True)
class End:
    """One pair's log ratio at its least favourable value for one end of the interval, and how to show it."""

    value: float  # may be +-inf
    shown: Est  # the ratio as a reader sees that end when it falls on this pair


def _ends(a: Obs, b: Obs) -> tuple[End, End]:
    """(for the lower end, for the upper end) of the pair's log ratio log(b / a)."""
    la, lb = _log(a.value), _log(b.value)
    if a.rank == 0 and b.rank == 0:
        d = (lb if lb is not None else 0.0) - (la if la is not None else 0.0)
        d = 0.0 if math.isnan(d) else d  # 0 / 0
        e = Est(math.exp(d))
        return End(d, e), End(d, e)
    if a.rank != 0 and b.rank != 0:  # both censored: indeterminate
        return End(-math.inf, Est(None, "?")), End(math.inf, Est(None, "?"))
    # one side censored: B above (or A below) -> the ratio is above a bound; B below (or A above) -> below
    up = b.rank > 0 if b.rank != 0 else a.rank < 0
    bound = None if la is None or lb is None else lb - la
    shown_bound = Est(None if bound is None else math.exp(bound), ">" if up else "<")
    if up:
        lower = End(bound if bound is not None else -math.inf, shown_bound if bound is not None else Est(None, "?"))
        return lower, End(math.inf, shown_bound)
    upper = End(bound if bound is not None else math.inf, shown_bound if bound is not None else Est(None, "?"))
    return End(-math.inf, shown_bound), upper


@dataclass(frozen=True)
class SignInterval:
    """The paired B/A: the median of the per-pair ratios and the sign-based interval of that median."""

    n: int  # pairs (all of them: censored pairs included)
    n_censored: int  # pairs with at least one side censored
    estimate: Est  # the median per-pair ratio (a bound, or "?", when censoring leaves it one)
    lo: Est | None  # None when n < 2
    hi: Est | None
    level: float  # exact coverage of [d(k), d(n-k+1)] for continuous data; at least this with censored pairs
    k: int


def target_fraction(target: float) -> Fraction:
    return Fraction(target).limit_denominator(10**6)


def sign_interval(pairs: Sequence[tuple[Obs, Obs]], target: float) -> SignInterval:
    """B/A over the pairs (A, B): median of the per-pair ratios and its sign-based interval at the largest k whose
    exact level reaches `target` (else the range [min, max] with the level it has); see the module doc."""
    ends = [_ends(a, b) for a, b in pairs]
    n = len(ends)
    n_cens = sum(1 for a, b in pairs if a.rank != 0 or b.rank != 0)
    lows = sorted((e[0] for e in ends), key=lambda e: e.value)
    highs = sorted((e[1] for e in ends), key=lambda e: e.value)
    m_lo, m_hi = (median([e.value for e in lows]), median([e.value for e in highs])) if n else (math.nan, math.nan)
    if n == 0:
        est = Est(None, "?")
    elif m_lo == m_hi:
        est = Est(math.exp(m_lo))  # every pair exact, or censoring that does not reach the median
    elif math.isfinite(m_lo):
        est = Est(math.exp(m_lo), ">")  # the true median lies at or above the lower-substituted one
    elif math.isfinite(m_hi):
        est = Est(math.exp(m_hi), "<")
    else:
        est = Est(None, "?")
    rank = order_stat_ci_rank(n, target_fraction(target))
    if rank is None:
        return SignInterval(n, n_cens, est, None, None, 0.0, 0)
    k, level = rank
    lo, hi = order_interval(pairs, k)
    return SignInterval(n, n_cens, est, lo, hi, float(level), k)


def order_interval(pairs: Sequence[tuple[Obs, Obs]], k: int) -> tuple[Est, Est]:
    """[d(k), d(n-k+1)] of the per-pair ratios B/A, censored pairs at their least favourable value for each end
    (1 <= k <= (n+1)/2)."""
    ends = [_ends(a, b) for a, b in pairs]
    if not 1 <= k <= (len(ends) + 1) // 2:
        raise ValueError(f"k = {k} with {len(ends)} pairs")
    lows = sorted((e[0] for e in ends), key=lambda e: e.value)
    highs = sorted((e[1] for e in ends), key=lambda e: e.value)
    return lows[k - 1].shown, highs[len(ends) - k].shown


def sign_level(n: int, target: float) -> float:
    """The level the paired interval reaches with n pairs (0 below 2 pairs)."""
    rank = order_stat_ci_rank(n, target_fraction(target))
    return float(rank[1]) if rank else 0.0


def pairs_needed(target: float) -> int:
    """The fewest pairs whose interval reaches `target` (5 for 90 %)."""
    n = 2
    while sign_level(n, target) < target - 1e-12:
        n += 1
    return n
