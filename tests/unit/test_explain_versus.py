"""`quiclab explain --versus A,B --point P` (lab/explain/versus.py, lab/cli/explain_versus.py): synthetic arrivals
whose components are known, the committed h2 and h3 captures (tests/data/explain/sweep: curl -> nginx, 60 kB,
10 Mbit/s, 40 ms RTT, 5 % loss, one server data packet dropped in each) with values counted by hand from their
client-side tshark output, and the CLI: the table, --json, the curves' CSV, and bad values as one line, exit 2.

Hand counts (client-side.tsv, times from the client's first packet):
- h2: the request (HTTP/2 HEADERS) leaves at 87.791 ms; the segment at seq 57773 (1448 bytes) is lost; the hole
  opens when seq 59221 arrives (frame 76, 220.578 ms) and closes when 57773 arrives again (frame 82, 263.965 ms):
  43.387 ms, during which frames 78, 80, 82 arrive (1448 + 778 + 1448 payload + 3 x 52 header bytes = 3830 bytes:
  3.064 ms at 10 Mbit/s): stalled 40.323 ms; the re-sent segment's link time 1500 B = 1.2 ms.
- h3: the request leaves at 46.827 ms; stream 0 offset 48100 is lost; the hole opens with offset 49274 (frame 76,
  129.851 ms) and closes with offset 48100 (frame 92, 173.023 ms): 43.172 ms, during which 8 datagrams of UDP
  length 1208, one of 372 and the re-sent 1208 arrive (11444 wire bytes: 9.155 ms): stalled 34.017 ms; re-sent
  1228 B = 0.982 ms.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab.errors import UsageError
from lab.explain import tshark
from lab.explain import versus as vs
from lab.explain.rows import parse
from lab.report.report import load_sweep
from tests.explain_data import copied_sweep, run

SWEEP = Path(__file__).parents[1] / "data" / "explain" / "sweep"
RATE = 10e6


def rows(protocol: str):
    return parse((SWEEP / "evidence" / f"0_{protocol}_curl_nginx_0" / "client-side.tsv").read_text())


# --- synthetic arrivals -------------------------------------------------------------------------------------------

def steady(n: int, size: int = 1000, wire: int = 1250, gap: float = 0.001, lost: tuple[int, ...] = (),
           resend_at: float | None = None) -> list[vs.Arrival]:
    """n packets of `size` bytes, one every `gap` s (wire bytes 1250 = exactly `gap` at 10 Mbit/s); the packets
    in `lost` are missing and re-sent (in one go) at `resend_at`."""
    out = [vs.Arrival(i * gap, [(0, i * size, (i + 1) * size)], wire) for i in range(n) if i not in lost]
    if resend_at is not None:
        out += [vs.Arrival(resend_at, [(0, i * size, (i + 1) * size)], wire) for i in lost]
    return sorted(out, key=lambda a: a.t)


def test_a_loss_free_transfer_has_no_episode_and_no_loss_recovery():
    an = vs.analyse(steady(50), RATE)
    assert an.episodes == [] and an.resent_bytes == 0
    assert an.curve.in_order == an.curve.received == [1000 * (i + 1) for i in range(50)]


def test_a_hole_filled_late_costs_the_unused_link_time_and_the_resend():
    # packet 10 lost; 11..19 arrive at 11..19 ms (the link busy), then nothing until the resend at 60 ms
    an = vs.analyse(steady(20, lost=(10,), resend_at=0.060), RATE)
    (e,) = an.episodes
    assert e.start == pytest.approx(0.011) and e.end == pytest.approx(0.060)
    assert e.link_s == pytest.approx(9 * 0.001)  # 12..19 (8 packets) and the resend: 9 x 1 ms
    assert e.stalled_s == pytest.approx(0.049 - 0.009)
    assert an.resent_bytes == 1250
    assert an.curve.in_order[-2] == 10 * 1000 and an.curve.in_order[-1] == 20 * 1000  # flat, then the jump
    assert an.curve.received[-2] == 19 * 1000


def test_a_hole_while_the_link_stays_busy_costs_nothing_but_the_resend():
    # the resend arrives in the middle of the stream: the link never idles
    arr = steady(40, lost=(10,))
    arr.append(vs.Arrival(0.0205, [(0, 10_000, 11_000)], 1250))
    arr.sort(key=lambda a: a.t)
    an = vs.analyse(arr, RATE)
    (e,) = an.episodes
    assert e.stalled_s == pytest.approx(0.0, abs=1e-9)  # 9.5 ms open, 10 packets' link time: floored at 0
    c, _ = vs.components("x", "k", [0.1], 0.1, vs.Trace(0.02, arr), RATE)
    assert c.loss_recovery_ms == pytest.approx(1.0)  # the resend's link time only
    assert c.handshake_ms + c.loss_recovery_ms + c.rest_ms == pytest.approx(c.total_ms)


def test_what_comes_before_the_request_is_the_handshakes_not_loss_recovery():
    arr = steady(20, lost=(10,), resend_at=0.060)
    assert vs.analyse(arr, RATE, after=0.061).episodes == []  # all before the request
    assert vs.analyse(arr, RATE, after=0.061).resent_bytes == 0
    (e,) = vs.analyse(arr, RATE, after=0.030).episodes  # open at the request: counted from it
    assert e.start == pytest.approx(0.030) and e.link_s == pytest.approx(0.001)  # the resend only
    assert e.stalled_s == pytest.approx(0.029)


def test_a_hole_never_filled_runs_to_the_end_of_the_capture():
    an = vs.analyse(steady(20, lost=(10,)), RATE)
    (e,) = an.episodes
    assert e.start == pytest.approx(0.011) and e.end == pytest.approx(0.019)


def test_without_a_rate_the_episodes_count_whole_and_a_note_says_so():
    arr = steady(20, lost=(10,), resend_at=0.060)
    a, _ = vs.components("a", "ka", [0.2], 0.2, vs.Trace(0.005, arr), None)
    assert a.stalled_ms == pytest.approx(49.0) and a.resent_ms == 0.0
    v = vs.versus("p", a, a, None)
    assert any("no configured rate" in n for n in v.notes)


def test_the_difference_rows_add_up_to_the_difference_by_construction():
    a, _ = vs.components("h2", "ka", [0.30, 0.25, 0.40], 0.30, vs.Trace(0.005, steady(20, lost=(10,),
                                                                                      resend_at=0.060)), RATE)
    b, _ = vs.components("h3", "kb", [0.20], 0.20, vs.Trace(0.004, steady(20)), RATE)
    v = vs.versus("loss=3%", a, b, RATE)
    assert v.difference_ms == pytest.approx(-100.0) and v.median_difference_ms == pytest.approx(-100.0)
    assert v.handshake_ms == pytest.approx(-1.0) and v.loss_recovery_ms == pytest.approx(-41.0)
    assert v.handshake_ms + v.loss_recovery_ms + v.rest_ms == pytest.approx(v.difference_ms, abs=1e-6)
    assert v.notes == []


def test_the_median_run_is_the_middle_one_or_the_lower_middle_one():
    assert vs.median_index([3.0, 1.0, 2.0]) == 2
    assert vs.median_index([4.0, 1.0, 3.0, 2.0]) == 3  # 2.0: the lower of 2.0 and 3.0
    a, _ = vs.components("a", "k", [1.0, 2.0], 1.0, vs.Trace(0.0, []), RATE)
    assert a.median_ms == 1500.0 and a.total_ms == 1000.0
    assert any("even number of runs" in n for n in vs.versus("p", a, a, RATE).notes)


@pytest.mark.parametrize(("text", "parsed"), [("h2", ("h2", None, None)), ("h3:curl>nginx", ("h3", "curl", "nginx")),
                                              (" h1 ", ("h1", None, None))])
def test_methods_parse(text, parsed):
    assert vs.parse_method(text) == parsed


@pytest.mark.parametrize("text", ["h4", "h2:curl", "h2:>nginx", "", "quic"])
def test_bad_methods_do_not_parse(text):
    with pytest.raises(ValueError):
        vs.parse_method(text)


# --- the committed captures ---------------------------------------------------------------------------------------

def test_the_committed_h2_run_decomposes_as_counted_by_hand():
    tr = vs.trace(rows("h2"), "tcp")
    assert tr.request_s == pytest.approx(0.087791, abs=1e-6)
    c, an = vs.components("h2", "0/h2/curl/nginx/0", [0.264302], 0.264302, tr, RATE)
    (e,) = an.episodes
    assert e.start == pytest.approx(0.220578, abs=1e-6) and e.end == pytest.approx(0.263965, abs=1e-6)
    assert e.link_s == pytest.approx(0.003064)
    assert c.stalled_ms == pytest.approx(40.323, abs=0.002) and c.resent_ms == pytest.approx(1.2)
    assert c.handshake_ms + c.loss_recovery_ms + c.rest_ms == pytest.approx(264.302, abs=0.002)
    assert an.curve.in_order[-1] == an.curve.received[-1] == 62894  # TLS records of the whole connection
    assert c.last_byte_ms == pytest.approx(263.965, abs=0.001)


def test_the_committed_h3_run_decomposes_as_counted_by_hand():
    tr = vs.trace(rows("h3"), "quic")
    assert tr.request_s == pytest.approx(0.046827, abs=1e-6)
    c, an = vs.components("h3", "0/h3/curl/nginx/0", [0.175806], 0.175806, tr, RATE)
    (e,) = an.episodes
    assert e.start == pytest.approx(0.129851, abs=1e-6) and e.end == pytest.approx(0.173023, abs=1e-6)
    assert e.link_s == pytest.approx(11444 * 8 / RATE)
    assert c.stalled_ms == pytest.approx(34.017, abs=0.002) and c.resent_bytes == 1228
    assert c.handshake_ms + c.loss_recovery_ms + c.rest_ms == pytest.approx(175.806, abs=0.002)


def test_selecting_methods_at_a_point_names_what_is_allowed():
    records, _ = load_sweep(SWEEP)
    point, (na, ra), (nb, rb) = vs.select(records, "h2,h3", "base", lambda r: True)
    assert point == "base" and (na, nb) == ("h2", "h3") and len(ra) == len(rb) == 1
    h2 = next(r for r in records if r.protocol == "h2")
    other = replace(h2, client="ngtcp2", run_key="0/h2/ngtcp2/nginx/0")
    two = [*records, other]
    with pytest.raises(UsageError, match=r"invalid --versus method 'h2': at base the methods are h3, "
                                         r"h2:curl>nginx, h2:ngtcp2>nginx, h3:curl>nginx"):
        vs.select(two, "h2,h3", "base", lambda r: True)
    _, (na, ra), _ = vs.select(two, "h2:ngtcp2>nginx,h3", None, lambda r: True)
    assert [r.run_key for r in ra] == ["0/h2/ngtcp2/nginx/0"]
    with pytest.raises(UsageError, match="has captures"):
        vs.select(records, "h2,h3", "base", lambda r: r.protocol == "h3")
    page = [replace(r, workload="page:50x20kB") if r.protocol == "h3" else r for r in records]
    with pytest.raises(UsageError, match=r"'h3': its runs at base have workload 'page:50x20kB'; --versus "
                                         r"explains bulk transfers"):
        vs.select(page, "h2,h3", "base", lambda r: True)


# --- the CLI ------------------------------------------------------------------------------------------------------

@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tshark, "fields", lambda pcap, keylog: pcap.with_suffix(".tsv").read_text())
    return copied_sweep(tmp_path, monkeypatch)


def test_versus_prints_components_that_add_up_and_writes_the_curves(sweep, capsys):
    assert run([str(sweep), "--versus", "h2,h3", "--point", "base"]) == 0
    out = capsys.readouterr().out
    assert "0/h2/curl/nginx/0" in out and "0/h3/curl/nginx/0" in out
    assert "-88.5" in out and "-41.0" in out and "-6.5" in out  # total; handshake and rest; loss recovery
    path = sweep / "explain" / "versus-h2-h3-base.csv"
    with path.open() as f:
        got = list(csv.DictReader(f))
    assert {r["method"] for r in got} == {"h2", "h3"} and list(got[0]) == vs.CSV_HEADER
    assert (sweep / "explain" / "versus-h2-h3-base.svg").is_file()


def test_versus_json_adds_up_to_the_median_difference(sweep, capsys):
    assert run([str(sweep), "--versus", "h2,h3", "--point", "base", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["a"]["run_key"] == "0/h2/curl/nginx/0" and v["b"]["method"] == "h3"
    parts = v["handshake_ms"] + v["loss_recovery_ms"] + v["rest_ms"]
    assert parts == pytest.approx(v["median_difference_ms"], rel=0.05)
    assert v["median_difference_ms"] == pytest.approx(175.806 - 264.302, abs=0.002)
    for side in ("a", "b"):
        s = v[side]
        assert s["handshake_ms"] + s["loss_recovery_ms"] + s["rest_ms"] == pytest.approx(s["total_ms"], abs=0.002)


@pytest.mark.parametrize(("args", "needle"), [
    (["--versus", "h2,h3", "--point", "loss=3%"], "invalid --point 'loss=3%': the points of this sweep are base"),
    (["--versus", "h2,h9", "--point", "base"], "invalid --versus method 'h9': at base the methods are h2, h3"),
    (["--versus", "h2", "--point", "base"], "invalid --versus 'h2': two different methods A,B"),
    (["--versus", "h2,h3", "--run", "0/h2/curl/nginx/0"], "--run and --versus do not go together"),
    (["--point", "base"], "--point goes with --versus"),
    (["--versus", "h2,h3", "--qlog", "{tmp}/q"], "--qlog and --versus do not go together"),
])
def test_bad_versus_values_are_one_line_and_exit_2(sweep, tmp_path, capsys, args, needle):
    code = run([str(sweep), *(a.format(tmp=tmp_path) for a in args)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_an_undecryptable_run_is_not_explainable_with_why(sweep, capsys):
    (sweep / "evidence" / "0_h3_curl_nginx_0" / "keys.log").write_text("")
    assert run([str(sweep), "--versus", "h2,h3"]) == 1
    err = capsys.readouterr().err
    assert "0/h3/curl/nginx/0 is not explainable: no TLS key log" in err and "Traceback" not in err


def test_a_stream_counts_bytes_once_and_delivers_in_order_like_a_byte_set():
    # against the obvious model (a set of received offsets), over random arrivals with overlaps, repeats and holes
    import itertools
    import random

    from lab.explain.versus import _Stream

    rng = random.Random(7)
    for _ in range(300):
        stream, seen, highest = _Stream(), set(), 0
        for _ in range(rng.randint(1, 40)):
            a = rng.randrange(0, 200)
            b = a + rng.randint(1, 30)
            assert stream.add(a, b) == (a < highest)
            highest = max(highest, b)
            seen |= set(range(a, b))
            contig = 0
            while contig in seen:
                contig += 1
            assert (stream.got, stream.contig) == (len(seen), contig)
            assert stream.hole == any(x > contig for x in seen)
            assert all(p[1] < q[0] for p, q in itertools.pairwise(stream.pending))  # disjoint, not touching


def test_a_long_open_hole_costs_little_per_packet():
    # 200 000 arrivals behind one hole (a 10 MB transfer whose first loss is repaired last): merged, not a list
    # of 200 000 intervals walked per packet
    from lab.explain.versus import _Stream

    stream = _Stream()
    stream.add(0, 1000)
    for k in range(2, 200_002):
        stream.add(k * 1000, (k + 1) * 1000)
    assert stream.pending == [(2000, 200_002_000)] and stream.contig == 1000
    stream.add(1000, 2000)
    assert stream.contig == 200_002_000 and not stream.hole and stream.got == 200_002_000
