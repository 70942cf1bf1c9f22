"""The versus part of report.html's "why, per point" section (issue 25 item 4): each explained run's own split and
curve in its explain.json (lab/explain/timeline.py, from lab/explain/versus.py's functions), and the report's table
and plot of the median runs of the methods at a point (lab/report/why.py), on the committed captured sweep
(tests/data/explain/sweep: curl -> nginx h2 and h3, 60 kB, 10 Mbit/s, 40 ms RTT, 5 % loss; tshark's output
committed) and on the committed explained sweep results/reference/explain-nginx (its records with timelines, and
copies of them with the timeline taken out, as records made before timelines existed are).

The h2 - h3 numbers are the ones `quiclab explain --versus h2,h3` prints on the same captures
(tests/unit/test_explain_versus.py, docs/explain.md): -88.5 ms, of which handshake -41.0, loss recovery -6.5 and
rest -41.0.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lab.explain import folder as explain_folder
from lab.explain import timeline as tl
from lab.explain import versus as vs
from lab.explain.model import EXPLAIN_JSON, Explanation, Timeline
from lab.explain.rows import parse
from lab.report import report, why
from lab.report.report import load_sweep
from lab.results import store
from tests.explain_data import copied_sweep

SWEEP = Path(__file__).parents[1] / "data" / "explain" / "sweep"
REFERENCE = Path(__file__).parents[2] / "results" / "reference" / "explain-nginx"
RATE = 10e6


def rows(protocol: str):
    return parse((SWEEP / "evidence" / f"0_{protocol}_curl_nginx_0" / "client-side.tsv").read_text())


def total_s(protocol: str) -> float:
    records, _ = load_sweep(SWEEP)
    t = next(r.total_s for r in records if r.protocol == protocol)
    assert t is not None
    return t


def explain(folder: Path) -> None:
    assert explain_folder.after_sweep(folder, store.load_runs(folder), lambda pcap, keylog: pcap.with_suffix(".tsv")
                                      .read_text())


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copied_sweep(tmp_path, monkeypatch)


# --- the run's timeline -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("protocol", "handshake_ms"), [("h2", 87.791), ("h3", 46.827)])
def test_a_committed_runs_timeline_adds_up_to_its_total_as_versus_splits_it(protocol, handshake_ms):
    t = tl.timeline(rows(protocol), protocol, total_s(protocol), RATE)
    assert t is not None
    assert t.total_ms == pytest.approx(total_s(protocol) * 1000, abs=0.001)
    assert t.handshake_ms + t.loss_recovery_ms + t.rest_ms == pytest.approx(t.total_ms, abs=0.002)
    assert t.loss_recovery_ms == pytest.approx(t.stalled_ms + t.resent_ms, abs=0.002)
    assert t.handshake_ms == pytest.approx(handshake_ms, abs=0.001) and t.episodes == 1
    c, an = vs.components(protocol, "k", [total_s(protocol)], total_s(protocol),
                          vs.trace(rows(protocol), "quic" if protocol == "h3" else "tcp"), RATE)
    assert (t.handshake_ms, t.loss_recovery_ms, t.rest_ms) == (c.handshake_ms, c.loss_recovery_ms, c.rest_ms)
    assert len(t.t_ms) == len(t.in_order_bytes) == len(t.received_bytes) == t.curve_points == len(an.curve.t) <= 300
    assert t.in_order_bytes[-1] == an.curve.in_order[-1] and t.rate_bps == RATE


def test_a_downsampled_curve_keeps_its_ends_and_the_jump_of_the_hole_fill():
    tr = vs.trace(rows("h2"), "tcp")
    full = vs.analyse(tr.arrivals, RATE, tr.request_s or 0.0).curve
    t = tl.timeline(rows("h2"), "h2", total_s("h2"), RATE, limit=12)
    assert t is not None and len(t.t_ms) <= 12 and t.curve_points == len(full.t) == 47
    assert t.t_ms[0] == pytest.approx(full.t[0] * 1000, abs=0.001) and t.t_ms[-1] == pytest.approx(full.t[-1] * 1000)
    assert t.in_order_bytes[-1] == full.in_order[-1] == 62894 and t.received_bytes[-1] == full.received[-1]
    # the lost segment's repair (the last arrival, 263.965 ms) releases the bytes held above the hole: the flat
    # stretch before it (its first and last point) and the jump are kept, so the plot shows the same step
    (fill,) = [i for i in range(1, len(full.t)) if full.in_order[i] - full.in_order[i - 1] > full.received[i]
               - full.received[i - 1]]
    assert full.t[fill] == pytest.approx(0.263965, abs=1e-6)
    start = min(i for i in range(fill) if full.in_order[i] == full.in_order[fill - 1])
    points = set(zip(t.t_ms, t.in_order_bytes, strict=True))
    assert {(round(full.t[i] * 1000, 3), full.in_order[i]) for i in (start, fill - 1, fill)} <= points


def test_a_long_curve_is_cut_to_300_points_keeping_every_hole_fill():
    # 5000 packets of 1000 bytes, 1 ms apart; every 500th lost and re-sent 30 ms later
    lost = set(range(250, 5000, 500))
    arr = [vs.Arrival(i * 0.001, [(0, i * 1000, (i + 1) * 1000)], 1250) for i in range(5000) if i not in lost]
    arr += [vs.Arrival(i * 0.001 + 0.030, [(0, i * 1000, (i + 1) * 1000)], 1250) for i in lost]
    arr.sort(key=lambda a: a.t)
    curve = vs.analyse(arr, RATE).curve
    keep = tl.downsample(curve)
    assert len(keep) <= tl.MAX_POINTS and keep[0] == 0 and keep[-1] == len(curve.t) - 1
    fills = [i for i in range(1, len(curve.t)) if curve.in_order[i] - curve.in_order[i - 1] > 1000]
    assert len(fills) == len(lost) and all(i in keep and i - 1 in keep for i in fills)
    assert tl.downsample(curve, 10)[-1] == len(curve.t) - 1 and len(tl.downsample(curve, 10)) <= 10


def test_no_request_no_payload_or_no_total_gives_no_timeline():
    r = rows("h3")
    client = r[0].src
    assert tl.timeline(r, "h3", None, RATE) is None  # no transfer time: nothing to split
    assert tl.timeline([], "h3", 0.1, RATE) is None
    assert tl.timeline([x for x in r if x.src != client or x.time == r[0].time], "h3", 0.1, RATE) is None  # no request
    assert tl.timeline([x for x in r if x.src == client], "h3", 0.1, RATE) is None  # no server payload


def test_only_ok_bulk_runs_get_a_timeline():
    records, _ = load_sweep(SWEEP)
    h3 = next(r for r in records if r.protocol == "h3")
    assert tl.of_run(rows("h3"), h3) is not None
    assert tl.of_run(rows("h3"), replace(h3, workload="page:50x20kB")) is None
    assert tl.of_run(rows("h3"), replace(h3, status="timeout")) is None


# --- explain.json -------------------------------------------------------------------------------------------------

def test_an_explained_run_stores_its_timeline_and_the_record_round_trips(sweep):
    explain(sweep)
    path = sweep / "evidence" / "0_h3_curl_nginx_0" / EXPLAIN_JSON
    e = Explanation.model_validate_json(path.read_text())
    assert e.status == "explained" and e.timeline is not None
    assert e.timeline.total_ms == pytest.approx(175.806, abs=0.001)
    assert Explanation.model_validate_json(e.model_dump_json()) == e


def without_timelines(folder: Path) -> Path:
    """`folder`'s explain.json files as records made before timelines existed (no `timeline` key)."""
    import json

    for path in folder.glob(f"evidence/*/{EXPLAIN_JSON}"):
        doc = json.loads(path.read_text())
        doc.pop("timeline", None)
        path.write_text(json.dumps(doc, indent=2))
    return folder


