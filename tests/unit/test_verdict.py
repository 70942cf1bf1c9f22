"""Verdicts of two sweeps (lab/results/verdict.py): exact rank-test p values and interval levels checked against
brute-force enumeration, the three verdicts on synthetic samples, margins (the TTFB floor), censored runs counted,
and `quiclab compare` through the CLI (tables, tally, --json, bad margins exit 2)."""

import itertools
import json
import math

import numpy as np
import pytest

from lab.errors import UsageError
from lab.results.report import judge_sweeps
from lab.results.schema import csv_text
from lab.results.stats import Obs
from lab.results.verdict import (
    Judgement,
    Margins,
    hl_rank,
    judge_records,
    margins_from_options,
    needed_per_side,
    p95_needed_per_side,
    quantile_ci_ranks,
    rank_test,
    smallest_p,
    too_few_warning,
)
from tests.unit.test_stats import SIZE, make_record

TOO_FEW_3 = ("n = 3 per side: no two-sided rank test can reach p < 0.05 (smallest p = 0.10); "
             "needs >= 4 per side")


# --- exact distributions -------------------------------------------------------------------------------------------


def test_smallest_p_and_the_runs_needed():
    # 2 / C(2n, n): the most extreme of the C(2n, n) equally likely rank arrangements, both tails
    assert smallest_p(3, 3) == pytest.approx(0.10)
    assert smallest_p(4, 4) == pytest.approx(2 / 70) == pytest.approx(0.0286, abs=1e-4)
    assert smallest_p(5, 5) == pytest.approx(2 / 252) == pytest.approx(0.0079, abs=1e-4)
    assert smallest_p(3, 10) == pytest.approx(2 / 286)  # unequal sizes: three runs against ten can differ
    assert needed_per_side(0.05) == 4 and needed_per_side(0.01) == 5 and needed_per_side(0.1) == 4
    assert too_few_warning(3, 3, 0.05) == TOO_FEW_3
    assert too_few_warning(4, 4, 0.05) == "" and too_few_warning(3, 10, 0.05) == ""
    assert too_few_warning(2, 3, 0.05).startswith("n = 2 (A) and 3 (B): ")
    # the rank test reaches exactly those p values at the extreme
    for n in (3, 4, 5):
        t = rank_test([Obs(float(i)) for i in range(n)], [Obs(float(i + 10)) for i in range(n)])
        assert (t.method, t.p, t.smallest_p) == ("exact", pytest.approx(smallest_p(n, n)), smallest_p(n, n))


def _brute_p(a, b):
    """Two-sided p by enumerating every split of the pooled mid-ranks (the permutation distribution)."""
    pooled = sorted(a + b)
    ranks = {}
    for v in set(pooled):
        idx = [i + 1 for i, x in enumerate(pooled) if x == v]
        ranks[v] = sum(idx) / len(idx)
    r = [ranks[x] for x in a + b]
    s = sum(r[len(a):])
    sums = [sum(r[i] for i in c) for c in itertools.combinations(range(len(r)), len(b))]
    lower = sum(1 for x in sums if x <= s + 1e-9) / len(sums)
    upper = sum(1 for x in sums if x >= s - 1e-9) / len(sums)
    return min(1.0, 2 * min(lower, upper))


@pytest.mark.parametrize(("a", "b"), [
    ([1.0, 2.0, 3.0, 4.0, 5.0], [2.5, 3.5, 6.0, 7.0]),
    ([1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 5.0, 6.0]),  # ties: the exact permutation distribution
    ([1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6, 1.7, 1.8]),
])
def test_rank_test_p_is_the_exact_permutation_p(a, b):
    t = rank_test([Obs(x) for x in a], [Obs(x) for x in b])
    assert t.p == pytest.approx(_brute_p(a, b), abs=1e-12)
    assert t.method == ("exact with ties" if len(set(a + b)) < len(a + b) else "exact")


def test_censored_values_tie_beyond_every_completed_one():
    # A: 1..4 s completed; B: 1..2 s completed and two timeouts: the timeouts rank as the two slowest, tied
    a = [Obs(x) for x in (1.0, 2.0, 3.0, 4.0)]
    b = [Obs(1.5), Obs(2.5), Obs(60.0, 1), Obs(30.0, 1)]
    assert rank_test(a, b).p == pytest.approx(_brute_p([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 99.0, 99.0]))


