"""The calibration benchmark's pure parts (issue 35 item 3; the run itself needs two labs: docs/calibrate.md): the
hidden links drawn (trace pairs first, the rest within the ranges, each a link the lab accepts), the score of a
calibration (failures censored, never dropped), the acceptance summary, the results' round trip and their table."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from lab import config
from lab.bench import hidden
from lab.bench.calibration import check_labs
from lab.bench.hidden import HiddenLink, Score, draw, summarize
from lab.errors import UsageError
from lab.link.spec import parse_link


def test_the_trace_pairs_come_first_and_the_rest_stay_within_the_ranges() -> None:
    links = draw(40, seed=35, traces=["ATT", "TMobile"])
    assert [lk.trace for lk in links[:2]] == ["ATT", "TMobile"] and not any(lk.trace for lk in links[2:])
    assert draw(40, seed=35, traces=["ATT", "TMobile"]) == links  # seeded
    assert draw(40, seed=36, traces=["ATT", "TMobile"]) != links
    for lk in links:
        assert 0.010 <= lk.rtt_s <= 0.200
    rest = links[2:]
    for lk in rest:
        assert lk.rate_bps is not None and lk.queue_bytes is not None
        assert 2e6 <= lk.rate_bps <= 50e6 and lk.queue_bytes >= 3000 and (lk.loss == 0 or 1e-4 <= lk.loss <= 1e-2)
        bdp = lk.rate_bps / 8 * lk.rtt_s
        assert lk.queue_bytes == 3000 or 0.49 * bdp <= lk.queue_bytes <= 4.01 * bdp
    assert 0.2 < sum(lk.loss == 0 for lk in rest) / len(rest) < 0.6  # 0.4 of them without loss, give or take
    assert [lk.index for lk in links] == list(range(40))


def test_every_hidden_link_is_a_link_the_lab_accepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for way in ("down", "up"):
        (tmp_path / f"cell.{way}").write_text("1\n2\n3\n")
    monkeypatch.setattr(config, "TRACES_DIR", tmp_path)
    trace, lossy = draw(12, 1, ["cell"])[0], next(lk for lk in draw(12, 1, ["cell"]) if lk.loss)
    t = parse_link(*trace.tables())
    assert t.downlink.trace_ms == [1, 2, 3] and t.rtt_s == pytest.approx(trace.rtt_s, abs=1e-6)
    link = parse_link(*lossy.tables())
    d = link.downlink
    assert d.rate_bps == pytest.approx(lossy.rate_bps, abs=100) and d.queue_bytes == lossy.queue_bytes
    assert d.loss.mean == pytest.approx(lossy.loss, rel=1e-3) and link.uplink.loss.mean == 0
    # the uplink at the downlink's rate (the user's upload measures it), lossless, the lab's default queue
    assert link.uplink.rate_bps == d.rate_bps and link.uplink.loss.mean == 0
    assert lossy.describe().startswith(f"{lossy.rate_bps / 1e6:.2f} Mbit/s (both ways), RTT")
    # a link of a folder drawn before the uplink was (no up_rate_bps): unlimited, and said as before
    old = HiddenLink(**{k: v for k, v in asdict(lossy).items() if k != "up_rate_bps"})
    assert parse_link(*old.tables()).uplink.rate_bps is None and "both ways" not in old.describe()


def _score(hidden_t: float | None, fitted_t: float | None, hidden_r: float = 0.05, fitted_r: float = 0.05) -> Score:
    return Score(link=HiddenLink(0, 0.05, 10e6, 60_000), hidden_tput_bps=hidden_t, hidden_rtt_s=hidden_r,
                 fitted_tput_bps=fitted_t, fitted_rtt_s=fitted_r)


def test_a_score_is_the_relative_error_and_a_failed_calibration_is_infinite() -> None:
    assert _score(10e6, 9e6).tput_error == pytest.approx(0.1) and _score(10e6, 11e6).tput_error == pytest.approx(0.1)
    assert _score(10e6, 10e6, 0.05, 0.06).rtt_error == pytest.approx(0.2)
    assert math.isinf(_score(10e6, None).tput_error) and math.isinf(_score(None, 9e6).tput_error)


def test_the_summary_applies_the_issues_bounds() -> None:
    good = [_score(10e6, 10e6 * (1 + e)) for e in (0.01, -0.02, 0.05, 0.08, -0.09, 0.2)]
    m = summarize(good)
    assert m.passed and m.tput_median == pytest.approx(0.065) and m.tput_worst == pytest.approx(0.2)
    worst = summarize([*good, _score(10e6, 13e6)])
    assert not worst.passed and worst.why == "worst throughput 30.0% > 25%"
    failed = summarize([*good, _score(10e6, None), _score(10e6, None), _score(10e6, None),
                        _score(10e6, None), _score(10e6, None), _score(10e6, None), _score(10e6, None)])
    assert not failed.passed and "throughput median inf% > 10%" in failed.why  # censored: never dropped
    rtt = summarize([_score(10e6, 10e6, 0.05, 0.06)] * 3)
    assert not rtt.passed and rtt.why == "p50 RTT median 20.0% > 10%"


def test_the_results_read_back_and_their_table_lists_every_link() -> None:
    scores = [_score(10e6, 9.5e6), Score(link=HiddenLink(1, 0.04, trace="ATT"), hidden_tput_bps=None,
                                         hidden_rtt_s=None, why="not calibrated: m: a failed iperf3 run")]
    doc = json.loads(json.dumps(hidden.to_doc(scores, {"seed": 1})))
    assert doc["seed"] == 1 and hidden.from_doc(doc) == scores
    md = hidden.markdown(scores, "reno")
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| link")]
    assert len(rows) == 2 and "10.00 Mbit/s, RTT 50.0 ms, queue 60000 B, loss 0.000%" in rows[0]
    assert "| 10.00 / 9.50 | 5.0% |" in rows[0]
    assert "trace ATT, RTT 40.0 ms | not calibrated: m: a failed iperf3 run | - / - | - |" in rows[1]
    assert "does not pass" in md.splitlines()[-1]


def test_the_hidden_lab_must_be_another_lab_and_up() -> None:
    own = config.INSTANCE.number
    with pytest.raises(UsageError, match="must be another lab than this one"):
        check_labs(own, own, {own})
    with pytest.raises(UsageError, match=f"invalid --hidden-lab {own + 1}: lab {own + 1} is not up"):
        check_labs(own, own + 1, {own})
    check_labs(own, own + 1, {own, own + 1})


def test_the_docs_render_a_committed_calibrate_json_with_every_link_and_what_is_not_done(tmp_path: Path) -> None:
    from lab.docgen import generated

    scores = [_score(10e6, 9.5e6), _score(10e6, 10.4e6)]
    doc = {**hidden.to_doc(scores, {"seed": 35, "links": 3, "budget": 30, "measured": ["cubic", "bbr"],
                                    "held_out": "reno", "labs": [1, 2]}), "not_done": [2]}
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "calibrate.json").write_text(json.dumps(doc))
    text = generated._fill_benchmarks("<!-- generated from cal/calibrate.json -->\nold\n<!-- end generated -->\n",
                                      tmp_path)
    assert text.startswith("<!-- generated from cal/calibrate.json -->\nSeed 35, 3 hidden links, budget 30 candidates "
                           "per search, measured senders cubic, bbr, held out reno; labs 1, 2.\n")
    rows = [ln for ln in text.splitlines() if ln.startswith("| 0 |")]
    assert len(rows) == 2 and "| 10.00 / 9.50 | 5.0% |" in rows[0] and "| 10.00 / 10.40 | 4.0% |" in rows[1]
    assert "throughput error median 4.5%, worst 5.0%" in text  # the median of 5 % and 4 %
    doc["git"] = {"commit": "0c606aa5" + "0" * 32, "dirty": False}
    assert hidden.markdown_doc(doc).startswith("Seed 35, 3 hidden links, budget 30 candidates per search, measured "
                                               "senders cubic, bbr, held out reno; labs 1, 2; commit 0c606aa.\n")
    assert "Not scored (not finished): links 2." in text and "old" not in text


def test_meta_records_the_commit_and_each_labs_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """meta.json names what the benchmark ran from: the commit (a dirty tree's diff beside it) and per lab up the
    image of its router, client and server (read from Docker: replaced here by a recorder); a resume adds its own."""
    import re

    from lab import instance
    from lab.bench import calibration
    from lab.run import environment

    asked: list[list[str]] = []

    def images(names: list[str]) -> dict[str, dict[str, str]]:
        asked.append(names)
        return {n: {"id": f"sha256:{len(n)}", "name": "quiclab-base"} for n in names}

    monkeypatch.setattr(environment, "container_images", images)
    own = config.INSTANCE.number
    other = own + 1
    out, _, meta, numbers = calibration.start(tmp_path / "b", None, 3, 35, 5, other, 2, {own, other})
    doc = json.loads((out / calibration.META).read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", doc["git"]["commit"]) and isinstance(doc["git"]["dirty"], bool)
    assert (out / "source.diff").is_file() == doc["git"]["dirty"]
    want = [instance.parse(str(k)).container(c) for k in (own, other) for c in ("router", "client", "server")]
    assert asked == [want] and sorted(doc["images"]) == sorted(want) and numbers == [own, other]
    assert meta["git"] == doc["git"] and "resumed" not in doc
    calibration.start(None, out, 3, 35, 5, other, 2, {own, other})
    again = json.loads((out / calibration.META).read_text())
    assert again["git"] == doc["git"] and len(again["resumed"]) == 1
    assert sorted(again["resumed"][0]["images"]) == sorted(want)


def test_the_fitted_column_says_when_the_rate_is_a_scaled_trace() -> None:
    from lab.calibrate.estimate import Estimate
    from lab.calibrate.fit import describe
    from lab.calibrate.search import Candidate

    c = Candidate(rate_bps=2.722e6, rtt_s=0.0534, queue_bytes=100891, loss=0.010896)
    constant = Estimate(base_rtt_s=0.05, rtt_s=0.0534, down_rate_bps=2.8e6)
    traced = constant.model_copy(update={"down_trace_ms": [10, 20, 30_000], "jitter_s": 0.002})
    assert describe(c, constant) == describe(c) == ("rate 2.722 Mbit/s, RTT 53.40 ms, queue 100891 B, "
                                                    "loss 1.0896%")
    assert describe(c, traced) == ("rate trace (30 s) scaled to mean 2.722 Mbit/s, RTT 53.40 ms, jitter 2.00 ms, "
                                   "queue 100891 B, loss 1.0896%")


def test_the_error_interval_comes_from_both_sides_runs_and_places_a_link_only_when_the_runs_do(
        tmp_path: Path) -> None:
    """fitted / hidden of the held-out sender's medians as an interval: each side's order-statistic interval of its
    median (at n = 5 the range, 93.75 %), the ratio's far ends, the level at least the product (87.9 %). Two lossy
    links of results/reference/calibrate-20261127-2: link 9's runs (hidden 3.8-8.83, fitted 3.41-11.13 Mbit/s) span
    the 25 % bound far on both sides; a constant link's runs within 5 % of each other place it within. A failed run
    at an end leaves the interval unknown (None), never a narrower one."""
    from lab.bench.calibration import FIT_DIR, HELD_EACH, held_runs
    from lab.bench.schedule import HIDDEN_DIR

    lossy = hidden.ratio_interval([3.8, 7.31, 8.14, 8.34, 8.83], [3.41, 7.06, 10.35, 11.06, 11.13])
    assert lossy is not None and lossy.lo == pytest.approx(3.41 / 8.83) and lossy.hi == pytest.approx(11.13 / 3.8)
    assert lossy.level == pytest.approx(0.9375 ** 2) and lossy.verdict() == "undetermined"
    steady = hidden.ratio_interval([2.4, 2.44, 2.45, 2.43, 2.46], [2.33, 2.34, 2.35, 2.36, 2.34])
    assert steady is not None and steady.verdict() == "within"
    far = hidden.ratio_interval([1.41, 1.52, 1.54, 1.56, 1.57], [2.93, 2.95, 2.95, 2.95, 2.97])
    assert far is not None and far.verdict() == "beyond"
    # 15 runs: the 4th to the 12th of each side (96.5 %), not the whole range
    many = hidden.ratio_interval([float(x) for x in range(1, 16)], [float(x) for x in range(1, 16)])
    assert many is not None and (many.lo, many.hi) == (4 / 12, 12 / 4) and many.level == pytest.approx(0.9648 ** 2,
                                                                                                       abs=1e-3)
    assert hidden.ratio_interval([None, 2.0, 2.1, 2.2, 2.3], [2.0] * 5) is None
    assert hidden.ratio_interval([2.0], [2.0]) is None
    # the runs are read from a benchmark folder's link-N/{hidden,fit}/held_out_runs.json; the table shows them
    for i, (h, f) in enumerate((([1.41, 1.52, 1.54, 1.56, 1.57], [2.93, 2.95, 2.95, 2.95, 2.97]),
                                ([2.4, 2.44, 2.45, 2.43, None], [2.33, 2.34, 2.35, 2.36, 2.34]))):
        for side, runs in ((HIDDEN_DIR, h), (FIT_DIR, f)):
            (tmp_path / f"link-{i}" / side).mkdir(parents=True)
            (tmp_path / f"link-{i}" / side / HELD_EACH).write_text(json.dumps(
                [None if r is None else {"throughput_bps": r * 1e6, "p50_rtt_s": 0.1} for r in runs]))
    runs = held_runs(tmp_path)
    assert runs[1][0][-1] is None and runs[0][1][0] == 2.93e6
    scores = [Score(link=HiddenLink(index=i, rtt_s=0.05, rate_bps=2e6, queue_bytes=9000), hidden_tput_bps=h * 1e6,
                    hidden_rtt_s=0.1, fitted_tput_bps=f * 1e6, fitted_rtt_s=0.1, fitted="x", candidates=3)
              for i, (h, f) in enumerate(((1.54, 2.95), (2.43, 2.34)))]
    text = hidden.markdown(scores, "reno", runs)
    assert "| 91.6% | +91.6% [+87%, +111%] |" in text.splitlines()[2]
    assert "| 3.7% | -3.7% [-] |" in text.splitlines()[3]  # the failed run is the hidden side's lowest: an end
    assert "within ±25% on 0 links, wholly beyond it on 1, and spans the bound on 0; 1 without one" in text
    assert "fitted / hidden - 1" not in hidden.markdown(scores, "reno")  # without runs: the table as before


def test_the_readme_sentence_is_the_committed_runs_summary():
    """README's line on the calibration benchmark (calibrate.json.sentence) says the folder's own medians, worst
    link, verdict and interval counts, as docs/benchmarks.md's table does."""
    from lab.bench.calibration import held_runs
    from lab.docgen import generated

    folder = config.ROOT / "results" / "reference" / "calibrate-20261127-3"
    doc = json.loads((folder / "calibrate.json").read_text())
    m = summarize(hidden.from_doc(doc))
    line = generated._benchmark("results/reference/calibrate-20261127-3/calibrate.json.sentence", config.ROOT)
    assert f"is {m.tput_median:.1%} from the hidden link's (median; worst {m.tput_worst:.1%})" in line
    assert ("passes the bounds" in line) == m.passed
    table = hidden.markdown_doc(doc, held_runs(folder))
    within = int(table.split("lies within ±25% on ")[1].split(" ")[0])
    assert f"places {within} links within ±25%" in line
    bad = dict(doc, scores=[dict(s, fitted_tput_bps=s["hidden_tput_bps"] * 1.4) for s in doc["scores"]])
    assert "does not pass (throughput median 40.0% > 10%" in hidden.sentence(bad, None, "x/")
