"""Statistics on hand-made runs: exact medians and quartiles, order-statistic CIs with their achieved levels,
censoring of failed and timed-out runs, exclusions, and paired ratios (median of per-pair ratios)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from lab.results.schema import RunRecord
from lab.results.stats import (
    BOTH_CENSORED,
    UNPAIRED,
    Est,
    Obs,
    censored_counts,
    describe,
    exclusion_counts,
    median_ci,
    order_stat_ci_rank,
    ratios,
    summarize,
)
from lab.results.summary import fmt_ci, fmt_est, fmt_level

SIZE = 1_000_000


def make_record(point=0, protocol="h3", repeat=0, total_s=1.0, status="ok", failure="", client="curl",
                server="nginx", x_name="loss_pct", x=None, label=None, sweep="test", timeout_s=None) -> RunRecord:
    x = float(point) if x is None else x
    ok = status == "ok"
    return RunRecord(
        sweep=sweep, run_key=f"{point}/{protocol}/{client}/{server}/{repeat}", point=point,
        point_label=label or f"loss={x:g}%", x_name=x_name, x=x, protocol=protocol, client=client, server=server,
        repeat=repeat, order=0, seed=1000 + point * 100 + repeat, shaper="linkem", rate_bps=10e6, rtt_s=0.04,
        loss_pct=x, jitter_s=0.0, link="{}", size_bytes=SIZE, status=status, failure=failure,
        http_version={"h1": "1.1", "h2": "2", "h3": "3"}[protocol] if ok else "", bytes=SIZE if ok else 0,
        sha256_ok=ok, handshake_s=0.05 if ok else None, ttfb_s=0.1 if ok else None,
        total_s=total_s if ok else None, goodput_bps=SIZE * 8 / total_s if ok else None, wall_s=(total_s or 0) + 0.3,
        overhead_s=0.3 if ok else None, wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None,
        cc_client="cubic", cc_server="cubic", started_at="2024-06-01T12:00:00Z", timeout_s=timeout_s,
    )


def timed_out(repeat, protocol="h3", timeout_s=60.0, **kw) -> RunRecord:
    return make_record(repeat=repeat, protocol=protocol, status="timeout", failure="curl exit 28",
                       timeout_s=timeout_s, **kw)


# --- order-statistic intervals -----------------------------------------------------------------------------------

# Hand computation: coverage of [x(k), x(n-k+1)] = 1 - 2 * sum_{i<k} C(n, i) / 2^n.
#   n=5,  k=1: 1 - 2*1/32                              = 30/32       = 93.75 %   (no pair reaches 95 %)
#   n=6,  k=1: 1 - 2*1/64                              = 62/64       = 96.875 %
#   n=10, k=2: 1 - 2*(1+10)/1024                       = 1002/1024   = 97.85 %   (k=3: 1 - 2*56/1024 = 89.06 %)
#   n=20, k=6: 1 - 2*(1+20+190+1140+4845+15504)/2^20  = 1 - 43400/1048576 = 95.86 %
#                                                         (k=7: 1 - 2*(21700+38760)/2^20 = 88.47 %)
HAND = {2: (1, Fraction(1, 2)), 3: (1, Fraction(3, 4)), 4: (1, Fraction(7, 8)), 5: (1, Fraction(30, 32)),
        6: (1, Fraction(62, 64)), 10: (2, Fraction(1002, 1024)), 20: (6, Fraction(2**20 - 43400, 2**20))}


@pytest.mark.parametrize("n", sorted(HAND))
def test_order_statistic_rank_and_level_by_hand(n):
    assert order_stat_ci_rank(n) == HAND[n]


def test_order_statistic_levels_as_printed():
    assert [round(float(order_stat_ci_rank(n)[1]) * 100, 2) for n in (5, 6, 10, 20)] == [93.75, 96.88, 97.85, 95.86]
    assert order_stat_ci_rank(1) is None and order_stat_ci_rank(0) is None
    assert float(HAND[20][1]) == pytest.approx(0.95861, abs=1e-5)


def test_the_chosen_pair_is_the_narrowest_that_reaches_95():
    for n in range(6, 80):
        k, level = order_stat_ci_rank(n)
        assert level >= Fraction(95, 100), n
        assert level == 1 - 2 * Fraction(sum(math.comb(n, i) for i in range(k)), 2**n)
        if 2 * (k + 1) <= n + 1:  # the next narrower pair exists and falls short of 95 %
            assert 1 - 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n) < Fraction(95, 100), n


@pytest.mark.parametrize("n", [5, 10, 20])
def test_achieved_level_is_the_true_coverage(n):
    # Monte Carlo, independent of the binomial formula: draw n exponential values (true median ln 2) many times
    k, level = order_stat_ci_rank(n)
    rng = np.random.default_rng(7)
    x = np.sort(rng.exponential(size=(40_000, n)), axis=1)
    covered = np.mean((x[:, k - 1] <= np.log(2)) & (np.log(2) <= x[:, n - k]))
    assert covered == pytest.approx(float(level), abs=0.006)


def test_median_ci_picks_the_order_statistics():
    rng = np.random.default_rng(3)
    for n, (lo, hi) in ((5, (1, 5)), (6, (1, 6)), (10, (2, 9)), (20, (6, 15))):
        values = [float(v) for v in rng.permutation(np.arange(1, n + 1))]  # x(i) = i, shuffled
        ci = median_ci(values)
        assert (ci.lo, ci.hi, ci.k) == (Est(float(lo)), Est(float(hi)), lo)
    assert median_ci([4.0]) is None and median_ci([]) is None
    ci = median_ci([3.0, 1.0])
    assert (ci.lo.value, ci.hi.value, ci.level) == (1.0, 3.0, 0.5)
    assert [fmt_level(median_ci(list(map(float, range(n))))) for n in (2, 3, 4, 5, 6, 10, 20)] == [
        "50.0 %", "75.0 %", "87.5 %", "93.8 %", "96.9 %", "97.9 %", "95.9 %"]


# --- groups --------------------------------------------------------------------------------------------------------


def test_median_and_iqr_exact():
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate([5.0, 1.0, 3.0, 2.0, 4.0])]
    [g] = summarize(recs)
    assert (g.n, g.n_censored, g.n_excluded, g.excluded) == (5, 0, 0, {})
    d = g.total_s
    assert (d.median, d.q1, d.q3, d.mean) == (Est(3.0), Est(2.0), Est(4.0), 3.0)
    assert d.sd == pytest.approx(1.5811388, rel=1e-6)
    assert (d.ci.lo, d.ci.hi, d.ci.level) == (Est(1.0), Est(5.0), 0.9375)  # the range at n = 5, not "95 %"
    assert g.goodput_bps.median.value == pytest.approx(SIZE * 8 / 3.0)
    assert g.goodput_bps.q1.value == pytest.approx(SIZE * 8 / 4.0)  # goodput quartiles are computed on goodput


def test_even_count_interpolates():
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate([1.0, 2.0, 3.0, 10.0])]
    d = summarize(recs)[0].total_s
    assert (d.median, d.q1, d.q3) == (Est(2.5), Est(1.75), Est(4.75))


def test_ci_is_reproducible_and_order_free():
    values = [1.0, 1.2, 0.9, 1.5, 1.1, 1.3, 0.95, 1.05, 2.0, 1.15]
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate(values)]
    a, b = summarize(recs)[0], summarize(list(reversed(recs)))[0]
    assert a.total_s.ci == b.total_s.ci == median_ci(values)
    assert (a.total_s.ci.lo.value, a.total_s.ci.hi.value) == (0.95, 1.5)  # x(2), x(9) of ten values


def test_censored_runs_count_in_n_and_sit_at_the_top():
    # completed 1..3 s plus one timeout and one failure at a 60 s timeout: n = 5, the CI's upper end is censored
    recs = [make_record(repeat=i, total_s=t, timeout_s=60.0) for i, t in enumerate([3.0, 1.0, 2.0])]
    recs += [timed_out(3), make_record(repeat=4, status="failed", failure="reset", timeout_s=60.0)]
    [g] = summarize(recs)
    assert (g.n, g.n_censored, g.n_completed, g.censored, g.n_excluded) == (5, 2, 3, {"timeout": 1, "failed": 1}, 0)
    t, gp = g.total_s, g.goodput_bps
    assert t.median == Est(3.0)  # x(3) of (1, 2, 3, >60, >60): still a number
    assert (t.ci.lo, t.ci.hi, t.ci.level) == (Est(1.0), Est(60.0, ">"), 0.9375)
    assert t.q3 == Est(60.0, ">")
    assert gp.median.value == pytest.approx(SIZE * 8 / 3.0) and gp.median.exact
    assert gp.ci.lo == Est(SIZE * 8 / 60.0, "<") and gp.ci.hi.value == pytest.approx(SIZE * 8)
    assert t.mean is None and t.sd is None  # a mean needs every value
    assert fmt_ci(t.ci) == "1.00\u2013>60.0" and fmt_ci(gp.ci, 1e-6) == "<0.133\u20138.00"


def test_median_falls_on_a_censored_run():
    recs = [make_record(repeat=i, total_s=t, timeout_s=30.0) for i, t in enumerate([2.0, 1.0])]
    recs += [timed_out(i, timeout_s=30.0) for i in (2, 3, 4)]
    t = summarize(recs)[0].total_s
    assert t.median == Est(30.0, ">") and fmt_est(t.median) == ">30.0"
    assert t.ci.lo == Est(1.0) and t.ci.hi == Est(30.0, ">")
    gp = summarize(recs)[0].goodput_bps
    assert gp.median == Est(SIZE * 8 / 30.0, "<") and fmt_est(gp.median, 1e-6) == "<0.267"


def test_even_median_between_a_completed_and_a_censored_run_is_a_bound():
    d = describe([Obs(1.0), Obs(2.0), Obs(10.0, 1), Obs(10.0, 1)])
    assert d.median == Est(6.0, ">")  # (2 + x(3)) / 2 with x(3) > 10
    assert d.q1 == Est(1.75)


def test_nothing_censored_reads_as_before():
    d = describe([Obs(1.0), Obs(2.0), Obs(3.0)])
    assert d.n_censored == 0 and d.median.exact and d.mean == 2.0


def test_runs_without_timeout_are_censored_at_the_largest_completed_time():
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate([4.0, 5.0])]
    recs += [timed_out(i, timeout_s=None) for i in (2, 3, 4)]
    t = summarize(recs)[0].total_s
    assert t.median == Est(5.0, ">")
    recs = [timed_out(i, timeout_s=None) for i in range(3)]  # nothing completed, no timeout: bound unknown
    g = summarize(recs)[0]
    assert (g.n, g.n_censored) == (3, 3)
    assert g.total_s.median == Est(None, ">") and fmt_est(g.total_s.median) == ">?"
    assert fmt_est(g.goodput_bps.median) == "<?"


def test_an_aborted_run_is_censored_at_its_own_end_not_the_timeout():
    """connectify-cc's nginx QUIC run aborted after 65.9 s of a 150 s timeout: known only to need > 65.9 s."""
    from dataclasses import replace

    recs = [make_record(repeat=i, total_s=t, timeout_s=150.0) for i, t in enumerate([4.0, 5.0, 6.0, 7.0])]
    recs.append(replace(make_record(repeat=4, status="failed", failure="exit 56", timeout_s=150.0), total_s=65.9))
    g = summarize(recs)[0]
    assert g.total_s.ci.hi == Est(65.9, ">") and fmt_ci(g.total_s.ci) == "4.00\u2013>65.9"
    assert g.goodput_bps.ci.lo == Est(SIZE * 8 / 65.9, "<")
    [r] = ratios(recs + [replace(x, protocol="h1") for x in recs[:4]] +
                 [make_record(repeat=4, protocol="h1", total_s=5.0, timeout_s=150.0)], denominators=("h1",))
    assert r.time_ci.hi == Est(65.9 / 5.0, ">")  # the pair's ratio bound uses the run's own end too


