"""The stack matrix's report (lab/report/matrix.py, lab/report/heatmap.py): its cells (median goodput, efficiency
with the interval of the median at its level, failed / unsupported / not run with their reasons, never blank), the
verdict per cell against the TCP baseline by compare's paired rule, the "needs a why" list and the table."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from lab.explain.model import EXPLAIN_JSON, Explanation, Reason
from lab.report import matrix
from lab.report.heatmap import FAILED_FILL, UNSUPPORTED_FILL, colour, heatmap_svg
from lab.results import store
from tests.unit.test_stats import SIZE, make_record

RATE = 10e6  # make_record's link rate
BASE_TIMES = [1.00, 1.01, 1.02, 1.03, 1.04]  # goodput 8.0 .. 7.69 Mbit/s: efficiency 0.80 .. 0.77


def scenario(link: str = "goodput", servers=("nginx", "ngtcp2"), clients=("curl", "gtlsclient"),
             pairs: tuple[str, ...] = ()) -> dict:
    return {"scenario": {"name": f"matrix-{link}", "matrix": link, "servers": list(servers),
                         "clients": list(clients), "protocols": ["h1", "h2", "h3"], "pairs": list(pairs),
                         "tcp_pairs": ["curl>nginx"]}}


def runs(protocol: str, client: str, server: str, times, **kw) -> list:
    return [make_record(protocol=protocol, client=client, server=server, repeat=i, total_s=t, x=0.0, **kw)
            for i, t in enumerate(times)]


def records(scale_ngtcp2: float = 1.0) -> list:
    """Baselines h1/h2 curl→nginx at BASE_TIMES; h3 curl→nginx as fast as h2; gtlsclient→nginx 25 % slower on every
    repeat (paired); curl→ngtcp2 failed every time; gtlsclient→ngtcp2 unsupported (reason kept)."""
    rs = runs("h1", "curl", "nginx", BASE_TIMES) + runs("h2", "curl", "nginx", BASE_TIMES)
    rs += runs("h3", "curl", "nginx", BASE_TIMES)
    rs += runs("h3", "gtlsclient", "nginx", [t * 1.25 for t in BASE_TIMES])
    rs += [make_record(protocol="h3", client="curl", server="ngtcp2", repeat=i, status="failed", x=0.0,
                       failure="QUIC handshake did not complete (curl exit 28)", timeout_s=60.0) for i in range(5)]
    rs += [make_record(protocol="h3", client="gtlsclient", server="ngtcp2", repeat=i, status="unsupported", x=0.0,
                       failure="gtlsclient and ngtcp2 cannot agree on an ALPN") for i in range(5)]
    return rs


def test_an_ok_cell_has_its_median_efficiency_and_interval_at_its_level():
    m = matrix.build(records(), scenario())
    c = m.cell("nginx", "curl")
    goodputs = sorted(SIZE * 8 / t for t in BASE_TIMES)
    assert c.status == "ok" and c.n == 5 and c.n_censored == 0
    assert c.goodput.value == pytest.approx(goodputs[2]) and c.goodput.bound == ""
    assert c.efficiency.value == pytest.approx(goodputs[2] / RATE)
    # n = 5: the order-statistic interval of the median is [x(1), x(5)], coverage 1 - 2/32 = 93.75 %
    assert c.ci.level == pytest.approx(0.9375)
    lo, hi = c.efficiency_ci
    assert (lo.value, hi.value) == pytest.approx((goodputs[0] / RATE, goodputs[-1] / RATE))
    assert matrix.eff_text(c) == "0.78 [0.77\u20130.80, 93.8 %]"


def test_failed_unsupported_and_unrun_cells_say_what_and_why():
    rs = [r for r in records() if not (r.client == "gtlsclient" and r.server == "nginx")]
    m = matrix.build(rs, scenario())
    failed, unsupported, unrun = m.cell("ngtcp2", "curl"), m.cell("ngtcp2", "gtlsclient"), m.cell("nginx",
                                                                                                   "gtlsclient")
    assert failed.status == "failed" and failed.n == 5 and failed.n_censored == 5
    assert failed.failure == "QUIC handshake did not complete (curl exit 28) (5 of 5 failed runs)"
    assert failed.goodput.bound == "<"  # censored at its own end: below size / timeout, not dropped
    # ... which the verdict uses, but the table shows no goodput figure for it (a bound is not a goodput)
    cols, rows = matrix.table(m)
    row = dict(zip(cols, next(r for r in rows if r[:2] == ["ngtcp2", "curl"]), strict=True))
    assert row["goodput Mbit/s median"] == matrix.FAILED_FIGURE and row["efficiency [CI]"] == "-"
    assert not any(v.startswith("<") for v in row.values())
    assert unsupported.status == "unsupported"
    assert unsupported.failure == "gtlsclient and ngtcp2 cannot agree on an ALPN"
    assert unsupported.verdict is None
    assert unrun.status == "not run" and "did not get to it" in unrun.failure
    svg = heatmap_svg(m)
    ET.fromstring(svg)  # well-formed
    assert "FAILED (5 of 5)" in svg and "QUIC handshake did not" in svg
    assert "UNSUPPORTED" in svg and "cannot agree on an ALPN" in svg and "NOT RUN" in svg
    assert f'fill="{FAILED_FILL}"' in svg and f'fill="{UNSUPPORTED_FILL}"' in svg


def test_a_partly_failed_cell_counts_its_failures_and_keeps_them_censored():
    rs = runs("h2", "curl", "nginx", BASE_TIMES) + runs("h3", "curl", "nginx", BASE_TIMES[:3])
    rs += [make_record(protocol="h3", client="curl", server="nginx", repeat=i, status="timeout", x=0.0,
                       failure="curl exit 28", timeout_s=60.0) for i in (3, 4)]
    c = matrix.build(rs, scenario(servers=("nginx",), clients=("curl",))).cell("nginx", "curl")
    assert c.status == "partly failed" and (c.n, c.n_censored) == (5, 2)
    assert c.goodput.value == pytest.approx(SIZE * 8 / BASE_TIMES[2])  # median: 3 exact, 2 below every one
    assert matrix.status_text(c) == "2 of 5 failed"


def test_the_verdict_per_cell_is_compares_paired_rule_against_the_tcp_baseline():
    m = matrix.build(records(), scenario())
    same, slower = m.cell("nginx", "curl"), m.cell("nginx", "gtlsclient")
    assert same.verdict.baseline == "HTTP/2 curl\u2192nginx" and same.verdict.design == "paired"
    assert same.verdict.verdict == "equivalent" and same.verdict.ratio.value == pytest.approx(1.0)
    assert slower.verdict.verdict == "slower" and slower.verdict.ratio.value == pytest.approx(0.8)
    assert slower.verdict.level == pytest.approx(0.9375)
    # a server without a TCP baseline of its own is judged against the first baseline (curl→nginx over HTTP/2)
    failed = m.cell("ngtcp2", "curl")
    assert failed.verdict.baseline == "HTTP/2 curl\u2192nginx" and failed.verdict.verdict == "slower"
    # unpaired when the partner runs are missing: the rule says so instead of pairing what is not paired
    lone = [r for r in records() if not (r.protocol == "h2" and r.repeat == 4)]
    v = matrix.build(lone, scenario()).cell("nginx", "gtlsclient").verdict
    assert v.design == "unpaired"


def test_needs_a_why_lists_failures_and_low_efficiency_on_the_goodput_link_only(tmp_path: Path):
    m = matrix.build(records(), scenario())
    listed = {c.method for c in m.needs_why()}
    # failed, and both nginx cells under 0.8 (0.78 and 0.63); the unsupported pair is a result, not a why
    assert listed == {"HTTP/3 curl\u2192ngtcp2", "HTTP/3 curl\u2192nginx", "HTTP/3 gtlsclient\u2192nginx"}
    sat = matrix.build(records(), scenario("satellite"))
    assert {c.method for c in sat.needs_why()} == {"HTTP/3 curl\u2192ngtcp2"}
    fast = [replace(r, total_s=r.total_s / 2, goodput_bps=r.goodput_bps * 2) if r.status == "ok" else r
            for r in records()]
    assert {c.method for c in matrix.build(fast, scenario()).needs_why()} == {"HTTP/3 curl\u2192ngtcp2"}
    lines = matrix.why_lines(m, "results/x")
    assert all(w.endswith("explain: `quiclab matrix --why results/x`") for w in lines)


def test_an_explained_run_puts_its_reason_beside_the_cell(tmp_path: Path):
    rs = records()
    failed = next(r for r in rs if r.client == "curl" and r.server == "ngtcp2")
    captured = replace(failed, evidence=f"evidence/{failed.run_key.replace('/', '_')}/client-side.pcap")
    rs = [captured if r.run_key == failed.run_key else r for r in rs]
    where = tmp_path / "evidence" / failed.run_key.replace("/", "_")
    where.mkdir(parents=True)
    (where / "client-side.pcap").write_bytes(b"")
    e = Explanation(run_key=failed.run_key, protocol="h3", transport="quic", status="explained",
                    reasons=[Reason(text="the server never answered the client's Initial")])
    (where / EXPLAIN_JSON).write_text(e.model_dump_json())
    m = matrix.build(rs, scenario(), tmp_path)
    c = m.cell("ngtcp2", "curl")
    assert c.why == "the server never answered the client's Initial" and c.why_run == failed.run_key
    line = next(w for w in matrix.why_lines(m, "results/x") if "curl\u2192ngtcp2" in w)
    assert "the server never answered" in line and f"quiclab explain results/x --run {failed.run_key}" in line
    assert "the server never answered" in matrix.markdown(m, "results/x")


def test_a_why_sweeps_explained_run_puts_its_reason_beside_the_cell(tmp_path: Path):
    """`quiclab matrix --why FOLDER` runs each such cell once, captured, in FOLDER/whys/<sweep>/: the newest why
    sweep's explanation of a run of the same pair and protocol stands beside the cell, with its explain command."""
    failed = next(r for r in records() if r.client == "curl" and r.server == "ngtcp2")
    for i, text in enumerate(["an older reason", "the server closed with H3_FRAME_UNEXPECTED"]):
        sub = tmp_path / matrix.WHYS_DIR / f"2026112{i}-matrix-goodput"
        sub.mkdir(parents=True)
        store.rewrite_runs(sub, [replace(failed, run_key="1/h3/curl/ngtcp2/1", repeat=1)])
        where = sub / "evidence" / "1_h3_curl_ngtcp2_1"
        where.mkdir(parents=True)
        e = Explanation(run_key="1/h3/curl/ngtcp2/1", protocol="h3", transport="quic", status="explained",
                        reasons=[Reason(text=text)])
        (where / EXPLAIN_JSON).write_text(e.model_dump_json())
    m = matrix.build(records(), scenario(), tmp_path)
    c = m.cell("ngtcp2", "curl")
    assert c.why == "the server closed with H3_FRAME_UNEXPECTED"
    assert c.why_run == "whys/20261121-matrix-goodput 1/h3/curl/ngtcp2/1"
    line = next(w for w in matrix.why_lines(m, "results/x") if "curl\u2192ngtcp2" in w)
    assert "quiclab explain results/x/whys/20261121-matrix-goodput --run 1/h3/curl/ngtcp2/1" in line
    assert m.cell("nginx", "curl").why == ""  # another pair's explanation is not this one's
    # a why run that transferred, of a cell whose runs failed, says so before its explanation
    sub = tmp_path / matrix.WHYS_DIR / "20261122-matrix-goodput"
    sub.mkdir(parents=True)
    store.rewrite_runs(sub, [replace(failed, run_key="1/h3/curl/ngtcp2/1", repeat=1, status="ok", failure="")])
    (sub / "evidence" / "1_h3_curl_ngtcp2_1").mkdir(parents=True)
    (sub / "evidence" / "1_h3_curl_ngtcp2_1" / EXPLAIN_JSON).write_text(e.model_dump_json())
    assert matrix.build(records(), scenario(), tmp_path).cell("ngtcp2", "curl").why == (
        "the why run transferred (the failure did not recur), so this is a run that worked: the server closed "
        "with H3_FRAME_UNEXPECTED")


