"""Statistics on hand-made runs: exact medians and quartiles, reproducible bootstrap CIs, exclusions, ratios."""

import pytest

from lab.results.schema import RunRecord
from lab.results.stats import BOOTSTRAP_RESAMPLES, exclusion_counts, median_ci, ratios, summarize

SIZE = 1_000_000


def make_record(point=0, protocol="h3", repeat=0, total_s=1.0, status="ok", failure="", client="curl",
                server="nginx", x_name="loss_pct", x=None, label=None, sweep="test") -> RunRecord:
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
        cc_client="cubic", cc_server="cubic", started_at="2024-06-01T12:00:00Z",
    )


def test_median_and_iqr_exact():
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate([5.0, 1.0, 3.0, 2.0, 4.0])]
    [g] = summarize(recs)
    assert (g.n, g.n_excluded, g.excluded) == (5, 0, {})
    d = g.total_s
    assert (d.median, d.q1, d.q3, d.mean) == (3.0, 2.0, 4.0, 3.0)
    assert d.sd == pytest.approx(1.5811388, rel=1e-6)
    assert g.goodput_bps.median == pytest.approx(SIZE * 8 / 3.0)
    assert g.goodput_bps.q1 == pytest.approx(SIZE * 8 / 4.0)  # goodput quartiles are computed on goodput


def test_even_count_interpolates():
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate([1.0, 2.0, 3.0, 10.0])]
    d = summarize(recs)[0].total_s
    assert (d.median, d.q1, d.q3) == (2.5, 1.75, 4.75)


def test_ci_contains_median_and_is_reproducible():
    values = [1.0, 1.2, 0.9, 1.5, 1.1, 1.3, 0.95, 1.05, 2.0, 1.15]
    recs = [make_record(repeat=i, total_s=t) for i, t in enumerate(values)]
    a, b = summarize(recs)[0], summarize(list(reversed(recs)))[0]
    lo, hi = a.total_s.ci
    assert lo <= a.total_s.median <= hi
    assert lo < hi
    assert min(values) <= lo and hi <= max(values)
    assert median_ci(values) == median_ci(values) == a.total_s.ci
    assert b.total_s.median == a.total_s.median
    assert BOOTSTRAP_RESAMPLES == 2000


def test_failed_runs_excluded_and_counted():
    recs = [make_record(repeat=0, total_s=1.0), make_record(repeat=1, total_s=3.0),
            make_record(repeat=2, status="failed", failure="curl exit 28"),
            make_record(repeat=3, status="timeout", failure="no answer in 120 s"),
            make_record(repeat=4, status="failed", failure="curl exit 28")]
    [g] = summarize(recs)
    assert (g.n, g.n_excluded) == (2, 3)
    assert g.excluded == {"failed": 2, "timeout": 1}
    assert g.total_s.median == 2.0
    assert exclusion_counts(recs) == {("failed", "curl exit 28"): 2, ("timeout", "no answer in 120 s"): 1}


def test_ok_row_without_timing_is_excluded_not_dropped():
    r = make_record(repeat=1)
    r.total_s = None
    [g] = summarize([make_record(repeat=0), r])
    assert (g.n, g.n_excluded, g.excluded) == (1, 1, {"ok-without-timing": 1})


def test_n_below_two():
    [g] = summarize([make_record(total_s=2.0)])
    assert (g.total_s.median, g.total_s.q1, g.total_s.q3) == (2.0, 2.0, 2.0)
    assert g.total_s.ci is None and g.total_s.sd is None
    [g] = summarize([make_record(status="failed", failure="x")])
    assert g.n == 0 and g.total_s is None and g.goodput_bps is None and g.excluded == {"failed": 1}


def test_group_order_points_then_protocols():
    recs = [make_record(point=p, protocol=pr) for p in (2, 0, 1) for pr in ("h3", "h1", "h2")]
    keys = [(g.point, g.protocol) for g in summarize(recs)]
    assert keys == [(p, pr) for p in (0, 1, 2) for pr in ("h1", "h2", "h3")]


def test_ratios_paired_by_repeat():
    h3 = [1.0, 2.0, 3.0, 100.0]
    h1 = [2.0, 4.0, 6.0, 8.0]
    recs = [make_record(protocol="h3", repeat=i, total_s=t) for i, t in enumerate(h3)]
    recs += [make_record(protocol="h1", repeat=i, total_s=t) for i, t in enumerate(h1)]
    recs[3] = make_record(protocol="h3", repeat=3, status="failed", failure="reset")  # repeat 3 has no pair
    [r] = ratios(recs)
    assert (r.numerator, r.denominator, r.n_pairs) == ("h3", "h1", 3)
    assert r.time_ratio == pytest.approx(2.0 / 4.0)  # medians over repeats 0-2 only
    assert r.goodput_ratio == pytest.approx(2.0)
    assert r.time_ci == pytest.approx((0.5, 0.5))  # every pair has ratio 0.5, so every resample does
    assert ratios(recs) == [r]


def test_ratio_resamples_pairs_together():
    # h3 = h1 / 2 in every pair, with very different pairs: resampling pairs keeps the ratio at exactly 0.5,
    # resampling independently would not
    h1 = [1.0, 10.0, 100.0, 1000.0, 5.0]
    recs = [make_record(protocol="h1", repeat=i, total_s=t) for i, t in enumerate(h1)]
    recs += [make_record(protocol="h3", repeat=i, total_s=t / 2) for i, t in enumerate(h1)]
    [r] = ratios(recs)
    assert r.time_ci == pytest.approx((0.5, 0.5))


def test_ratios_fewer_than_two_pairs():
    recs = [make_record(protocol="h3", repeat=0, total_s=1.0), make_record(protocol="h2", repeat=0, total_s=2.0),
            make_record(protocol="h3", repeat=1, total_s=1.0),
            make_record(protocol="h2", repeat=1, status="failed", failure="x")]
    [r] = ratios(recs)
    assert (r.denominator, r.n_pairs, r.time_ratio, r.time_ci, r.goodput_ci) == ("h2", 1, 0.5, None, None)
    recs = [make_record(protocol="h3", repeat=0), make_record(protocol="h2", repeat=1)]
    [r] = ratios(recs)
    assert (r.n_pairs, r.time_ratio, r.goodput_ratio) == (0, None, None)