def test_non_results_excluded_and_counted():
    r = make_record(repeat=1)
    r.total_s = None
    recs = [make_record(repeat=0, total_s=1.0), r, make_record(repeat=2, status="unsupported", failure="no h2"),
            make_record(repeat=3, status="interrupted", failure="Ctrl-C"), timed_out(4)]
    [g] = summarize(recs)
    assert (g.n, g.n_censored, g.n_excluded) == (2, 1, 3)
    assert g.excluded == {"ok-without-timing": 1, "unsupported": 1, "interrupted": 1}
    assert exclusion_counts(recs) == {("interrupted", "Ctrl-C"): 1, ("ok-without-timing", ""): 1,
                                      ("unsupported", "no h2"): 1}
    assert censored_counts(recs) == {("timeout", "curl exit 28"): 1}


def test_n_below_two():
    [g] = summarize([make_record(total_s=2.0)])
    assert (g.total_s.median, g.total_s.q1, g.total_s.q3) == (Est(2.0), Est(2.0), Est(2.0))
    assert g.total_s.ci is None and g.total_s.sd is None
    [g] = summarize([make_record(status="unsupported", failure="x")])
    assert g.n == 0 and g.total_s is None and g.goodput_bps is None and g.excluded == {"unsupported": 1}


def test_group_order_points_then_protocols():
    recs = [make_record(point=p, protocol=pr) for p in (2, 0, 1) for pr in ("h3", "h1", "h2")]
    keys = [(g.point, g.protocol) for g in summarize(recs)]
    assert keys == [(p, pr) for p in (0, 1, 2) for pr in ("h1", "h2", "h3")]