def test_an_older_record_without_a_timeline_still_validates(tmp_path):
    folder = without_timelines(shutil.copytree(REFERENCE, tmp_path / "old"))
    path = folder / "evidence" / "0_h3_curl_nginx_0" / EXPLAIN_JSON
    assert '"timeline"' not in path.read_text()
    e = Explanation.model_validate_json(path.read_text())
    assert e.status == "explained" and e.timeline is None


def test_the_committed_worked_example_has_its_versus_part():
    records = store.load_runs(REFERENCE)
    assert len(why.comparisons(why.collect(REFERENCE, records))) == 1  # nginx vs nginx-sid at its one point
    html = why.section(REFERENCE, records)
    assert "<svg" in html and why.VERSUS_NOTE[:40] in html


# --- the report's versus part -------------------------------------------------------------------------------------

def test_two_explained_methods_at_a_point_get_the_split_table_and_the_curves(sweep):
    explain(sweep)
    whys = why.collect(sweep, store.load_runs(sweep))
    (v,) = why.comparisons(whys)
    assert (v.a.method, v.b.method) == ("HTTP/2 curl→nginx", "HTTP/3 curl→nginx")
    assert v.difference_ms == pytest.approx(175.806 - 264.302, abs=0.002)
    assert v.handshake_ms + v.loss_recovery_ms + v.rest_ms == pytest.approx(v.difference_ms, abs=1e-6)
    assert v.median_difference_ms == pytest.approx(v.difference_ms, abs=0.002)  # one run each: the same
    assert (v.handshake_ms, v.loss_recovery_ms, v.rest_ms) == pytest.approx((-40.964, -6.524, -41.008), abs=0.002)
    report.build(sweep)
    html = (sweep / "report.html").read_text()
    part = html[html.index("<h2>Why, per point</h2>"):html.index("<h2>Plots</h2>")]
    cells = re.findall(f"<tr><td>HTTP/3 curl→nginx {why.MINUS} HTTP/2 curl→nginx</td>(.*?)</tr>", part)
    assert len(cells) == 1
    median_diff, diff, hs, loss, rest = (float(c) for c in re.findall(r'<td class="num">([^<]+)</td>', cells[0]))
    assert (diff, hs, loss, rest) == (-88.5, -41.0, -6.5, -41.0) and median_diff == -88.5
    assert hs + loss + rest == pytest.approx(diff, abs=0.15)  # one-decimal rounding of each
    assert "add up to the difference of the two runs" in part and "median" in part
    assert part.count("<svg") == 1 and "</svg>" in part and "<?xml" not in part