def _u_cdf_brute(m, n, u):
    """P(U <= u) by enumeration of the C(m+n, m) rank arrangements."""
    count = total = 0
    for c in itertools.combinations(range(1, m + n + 1), m):
        total += 1
        count += sum(c) - m * (m + 1) // 2 <= u
    return count / total


@pytest.mark.parametrize(("m", "n", "k", "level"), [
    (2, 2, 1, 1 - 2 / 6),      # 66.7 %: no interval reaches 90 %
    (3, 3, 1, 1 - 2 / 20),     # the range of the 9 pairwise ratios: exactly 90 %
    (4, 4, 2, 1 - 2 * 2 / 70),  # 94.3 %
    (5, 5, 5, None),            # 90.5 %
    (10, 10, 28, None),         # 91.1 %
    (4, 7, None, None),
])
def test_hodges_lehmann_rank_and_level(m, n, k, level):
    got_k, got_level, kind = hl_rank(m, n, 0.05)
    assert kind == "exact"
    if k is not None:
        assert got_k == k
    assert got_level == pytest.approx(1 - 2 * _u_cdf_brute(m, n, got_k - 1))
    if level is not None:
        assert got_level == pytest.approx(level)
    if m + n >= 6:  # the next narrower interval falls short of 90 %
        assert got_level >= 0.9 - 1e-12
        assert 1 - 2 * _u_cdf_brute(m, n, got_k) < 0.9


def test_large_samples_use_the_normal_approximation_and_say_so():
    _, level, kind = hl_rank(40, 40, 0.05)
    assert kind == "approximate" and level == pytest.approx(0.9, abs=0.01)
    t = rank_test([Obs(float(i)) for i in range(40)], [Obs(float(i) + 0.5) for i in range(40)])
    assert t.method == "normal approximation" and 0.5 < t.p <= 1


def test_p95_interval_levels():
    target = math.sqrt(0.9)
    r, s, cov = quantile_ci_ranks(10, 0.95, target)
    assert (r, s) == (1, 10) and cov == pytest.approx(1 - 0.95**10 - 0.05**10)  # the range: 40 %
    r, s, cov = quantile_ci_ranks(58, 0.95, target)
    assert s == 58 and cov >= target
    assert quantile_ci_ranks(57, 0.95, target)[2] < target
    assert p95_needed_per_side(0.05) == 58


# --- verdicts ------------------------------------------------------------------------------------------------------


def records(times, ttfbs=None, protocol="h3", timeouts=0, timeout_s=60.0, **kw):
    """One group: completed runs with these transfer times (and TTFBs), then `timeouts` timed-out runs."""
    out = []
    for i, t in enumerate(times):
        r = make_record(repeat=i, total_s=t, protocol=protocol, timeout_s=timeout_s, **kw)
        r.ttfb_s = ttfbs[i] if ttfbs is not None else 0.05 * t
        out.append(r)
    for j in range(timeouts):
        out.append(make_record(repeat=len(times) + j, protocol=protocol, status="timeout", failure="curl exit 28",
                               timeout_s=timeout_s, **kw))
    return out


def unpaired(rs):
    """The same runs over other link seeds: no pairs with a sweep of the default seeds (the unpaired design)."""
    for r in rs:
        r.seed += 7777
    return rs


def noisy(n, scale=1.0, seed=0, sd=0.03):
    rng = np.random.default_rng(seed)
    return [float(scale * (1 + sd * z)) for z in rng.standard_normal(n)]


def by_metric(j: Judgement):
    return {r.metric: r for r in j.rows}


