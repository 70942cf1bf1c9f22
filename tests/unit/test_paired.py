"""Paired verdicts (issue 37; lab/results/paired.py and verdict.judge_metric): how results pair (and when they do
not), the sign-based interval's exact levels and its coverage, censored pairs kept in at their least favourable
value, the verdicts on synthetic pairs (equal, shifted, noisy-but-paired, broken pairing), and on the committed
data no verdict changing side."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab import config
from lab.results import pairing_table
from lab.results.paired import pair_up, pairs_needed, sign_interval, sign_level
from lab.results.stats import Obs
from lab.results.verdict import judge_metric

ALPHA = 0.05


def obs(values: list[float]) -> list[Obs]:
    return [Obs(v) for v in values]


def keys(n: int, seed0: int = 100) -> list[tuple[int, int]]:
    return [(i, seed0 + i) for i in range(n)]


def judge(a: list[float], b: list[float], ka: list[tuple[int, int]] | None = None,
          kb: list[tuple[int, int]] | None = None, margin: float = 0.1):
    return judge_metric("time", obs(a), obs(b), ka or keys(len(a)), kb or keys(len(b)), margin, ALPHA)


# --- pairing ---------------------------------------------------------------------------------------------------------


def test_results_pair_by_repeat_and_seed_only_when_every_result_has_its_partner():
    a, b = obs([1.0, 2.0, 3.0]), obs([1.5, 2.5, 3.5])
    p = pair_up(a, keys(3), b, keys(3))
    assert p.paired and p.pairs == list(zip(a, b, strict=True)) and p.why == "3 pairs (same repeat and link seed)"
    # keys in another order still pair by repeat
    p = pair_up(a, keys(3), b[::-1], keys(3)[::-1])
    assert p.pairs == list(zip(a, b, strict=True))
    missing = pair_up(a, keys(3), b[:2], keys(2))
    assert not missing.paired and "1 result without a partner (repeat 2)" in missing.why
    seeds = pair_up(a, keys(3), b, keys(3, seed0=900))
    assert not seeds.paired and "link seeds differ at 3 of 3 repeats" in seeds.why
    twice = pair_up(a, [(0, 100), (0, 100), (1, 101)], b[:2], keys(2))
    assert not twice.paired and "more than once" in twice.why


# --- the interval --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "k", "level"), [(4, 1, 7 / 8), (5, 1, 15 / 16), (6, 1, 31 / 32), (8, 2, 119 / 128),
                                               (10, 2, 501 / 512)])
def test_sign_interval_levels_are_the_binomial_ones(n, k, level):
    si = sign_interval([(Obs(1.0), Obs(1.0 + i / 100)) for i in range(n)], 0.9)
    assert si.k == k and si.level == pytest.approx(level) and sign_level(n, 0.9) == pytest.approx(level)
    # the interval is [d(k), d(n-k+1)] of the sorted per-pair ratios
    assert si.lo.value == pytest.approx(1 + (k - 1) / 100) and si.hi.value == pytest.approx(1 + (n - k) / 100)
    assert pairs_needed(0.9) == 5


def test_sign_interval_covers_the_median_ratio_as_often_as_it_says():
    """Skewed, heavy-tailed per-pair ratios (lognormal times, a pair effect shared by both sides): the coverage of
    the true median ratio over 2000 simulated sweeps of 5 and of 8 pairs matches the exact level."""
    rng = np.random.default_rng(37)
    for n, level in ((5, 15 / 16), (8, 119 / 128)):
        hits = 0
        trials = 2000
        for _ in range(trials):
            seed_effect = rng.lognormal(0, 1.0, n)  # the loss pattern: the same for both sides of a pair
            a = seed_effect
            b = seed_effect * 1.3 * rng.exponential(1.0, n) / math.log(2)  # b/a per pair: 1.3 x Exp/ln 2, median 1.3
            si = sign_interval([(Obs(x), Obs(y)) for x, y in zip(a, b, strict=True)], 0.9)
            hits += si.lo.value <= 1.3 <= si.hi.value
        se = math.sqrt(level * (1 - level) / trials)
        assert abs(hits / trials - level) < 4 * se + 0.01, (n, hits / trials, level)


def test_censored_pairs_stay_in_at_their_least_favourable_value():
    # B timed out at 10 s in the last pair (A took 5 s): its time ratio is only known to be above 2
    pairs = [(Obs(1.0), Obs(1.5)), (Obs(1.0), Obs(1.6)), (Obs(1.0), Obs(1.7)), (Obs(1.0), Obs(1.8)),
             (Obs(5.0), Obs(10.0, 1))]
    si = sign_interval(pairs, 0.9)
    assert (si.n, si.n_censored) == (5, 1)
    assert si.lo.value == pytest.approx(1.5) and si.lo.bound == ""
    assert si.hi.bound == ">" and si.hi.value == pytest.approx(2.0)  # the upper end is unbounded, above 2
    assert si.estimate.value == pytest.approx(1.7)
    # a censored pair whose bound is the smallest ratio: the lower end falls on it, as a bound
    low = sign_interval([(Obs(1.0), Obs(2.0)), (Obs(1.0), Obs(2.1)), (Obs(1.0), Obs(2.2)), (Obs(1.0), Obs(2.3)),
                         (Obs(10.0), Obs(12.0, 1))], 0.9)
    assert low.lo.bound == ">" and low.lo.value == pytest.approx(1.2)
    # both sides censored: indeterminate, and neither end can be a number
    both = sign_interval([(Obs(1.0), Obs(2.0))] * 4 + [(Obs(10.0, 1), Obs(10.0, 1))], 0.9)
    assert both.lo.bound == "?" and both.hi.bound == "?" and both.n == 5


def test_censored_ends_are_conservative_for_every_completion():
    """Whatever the censored runs would have taken (any time above their timeout), the interval of the completed
    values lies within the interval reported from the censored ones."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(5, 12))
        a, b = rng.lognormal(0, 0.5, n), rng.lognormal(0.1, 0.5, n)
        cens_a, cens_b = rng.random(n) < 0.2, rng.random(n) < 0.2
        ta, tb = np.where(cens_a, a * rng.uniform(0.3, 1.0, n), a), np.where(cens_b, b * rng.uniform(0.3, 1.0, n), b)
        pairs = [(Obs(float(x), 1 if ca else 0), Obs(float(y), 1 if cb else 0))  # type: ignore[arg-type]
                 for x, y, ca, cb in zip(ta, tb, cens_a, cens_b, strict=True)]
        got = sign_interval(pairs, 0.9)
        true = sign_interval([(Obs(float(x)), Obs(float(y))) for x, y in zip(a, b, strict=True)], 0.9)
        if got.lo.bound in ("", ">"):
            assert got.lo.value <= true.lo.value + 1e-12
        if got.hi.bound in ("", "<"):
            assert got.hi.value >= true.hi.value - 1e-12