# --- paired ratios -------------------------------------------------------------------------------------------------


def _pairs(h3, h1, **kw):
    return ([make_record(protocol="h3", repeat=i, total_s=t, **kw) for i, t in enumerate(h3)]
            + [make_record(protocol="h1", repeat=i, total_s=t, **kw) for i, t in enumerate(h1)])


def test_ratio_is_the_median_of_per_pair_ratios_not_a_ratio_of_medians():
    # per-pair ratios 0.5, 2.0, 0.9 -> median 0.9; medians 2 / 2 would give 1.0
    [r] = ratios(_pairs([1.0, 2.0, 9.0], [2.0, 1.0, 10.0]))
    assert r.time_ratio == Est(pytest.approx(0.9))
    assert np.median([1.0, 2.0, 9.0]) / np.median([2.0, 1.0, 10.0]) == 1.0
    assert r.goodput_ratio.value == pytest.approx(1 / 0.9)  # per-pair goodput ratios 2, 0.5, 1.11: median 1.11
    assert (r.time_ci.lo.value, r.time_ci.hi.value, r.time_ci.level) == (0.5, 2.0, 0.75)


def test_ratio_ci_over_pairs():
    # h3 = h1 / 2 in every pair, with very different pairs: every per-pair ratio is 0.5, and so is the CI
    h1 = [1.0, 10.0, 100.0, 1000.0, 5.0, 7.0]
    [r] = ratios(_pairs([t / 2 for t in h1], h1))
    assert (r.n_pairs, r.time_ratio, r.time_ci.lo, r.time_ci.hi) == (6, Est(0.5), Est(0.5), Est(0.5))
    assert r.time_ci.level == 0.96875