def test_equal_samples_are_equivalent_at_n_10():
    a, b = records(noisy(10, seed=1)), unpaired(records(noisy(10, seed=2)))
    rows = by_metric(judge_records(a, b))
    assert set(rows) == {"goodput", "time_p95", "ttfb"}
    g = rows["goodput"]
    assert (g.verdict, g.n_a, g.n_b, g.too_few) == ("equivalent", 10, 10, "")
    assert g.design == "unpaired" and "link seeds differ at 10 of 10 repeats" in g.pairing
    assert g.ci.level == pytest.approx(0.9108, abs=1e-4) and g.ci.level_kind == "exact"
    assert 1 / 1.1 < g.ci.lo.value <= g.ratio.value <= g.ci.hi.value < 1.1
    assert "inside \u00b110 % (0.909\u20131.10)" in g.reason
    assert rows["ttfb"].verdict == "equivalent"
    # the p95 cannot be judged from 10 runs: no distribution-free interval reaches 90 %, and the row says so
    p = rows["time_p95"]
    assert p.verdict == "inconclusive" and p.ci.level_kind == "at least" and p.ci.level < 0.9
    assert "needs >= 58 per side" in p.reason
    assert not judge_records(a, b).any_differs


def test_a_20_percent_shift_differs_at_n_10():
    base = noisy(10, seed=3)
    a, b = records(base), unpaired(records([t * 1.2 for t in base]))
    j = judge_records(a, b)
    rows = by_metric(j)
    g = rows["goodput"]  # B 20 % slower: goodput ratio 1/1.2
    assert g.verdict == "differs" and g.test.p == pytest.approx(smallest_p(10, 10))
    assert g.ratio.value == pytest.approx(1 / 1.2) and g.ci.hi.value < 1 / 1.1
    assert rows["ttfb"].verdict == "differs"  # TTFB 5 % of the time here: also 20 % longer
    assert rows["time_p95"].verdict == "inconclusive"
    assert j.any_differs and j.counts == {"equivalent": 0, "differs": 2, "inconclusive": 1}
    assert j.tally == "0 equivalent, 2 differ, 1 inconclusive"
    # a wider margin takes the same shift as equivalent; the two sweeps swapped give the same verdicts
    wide = by_metric(judge_records(a, b, Margins(median=0.3)))
    assert wide["goodput"].verdict == "equivalent" and wide["goodput"].margin == 0.3
    assert [r.verdict for r in judge_records(b, a).rows] == [r.verdict for r in j.rows]


def test_three_per_side_is_inconclusive_and_says_why():
    a, b = records([1.0, 1.02, 0.98]), unpaired(records([1.2, 1.22, 1.18]))
    g = by_metric(judge_records(a, b))["goodput"]
    assert g.verdict == "inconclusive" and g.too_few == TOO_FEW_3
    assert g.reason.startswith(TOO_FEW_3)
    assert g.test.p == pytest.approx(0.10) and g.ci.level == pytest.approx(0.90)
    # three tight runs per side can still be shown equivalent (the 90 % interval is the range of the 9 ratios),
    # but never different: the warning stays on the row
    same = by_metric(judge_records(records([1.0, 1.01, 0.99]), unpaired(records([1.0, 1.005, 0.995]))))["goodput"]
    assert same.verdict == "equivalent" and same.too_few == TOO_FEW_3


def test_two_per_side_never_reaches_the_level():
    g = by_metric(judge_records(records([1.0, 1.0]), unpaired(records([1.0, 1.0]))))["goodput"]
    assert g.verdict == "inconclusive" and g.ci.level == pytest.approx(2 / 3)
    assert "the CI reaches only 66.7 % (< 90 %)" in g.reason


def test_significant_but_within_the_margin_is_not_a_difference():
    base = noisy(10, seed=4, sd=0.01)
    b = unpaired(records([t * 1.05 for t in base]))
    g = by_metric(judge_records(records(base), b))["goodput"]
    assert g.test.p < 0.05 and g.verdict == "equivalent"  # 5 % slower, tightly measured: inside +-10 %
    g = by_metric(judge_records(records(base), b, Margins(median=0.05)))["goodput"]
    assert g.verdict == "inconclusive" and "a change smaller than the margin is not ruled out" in g.reason