# --- verdicts on synthetic pairs -----------------------------------------------------------------------------------


def test_equal_pairs_are_equivalent_and_paired():
    a = [2.0, 20.0, 5.0, 13.0, 0.8]  # the loss pattern varies the runs 25x; both sides alike
    j = judge(a, a)
    assert (j.design, j.verdict, j.n_pairs) == ("paired", "equivalent", 5)
    assert j.ratio.value == pytest.approx(1.0) and j.ci.level == pytest.approx(15 / 16)
    assert j.unpaired is not None and j.unpaired.verdict == "inconclusive"  # unpaired, the spread hides it


def test_a_shift_under_a_10x_loss_pattern_differs_paired_and_not_unpaired():
    seed_effect = [1.0, 10.0, 3.0, 6.0, 0.9]
    noise = [1.02, 0.97, 1.0, 1.04, 0.99]
    a = [s * e for s, e in zip(seed_effect, noise, strict=True)]
    b = [1.5 * s / e for s, e in zip(seed_effect, noise, strict=True)]
    j = judge(a, b)
    assert (j.design, j.verdict) == ("paired", "differs")
    assert j.ci.lo.value > 1.1 and "paired CI" in j.reason and "wholly outside" in j.reason
    assert j.unpaired.verdict == "inconclusive"
    # B/A and A/B: the same verdict
    assert judge(b, a).verdict == "differs" and judge(b, a).ci.hi.value < 1 / 1.1