def test_three_methods_are_each_compared_with_the_first():
    def w(method: str, total_ms: float, hs: float, loss: float) -> why.Why:
        t = Timeline(total_ms=total_ms, handshake_ms=hs, loss_recovery_ms=loss, rest_ms=total_ms - hs - loss,
                     stalled_ms=loss, resent_ms=0.0, episodes=1, resent_bytes=0, last_byte_ms=total_ms,
                     rate_bps=RATE, curve_points=2, t_ms=[hs, total_ms], in_order_bytes=[0, 1000],
                     received_bytes=[0, 1000])
        e = Explanation(run_key=f"0/{method}", protocol="h3", transport="quic", status="explained", timeline=t)
        return why.Why(0, "loss=5% $x$", method, f"0/{method}", "x", 3, e, total_ms / 1000)

    items = [w("<A>", 300.0, 80.0, 50.0), w("B", 200.0, 40.0, 30.0), w("C", 250.0, 40.0, 90.0)]
    pairs = why.comparisons(items)
    assert [(v.a.method, v.b.method) for v in pairs] == [("<A>", "B"), ("<A>", "C")]
    assert [v.difference_ms for v in pairs] == [-100.0, -50.0]
    assert all(v.handshake_ms + v.loss_recovery_ms + v.rest_ms == pytest.approx(v.difference_ms) for v in pairs)
    html = why.versus_part(items)  # a label with "<" is escaped, one with "$" does not start matplotlib's math
    assert "<A>" not in html and "&lt;A&gt;" in html and f"B {why.MINUS} &lt;A&gt;" in html and html.count("<svg") == 1
    assert why.versus_part(items[:1]) == ""


def test_older_records_without_a_timeline_render_the_section_without_the_versus_part(tmp_path):
    folder = without_timelines(shutil.copytree(REFERENCE, tmp_path / "explain-nginx"))
    records = store.load_runs(folder)
    whys = why.collect(folder, records)
    assert len({w.method for w in whys}) == 2 and why.comparisons(whys) == []
    html = why.section(folder, records)
    assert "<h2>Why, per point</h2>" in html and "<svg" not in html and why.VERSUS_NOTE[:40] not in html


def test_a_method_without_a_timeline_is_left_out_of_the_versus_part(sweep):
    explain(sweep)
    path = sweep / "evidence" / "0_h3_curl_nginx_0" / EXPLAIN_JSON
    e = Explanation.model_validate_json(path.read_text())
    path.write_text(e.model_copy(update={"timeline": None}).model_dump_json())
    html = why.section(sweep, store.load_runs(sweep))
    assert "HTTP/3 curl→nginx" in html and "<svg" not in html and f" {why.MINUS} " not in html
