"""The sequential rule for running repeats until a paired comparison is decided (issue 37 part 2, `--until-verdict`):
after each round the paired comparison of a point against the baseline method is looked at; it stops at the first
look whose interval decides (equivalent / differs, the one rule of lab/stats/verdict.py) or at the last look
(the most repeats allowed: no verdict). Pure: this module decides from the pairs so far; lab/stats/until.py applies
it to a sweep's points and lab/run/rounds.py runs the rounds (`quiclab sweep --until-verdict`).

Why a plain interval per look would not do: looking after every round and stopping at the first decision gives
the errors more chances. The rule controls them exactly with an alpha-spending boundary on the sign test's
random walk:

- At look i the pairs so far are n_i (looks n_1 < n_2 < ... < n_L = the most). The interval is [d(k_i),
  d(n_i - k_i + 1)] of the per-pair log ratios (censored pairs at their least favourable value for each end, as
  lab/stats/paired.py), with one k_i per look (none at a look too early to spend on).
- For the true median per-pair log ratio theta, the number of pairs below theta after n pairs is a Binomial(n, 1/2)
  random walk over the looks (continuous data, independent repeats; nothing else assumed). The lower end exceeds
  theta at look i exactly when that count is at most k_i - 1. k_i is the largest whose *first-passage* probability
  up to look i, computed exactly over the walk, is at most alpha * (n_i / n_L) ** rho (the spending function:
  rho = 1 spends alpha in proportion to the pairs, larger rho keeps more for the last looks). By symmetry the upper
  end falls below theta at some look with the same probability.
- Hence, over the whole sequence and whatever the data: a false "differs" on a given side (the lower end beyond
  1 + m while the true median ratio is at most 1 + m, or the upper end below 1/(1+m) while it is at least that)
  has probability at most alpha, and a false "equivalent" (the interval inside the band while the true median
  ratio is outside it) at most alpha. Stopping early only removes later chances.

The nominal levels are upper bounds: the walk is discrete, so the spent probability (`Boundary.spent`) is usually
below what the spending function allows; every boundary states both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from lab.stats.paired import order_interval
from lab.stats.stats import Est, Obs
from lab.stats.verdict import Bounded, RatioCI, decide

Outcome = Literal["equivalent", "differs", "continue", "no verdict"]


class SequentialPlan(BaseModel):
    """The looks (pairs after each round), the margin, the error level and the spending function's exponent."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    looks: tuple[int, ...] = Field((5, 10, 15, 20), description="pairs at each look, increasing; the last = the most")
    margin: float = Field(0.10, gt=0, le=1, description="equivalence margin: the band 1/(1+m) .. 1+m")
    alpha: float = Field(0.05, gt=0, le=0.25, description="bound on each error over the whole sequence")
    rho: float = Field(1.0, gt=0, le=10, description="spending alpha * (n / n_max) ** rho")

    @model_validator(mode="after")
    def _increasing(self) -> SequentialPlan:
        if not self.looks or self.looks[0] < 1 or any(b <= a for a, b in zip(self.looks, self.looks[1:], strict=False)):
            raise ValueError(f"looks must be increasing pair counts >= 1, got {self.looks}")
        return self


@dataclass(frozen=True)
class Boundary:
    """One look: its pairs, its k (None: no interval may be used yet), the error it may have spent by then and the
    exact first-passage probability it has spent."""

    n: int
    k: int | None
    allowed: float  # alpha * (n / n_max) ** rho
    spent: float  # P(the lower end passes theta at some look up to this one), exact for continuous data


def _binom_pmf(m: int) -> np.ndarray:
    return np.array([math.comb(m, i) for i in range(m + 1)], dtype=float) / 2.0**m


@lru_cache(maxsize=64)
def boundaries(plan: SequentialPlan) -> tuple[Boundary, ...]:
    """Each look's k, by the exact first-passage probabilities of the sign walk (see the module doc)."""
    alive = np.array([1.0])  # P(count below theta == c, not yet crossed), c = 0..n
    spent = 0.0
    prev = 0
    out = []
    n_max = plan.looks[-1]
    for n in plan.looks:
        alive = np.convolve(alive, _binom_pmf(n - prev))
        prev = n
        allowed = plan.alpha * (n / n_max) ** plan.rho
        k = None
        for cand in range(1, (n + 1) // 2 + 1):  # crossing: count <= cand - 1
            if spent + float(alive[:cand].sum()) <= allowed + 1e-12:
                k = cand
            else:
                break
        if k is not None:
            spent += float(alive[:k].sum())
            alive[:k] = 0.0
        out.append(Boundary(n=n, k=k, allowed=allowed, spent=spent))
    return tuple(out)


@dataclass(frozen=True)
class Look:
    """The state after one look: the outcome, the pairs, the interval used and why."""

    outcome: Outcome
    n: int
    lo: Est | None
    hi: Est | None
    reason: str


def look(pairs: Sequence[tuple[Obs, Obs]], plan: SequentialPlan, bounds: Sequence[Boundary] | None = None) -> Look:
    """The outcome with these pairs (A, B), which must be as many as one of the plan's looks: equivalent or differs
    (stop), continue (more repeats), or no verdict (the last look, undecided)."""
    bounds = bounds if bounds is not None else boundaries(plan)
    n = len(pairs)
    at = {b.n: b for b in bounds}
    if n not in at:
        raise ValueError(f"{n} pairs is not a look of the plan {plan.looks}")
    b = at[n]
    last = n == plan.looks[-1]
    undecided: Outcome = "no verdict" if last else "continue"
    if b.k is None:
        return Look(undecided, n, None, None, f"{n} pairs: no interval may be used yet (spending "
                                              f"{b.allowed:.3g} of alpha = {plan.alpha:g} by this look)")
    lo, hi = order_interval(pairs, b.k)
    censored = any(a.rank != 0 or o.rank != 0 for a, o in pairs)
    ci = RatioCI(lo=Bounded.of(lo), hi=Bounded.of(hi), level=look_level(n, b.k),
                 level_kind="at least" if censored else "exact", method="sequential sign boundary")
    # THE rule (lab/stats/verdict.py decide) on this look's interval: its level, 1 - 2 P(Bin(n, 1/2) <= k - 1), is
    # at least 1 - 2 alpha because P(Bin(n, 1/2) <= k - 1) <= the first-passage probability spent by this look
    verdict, why, _ = decide(ci, None, plan.margin, plan.alpha, n, n, pairs=n)
    where = f"[d({b.k}), d({n - b.k + 1})] of {n} pairs: "
    if verdict != "inconclusive":
        return Look(verdict, n, lo, hi, where + why)
    return Look(undecided, n, lo, hi, where + why + (f" at the most pairs ({n})" if last else ""))


def look_level(n: int, k: int) -> float:
    """The coverage of one look's interval [d(k), d(n-k+1)] on its own: 1 - 2 P(Binomial(n, 1/2) <= k - 1)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def run(pairs: Sequence[tuple[Obs, Obs]], plan: SequentialPlan) -> Look:
    """The sequence over pairs given in the order their repeats ran (at least the last look's many): the first
    look that stops, or the last look's outcome."""
    bounds = boundaries(plan)
    if len(pairs) < plan.looks[-1]:
        raise ValueError(f"{len(pairs)} pairs: the plan looks up to {plan.looks[-1]}")
    result = None
    for n in plan.looks:
        result = look(pairs[:n], plan, bounds)
        if result.outcome != "continue":
            return result
    assert result is not None
    return result