def test_ttfb_margin_has_an_absolute_floor():
    # TTFB about 2 ms in A and 2.6 ms in B (+30 %, +0.6 ms): within the 1 ms floor (max(1 ms, 10 %) = 50 % of 2 ms)
    times = noisy(10, seed=5)
    ta = [0.002 * (1 + 0.01 * z) for z in np.random.default_rng(6).standard_normal(10)]
    tb = [t * 1.3 for t in ta]
    a, b = records(times, ttfbs=ta), records(times, ttfbs=tb)
    t = by_metric(judge_records(a, b))["ttfb"]
    assert t.margin == pytest.approx(0.001 / np.median(ta), rel=1e-6) and t.margin == pytest.approx(0.5, abs=0.01)
    assert t.verdict == "equivalent"
    t0 = by_metric(judge_records(a, b, Margins(ttfb_ms=0)))["ttfb"]
    assert t0.margin == 0.1 and t0.verdict == "differs"
    # a slow TTFB: 10 % is more than 1 ms, so the relative margin holds
    slow = by_metric(judge_records(records(times, ttfbs=[x * 100 for x in ta]), b))["ttfb"]
    assert slow.margin == 0.1


def test_censored_runs_are_counted_never_dropped():
    # B: 10 runs, 9 timed out: n stays 10, and B's goodput ranks below every completed one -> differs
    a = records(noisy(10, seed=7))
    b = records(noisy(1, seed=8), timeouts=9)
    rows = by_metric(judge_records(a, b))
    g = rows["goodput"]
    assert (g.n_a, g.n_b, g.censored_a, g.censored_b) == (10, 10, 0, 9)
    assert g.b.bound == "<" and g.b.value == pytest.approx(SIZE * 8 / 60.0)  # below size*8/timeout
    assert g.verdict == "differs" and g.ci.hi.bound == "<"
    t = rows["ttfb"]  # no first byte before the timeout: censored at it as well
    assert (t.n_b, t.censored_b, t.verdict) == (10, 9, "differs")
    # without the censored runs B would look the same as A: dropping them would hide the failures
    only_completed = [r for r in b if r.status == "ok"]
    assert by_metric(judge_records(a, only_completed))["goodput"].n_b == 1


def test_excluded_rows_are_counted_apart_and_unsupported_groups_skipped():
    a = records(noisy(6, seed=9))
    a.append(make_record(repeat=6, status="unsupported", failure="no HTTP/3"))
    b = records(noisy(6, seed=10))
    g = by_metric(judge_records(a, b))["goodput"]
    assert (g.n_a, g.excluded_a, g.n_b, g.excluded_b) == (6, 1, 6, 0)
    never = [make_record(repeat=i, protocol="h2", client="gtlsclient", status="unsupported") for i in range(3)]
    j = judge_records(a + never, b + never)
    assert {r.protocol for r in j.rows} == {"h3"}


def test_page_workloads_are_judged_on_the_page_time():
    a, b = records(noisy(8, seed=11)), records(noisy(8, seed=12))
    for r in a + b:
        r.workload = "page:50x20kB"
    rows = by_metric(judge_records(a, b))
    assert set(rows) == {"page_time", "time_p95", "ttfb"}
    assert rows["page_time"].label == "median page time s" and rows["page_time"].verdict == "equivalent"


def test_margins_are_validated_with_one_line_naming_the_value():
    assert margins_from_options() == Margins()
    assert margins_from_options(0.05, 0.3, 0, 0.01) == Margins(median=0.05, p95=0.3, ttfb_ms=0, alpha=0.01)
    for kw, needle in ((dict(margin=0), "--margin 0: allowed is more than 0 and at most 1"),
                       (dict(margin=1.5), "--margin 1.5"),
                       (dict(margin=math.nan), "--margin nan"),
                       (dict(margin_p95=-0.2), "--margin-p95 -0.2"),
                       (dict(margin_ttfb_ms=-1), "--margin-ttfb-ms -1: allowed is 0 to 1000"),
                       (dict(alpha=0.5), "--alpha 0.5: allowed is more than 0 and at most 0.25"),
                       (dict(alpha=math.inf), "--alpha inf")):
        with pytest.raises(UsageError) as e:
            margins_from_options(**kw)
        assert needle in str(e.value) and "\n" not in str(e.value) and e.value.exit_code == 2


# --- the command ---------------------------------------------------------------------------------------------------