def test_the_table_has_every_cell_and_baseline_and_cross_traffic_shares():
    m = matrix.build(records(), scenario())
    cols, rows = matrix.table(m)
    assert [(r[0], r[1], r[2][:6]) for r in rows] == [
        ("nginx", "curl", "HTTP/3"), ("nginx", "gtlsclient", "HTTP/3"), ("ngtcp2", "curl", "HTTP/3"),
        ("ngtcp2", "gtlsclient", "HTTP/3"), ("nginx", "curl", "HTTP/1"), ("nginx", "curl", "HTTP/2")]
    assert "share (measured)" not in cols
    by = {r[2]: dict(zip(cols, r, strict=True)) for r in rows}
    assert by["HTTP/3 gtlsclient\u2192nginx"]["verdict (cell/baseline goodput [CI], design)"].startswith(
        "slower (0.800x [")
    assert "cannot agree on an ALPN" in by["HTTP/3 gtlsclient\u2192ngtcp2"]["failure or why"]
    assert by["HTTP/2 curl\u2192nginx"]["vs TCP baseline"] == "baseline"
    doc = json.dumps({"flows": [{"name": "measured", "share": 0.6}, {"name": "tcp-cubic#1", "share": 0.4}]})
    cross = [replace(r, competing=doc) for r in records()]
    cols, rows = matrix.table(matrix.build(cross, scenario("crosstraffic")))
    row = dict(zip(cols, rows[0], strict=True))
    assert (row["share (measured)"], row["share (competing)"]) == ("60.0 %", "40.0 %")
    md = matrix.markdown(matrix.build(records(), scenario()), "results/x")
    assert md.count("\n| ") == 7  # header + 6 rows


