"""The sequential rule (issue 37 part 2, lab/results/sequential.py): its boundaries' first-passage probabilities
checked by brute-force enumeration, and by simulation the two errors over the whole sequence: a false "differs"
on equal samples and at the band's edge, a false "equivalent" on samples shifted to the edge and beyond, each at
most alpha; and that decidable samples are decided (so the bounds are not met by never deciding)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from pydantic import ValidationError

from lab.results.sequential import SequentialPlan, boundaries, look, run
from lab.results.stats import Obs

PLAN = SequentialPlan(looks=(5, 10, 15, 20), margin=0.10, alpha=0.05, rho=0.3)  # spends enough to stop at 5
TRIALS = 2000


def pairs_from(log_ratios: np.ndarray, seed_effect: np.ndarray) -> list[tuple[Obs, Obs]]:
    """Pairs (A, B) with per-pair log ratios B/A as given, both sides scaled by the pair's loss pattern."""
    return [(Obs(float(s)), Obs(float(s * math.exp(d)))) for d, s in zip(log_ratios, seed_effect, strict=True)]


def simulate(theta: float, plan: SequentialPlan, seed: int, trials: int = TRIALS) -> dict[str, float]:
    """Outcome rates over `trials` sequences whose per-pair log ratios have median exactly theta (a skewed spread:
    a shifted exponential) and whose runs vary 10x with the loss pattern."""
    rng = np.random.default_rng(seed)
    n = plan.looks[-1]
    counts = {"equivalent": 0, "differs up": 0, "differs down": 0, "no verdict": 0}
    for _ in range(trials):
        noise = 0.1 * (rng.exponential(1.0, n) - math.log(2))  # skewed, median exactly 0
        d = theta + noise
        r = run(pairs_from(d, rng.lognormal(0, 1.2, n)), plan)
        if r.outcome == "differs":
            up = r.lo is not None and r.lo.value is not None and r.lo.value > 1
            counts["differs up" if up else "differs down"] += 1
        else:
            counts[r.outcome] += 1
    return {k: v / trials for k, v in counts.items()}


def _tolerance(p: float, trials: int = TRIALS) -> float:
    return 3 * math.sqrt(p * (1 - p) / trials)


def test_boundaries_first_passage_matches_enumeration():
    plan = SequentialPlan(looks=(5, 8, 12), alpha=0.1, rho=1.0)
    bounds = boundaries(plan)
    ks = [b.k for b in bounds]
    crossed = 0
    for signs in itertools.product((0, 1), repeat=12):  # 1: the pair lies below theta
        for b in bounds:
            if b.k is not None and sum(signs[: b.n]) <= b.k - 1:
                crossed += 1
                break
    assert bounds[-1].spent == pytest.approx(crossed / 2**12)
    for b in bounds:
        assert b.spent <= b.allowed + 1e-12
    assert ks[0] == 1 and bounds[0].allowed == pytest.approx(0.1 * 5 / 12)  # 1/32 <= 0.042: [min, max] at 5
    late = boundaries(SequentialPlan(looks=(5, 8, 12), alpha=0.1, rho=3.0))
    assert late[0].k is None and late[0].spent == 0  # (5/12)**3 * 0.1 < 1/32: nothing may be spent at 5 pairs


def test_one_look_is_the_fixed_n_rule():
    (b,) = boundaries(SequentialPlan(looks=(5,)))
    assert (b.k, b.spent) == (1, 1 / 32)  # [min, max] of 5 pairs, 93.75 % two-sided


def test_bad_looks_are_refused():
    for looks in ((), (5, 5), (10, 5), (0, 5)):
        with pytest.raises(ValidationError):
            SequentialPlan(looks=looks)


def test_false_differs_on_equal_samples_is_below_alpha():
    rates = simulate(0.0, PLAN, seed=1)
    wrong = rates["differs up"] + rates["differs down"]
    assert wrong <= PLAN.alpha + _tolerance(PLAN.alpha), rates
    assert rates["equivalent"] > 0.5, rates  # and equal samples are mostly decided: equivalent


def test_false_differs_at_the_edge_of_the_band_is_below_alpha():
    # the true median ratio exactly 1.1: "differs" (slower by more than 10 %) is false, and as likely as it gets
    rates = simulate(math.log(1.1), PLAN, seed=2)
    assert rates["differs up"] <= PLAN.alpha + _tolerance(PLAN.alpha), rates


def test_false_equivalent_on_shifted_samples_is_below_alpha():
    for theta, seed in ((math.log(1.1), 3), (math.log(1.15), 4), (-math.log(1.1), 5)):
        rates = simulate(theta, PLAN, seed=seed)
        assert rates["equivalent"] <= PLAN.alpha + _tolerance(PLAN.alpha), (theta, rates)


def test_a_large_shift_is_decided_early():
    rng = np.random.default_rng(6)
    stops = []
    for _ in range(200):
        d = math.log(1.5) + rng.laplace(0, 0.08, 20)
        r = run(pairs_from(d, rng.lognormal(0, 1.2, 20)), PLAN)
        assert r.outcome == "differs"
        stops.append(r.n)
    assert np.mean(stops) < 8  # mostly at the first look


def test_a_look_states_why_and_a_censored_pair_stays_in():
    plan = SequentialPlan(looks=(5, 10), rho=0.3)
    same = [(Obs(1.0), Obs(1.0))] * 5
    assert look(same, plan).outcome == "equivalent"
    # a timed-out B (ratio only known above 1.05) keeps the upper end unbounded: no equivalence at 5 pairs
    cens = [(Obs(1.0), Obs(1.0))] * 4 + [(Obs(10.0), Obs(10.5, 1))]
    first = look(cens, plan)
    assert first.outcome == "continue" and first.hi is not None and first.hi.bound == ">"
    assert "crosses" in first.reason
    with pytest.raises(ValueError, match="not a look"):
        look(same[:4], plan)


def test_looking_after_every_pair_stays_below_alpha_where_plain_intervals_would_not(monkeypatch):
    """26 looks (5 to 30 pairs): the spending boundary keeps a false "differs" at the band's edge near alpha; a
    plain 90 % interval at every look (what stopping at the first decided interval would do) passes 2 alpha in the
    same simulation, so the simulation does see the inflation the boundary prevents."""
    from fractions import Fraction

    from lab.results import sequential
    from lab.results.stats import order_stat_ci_rank

    plan = SequentialPlan(looks=tuple(range(5, 31)), rho=0.3)
    trials = 800
    rates = simulate(math.log(1.1), plan, seed=8, trials=trials)
    assert rates["differs up"] <= plan.alpha + _tolerance(plan.alpha, trials), rates
    assert rates["equivalent"] <= plan.alpha + _tolerance(plan.alpha, trials), rates

    def plain(p: SequentialPlan) -> list[sequential.Boundary]:
        return [sequential.Boundary(n=n, k=order_stat_ci_rank(n, Fraction(9, 10))[0], allowed=0.0, spent=0.0)
                for n in p.looks]

    monkeypatch.setattr(sequential, "boundaries", plain)
    naive = simulate(math.log(1.1), plan, seed=8, trials=trials)
    assert naive["differs up"] > 2 * plan.alpha, naive