def write_sweep(folder, name, recs):
    folder.mkdir(parents=True)
    (folder / "runs.csv").write_text(csv_text(recs))
    (folder / "manifest.json").write_text(json.dumps({"name": name, "repeats": 10}))
    return folder


def two_sweeps(tmp_path):
    """A and B: HTTP/3 the same, HTTP/1.1 20 % slower in B, HTTP/2 with three runs only, all at one point whose
    label holds rich markup (printed as it is)."""
    label = "loss=1% [bold]x[/bold]"
    ra, rb = [], []
    for proto, n, shift in (("h1", 10, 1.2), ("h2", 3, 1.2), ("h3", 10, 1.0)):
        base = noisy(n, seed=len(proto) + n)
        ra += records(base, protocol=proto, label=label, sweep="before")
        rb += records([t * shift for t in noisy(n, seed=n + 100)] if shift == 1.0 else [t * shift for t in base],
                      protocol=proto, label=label, sweep="after")
    return write_sweep(tmp_path / "a", "before", ra), write_sweep(tmp_path / "b", "after", rb)


def _cli():
    import typer

    from lab.cli import compare

    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # keeps `compare` a subcommand
        pass

    compare.register(app)
    return app


def test_cli_compare_prints_the_verdicts_and_a_tally(tmp_path):
    from typer.testing import CliRunner

    a, b = two_sweeps(tmp_path)
    r = CliRunner().invoke(_cli(), ["compare", str(a), str(b)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output  # informational: exit 0 even though something differs
    out = r.output
    for whole in ("loss=1% [bold]x[/bold]", "HTTP/1.1 curl→nginx", "HTTP/3 curl→nginx", "median goodput Mbit/s",
                  "median TTFB ms", "p95 time s"):
        assert whole in out, whole  # never cut at 80 columns, markup printed as it is
    assert "medians (n = results" in out and "paired ratios B/A" in out  # the earlier tables stay
    assert "differs" in out and "equivalent" in out
    assert TOO_FEW_3 in out  # HTTP/2: three runs a side
    assert "2 equivalent, 2 differ, 5 inconclusive" in out.splitlines()[-1]
    j = judge_sweeps(a, b)
    assert j.any_differs and j.tally == "2 equivalent, 2 differ, 5 inconclusive"
    assert j.a == f"before ({a})"


def test_cli_compare_json_is_the_model_dump(tmp_path):
    from typer.testing import CliRunner

    a, b = two_sweeps(tmp_path)
    r = CliRunner().invoke(_cli(), ["compare", str(a), str(b), "--json", "--margin", "0.3", "--alpha", "0.1"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d) == {"a", "b", "medians", "paired_ratios", "paired_ratios_note", "judgement"}
    j = Judgement.model_validate({k: v for k, v in d["judgement"].items() if k not in ("counts", "any_differs")})
    assert j.margins == Margins(median=0.3, alpha=0.1)
    assert d["judgement"]["counts"] == j.counts and d["judgement"]["any_differs"] == j.any_differs
    assert len(d["medians"]["rows"]) == 3 and len(j.rows) == 9
    g = next(x for x in d["judgement"]["rows"] if x["protocol"] == "h1" and x["metric"] == "goodput")
    assert g["verdict"] == "equivalent" and g["margin"] == 0.3  # a 20 % shift inside a 30 % margin


@pytest.mark.parametrize(("args", "needle"), [
    (["--margin", "0"], "invalid --margin 0: allowed is more than 0 and at most 1"),
    (["--margin", "2"], "invalid --margin 2"),
    (["--margin-p95", "-1"], "invalid --margin-p95 -1"),
    (["--margin-ttfb-ms", "5000"], "invalid --margin-ttfb-ms 5000: allowed is 0 to 1000"),
    (["--alpha", "0"], "invalid --alpha 0: allowed is more than 0 and at most 0.25"),
    (["--alpha", "nan"], "invalid --alpha nan"),
])
def test_bad_margins_exit_2_with_one_line(tmp_path, capsys, args, needle):
    from lab.cli import main

    a, b = two_sweeps(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["compare", str(a), str(b), *args])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err