def test_colour_runs_from_red_to_green():
    assert colour(0.0) != colour(0.5) != colour(1.0)
    red, green = colour(0.0), colour(1.0)
    assert int(red[1:3], 16) > int(red[3:5], 16) and int(green[3:5], 16) > int(green[1:3], 16)


def test_a_matrix_report_draws_the_heatmap_and_no_per_method_plots(tmp_path: Path):
    """~94 methods at one point: a marker per method (plots/goodput, plots/time) is unreadable, so a matrix folder's
    report draws its heatmap instead, and takes away those a report of an older version drew there."""
    from lab.report.report import build_report

    folder = tmp_path / "20261128-matrix-goodput"
    (folder / "plots").mkdir(parents=True)
    stale = folder / "plots" / "goodput.png"
    stale.write_bytes(b"drawn by an older report")
    store.rewrite_runs(folder, records())
    (folder / "manifest.json").write_text(json.dumps({**scenario(), "name": "matrix-goodput", "status": "complete"}))
    names = {p.relative_to(folder).as_posix() for p in build_report(folder)}
    assert names == {"summary.md", "plots/matrix.svg", "matrix.md", "report.html"}
    assert sorted(p.name for p in (folder / "plots").iterdir()) == ["matrix.svg"]
    html = (folder / "report.html").read_text()
    assert "Stack matrix (goodput link)" in html and "plot missing" not in html and "<h2>Plots</h2>" not in html


def test_the_scope_line_names_the_baselines_sender_congestion_control_as_read_back():
    """A TCP baseline's sender is the server's native TCP (a container takes the host's default: bbr on the lab's
    machine, cubic on many others): the verdicts against it depend on it, so the line says what the runs read back."""
    rs = [replace(r, cc_sender="bbr") if r.protocol in ("h1", "h2") else r for r in records()]
    line = matrix.scope_line(matrix.build(rs, scenario()))
    assert "2 TCP baselines (their sender's congestion control, read back in each run: bbr)" in line, line
    assert "read back in each run: -" in matrix.scope_line(matrix.build(records(), scenario()))