def test_pairs_only_by_repeat_with_the_same_point_client_and_server():
    recs = _pairs([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    # another client at the same point and repeats, and another point: neither may pair with curl's runs
    recs += [make_record(protocol="h1", repeat=i, total_s=100.0, client="gtlsclient") for i in range(3)]
    recs += [make_record(protocol="h1", repeat=i, total_s=50.0, point=1) for i in range(3)]
    recs += [make_record(protocol="h3", repeat=i, total_s=500.0, point=1) for i in range(3)]
    rs = {(r.point, r.client): r for r in ratios(recs)}
    assert set(rs) == {(0, "curl"), (1, "curl")}  # gtlsclient has no HTTP/3 runs: nothing to compare
    assert rs[(0, "curl")].time_ratio == Est(0.5) and rs[(0, "curl")].n_pairs == 3
    assert rs[(1, "curl")].time_ratio == Est(10.0)
    # repeats pair up one to one: h3 repeat i with h1 repeat i (a shuffle across repeats would not give 0.5 each)
    assert (rs[(0, "curl")].time_ci.lo, rs[(0, "curl")].time_ci.hi) == (Est(0.5), Est(0.5))


def test_censored_pairs_are_bounded_and_ranked_indeterminate_pairs_excluded():
    recs = _pairs([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], timeout_s=60.0)
    recs += [timed_out(4, "h3"), make_record(protocol="h1", repeat=4, total_s=3.0, timeout_s=60.0)]  # > 60/3
    recs += [make_record(protocol="h3", repeat=5, total_s=1.5, timeout_s=60.0), timed_out(5, "h1")]  # < 1.5/60
    recs += [timed_out(6, "h3"), timed_out(6, "h1")]  # both censored: indeterminate
    recs += [make_record(protocol="h3", repeat=7, total_s=1.0, timeout_s=60.0),
             make_record(protocol="h1", repeat=7, status="interrupted", failure="Ctrl-C")]  # no pair
    [r] = ratios(recs)
    p = r.pairs
    assert (p.n_pairs, p.n_censored, p.n_excluded, p.excluded) == (6, 2, 2, {BOTH_CENSORED: 1, UNPAIRED: 1})
    # sorted per-pair time ratios: <0.025, 0.5, 0.5, 0.5, 0.5, >20: median exact, CI ends are the bounds
    assert r.time_ratio == Est(0.5)
    assert (r.time_ci.lo, r.time_ci.hi, r.time_ci.level) == (Est(1.5 / 60.0, "<"), Est(20.0, ">"), 0.96875)
    assert r.goodput_ci.lo == Est(pytest.approx(3.0 / 60.0), "<")  # HTTP/3 did not complete: goodput ratio low
    assert r.goodput_ci.hi == Est(pytest.approx(60.0 / 1.5), ">")
    assert fmt_ci(r.time_ci) == "<0.0250\u2013>20.0"


def test_a_censored_ratio_median():
    recs = _pairs([1.0], [2.0], timeout_s=60.0) + [timed_out(i, "h3") for i in (1, 2)]
    recs += [make_record(protocol="h1", repeat=i, total_s=2.0, timeout_s=60.0) for i in (1, 2)]
    [r] = ratios(recs)
    assert (r.n_pairs, r.pairs.n_censored) == (3, 2)
    assert r.time_ratio == Est(30.0, ">") and r.goodput_ratio == Est(pytest.approx(2.0 / 60.0), "<")


def test_opposite_censoring_in_the_middle_is_not_determinable():
    d = describe([Obs(0.5, -1), Obs(20.0, 1)])
    assert d.median == Est(None, "?") and fmt_est(d.median) == "?"


def test_ratios_fewer_than_two_pairs():
    recs = [make_record(protocol="h3", repeat=0, total_s=1.0), make_record(protocol="h2", repeat=0, total_s=2.0),
            make_record(protocol="h3", repeat=1, total_s=1.0),
            make_record(protocol="h2", repeat=1, status="unsupported", failure="x")]
    [r] = ratios(recs)
    assert (r.denominator, r.n_pairs, r.time_ratio, r.time_ci, r.goodput_ci) == ("h2", 1, Est(0.5), None, None)
    assert r.pairs.excluded == {UNPAIRED: 1}
    recs = [make_record(protocol="h3", repeat=0), make_record(protocol="h2", repeat=1)]
    [r] = ratios(recs)
    assert (r.n_pairs, r.time_ratio, r.goodput_ratio, r.pairs.n_excluded) == (0, None, None, 2)