def test_noisy_pairs_crossing_the_band_are_no_verdict_and_say_why():
    a = [1.0, 10.0, 3.0, 6.0, 0.9]
    b = [x * f for x, f in zip(a, [0.95, 1.2, 1.05, 1.0, 0.98], strict=True)]
    j = judge(a, b)
    assert (j.design, j.verdict) == ("paired", "inconclusive") and "crosses" in j.reason


def test_a_difference_smaller_than_the_margin_is_equivalence():
    a = [1.0, 10.0, 3.0, 6.0, 0.9]
    j = judge(a, [x * 0.985 for x in a])
    assert j.verdict == "equivalent" and j.ci.hi.value < 1  # the CI excludes 1 and lies inside +-10 %


def test_too_few_pairs_are_inconclusive_naming_the_pairs_needed():
    j = judge([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0])
    assert j.verdict == "inconclusive"
    assert j.too_few == "n = 4 pairs: the paired interval reaches at most 87.5 % (< 90 %); needs >= 5 pairs"


def test_broken_pairing_falls_back_to_unpaired_and_says_so():
    a, b = [1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.2, 2.4, 2.6, 2.8]
    missing = judge(a, b[:4], kb=keys(4))
    assert missing.design == "unpaired" and "1 result without a partner (repeat 4)" in missing.pairing
    assert missing.unpaired is None and missing.ci.method == "Hodges-Lehmann / Mann-Whitney"
    other = judge(a, b, kb=keys(5, seed0=7))
    assert other.design == "unpaired" and "link seeds differ" in other.pairing and other.verdict == "differs"


def test_a_timed_out_partner_keeps_the_pair_and_decides_only_where_its_bound_does():
    # B timed out at 60 s where A took 30 s: a time ratio above 2, beyond the band like the others
    a, b = obs([10.0, 11.0, 12.0, 13.0, 30.0]), [*obs([20.0, 22.0, 24.0, 26.0]), Obs(60.0, 1)]
    j = judge_metric("time", a, b, keys(5), keys(5), 0.1, ALPHA)
    assert (j.design, j.n_pairs, j.verdict) == ("paired", 5, "differs") and j.ci.level_kind == "at least"
    # B timed out at 31 s where A took 30 s: the ratio is only known above 1.03, inside the band: no verdict
    b2 = [*obs([20.0, 22.0, 24.0, 26.0]), Obs(31.0, 1)]
    j2 = judge_metric("time", a, b2, keys(5), keys(5), 0.1, ALPHA)
    assert j2.verdict == "inconclusive" and j2.ci.lo.bound == ">"


# --- the committed data ------------------------------------------------------------------------------------------


REFERENCE = config.ROOT / "results" / "reference"


@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"no committed reference folders ({REFERENCE})")
def test_no_committed_verdict_changes_side_with_pairing():
    text = pairing_table.render(REFERENCE)
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| **")]
    assert rows, text
    for r in rows:
        assert r[-2:] == ["0", "0 |"], r  # faster <-> slower, equivalent <-> differs
    # docs/results.md says the changes go both ways (no verdict -> decided and decided -> no verdict)
    everything = next(r for r in rows if "all folders" in r[0])
    assert int(everything[-4]) > 0 and int(everything[-3]) > 0, everything
