"""`quiclab calibrate --search` without the lab (the lab run itself: docs/calibrate.md, tests/lab): the measured
senders and their real figures from the user's iperf3 files, one rule for the user's and the lab's iperf3 JSON, the
start and the candidate's link (the scenario file's own), fit.json and the error table, the commands the lab runs,
and the lab measure's bookkeeping (a sender that cannot measure censors its candidate)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lab import config
from lab.calibrate import fit as fits
from lab.calibrate.estimate import Estimate, estimate
from lab.calibrate.probe import probe
from lab.calibrate.search import Candidate, Observed, search
from lab.calibrate.senders import Sender, measured_senders, observed
from lab.calibrate.tools import iperf3_flow
from lab.errors import EnvironmentProblem, UsageError
from lab.link.spec import parse_link
from lab.run import calibration
from tests.calibrate_inputs import iperf3_failed, iperf3_json, ping_text

RATES = [2.0, 6.0, 9.0, 9.5, 9.0, 9.4, 9.6, 9.2, 9.5, 9.3]  # Mbit/s per second: start-up, then ~9.4


def _folder(tmp_path: Path, **files: str) -> list[Path]:
    out = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        out.append(tmp_path / name)
    return out


def test_two_downloads_of_different_congestion_controls_are_the_senders(tmp_path: Path) -> None:
    paths = _folder(tmp_path, **{
        "cubic.json": iperf3_json("cubic", RATES, rtts_ms=[20, 40, 60, 62, 64, 66, 60, 58, 62, 64], reverse=True),
        "bbr.json": iperf3_json("bbr", RATES[:8], rtts_ms=[20, 25, 24, 26, 25, 25, 24, 26], reverse=True),
        "upload.json": iperf3_json("reno", RATES, rtts_ms=[30] * 10),  # an upload: not a downlink sender
        "ping.txt": ping_text([20.0] * 20)})
    senders, real = measured_senders(probe(paths), "m")
    assert senders == {"bbr": Sender("bbr", "down", 8), "cubic": Sender("cubic", "down", 10)}
    # after the start-up (2 s): the rate delivered (the intervals' mean) and the median RTT of what follows
    assert (real["cubic"].throughput_bps, real["cubic"].p50_rtt_s) == (pytest.approx(9.3125e6), pytest.approx(0.062))
    assert real["bbr"].throughput_bps == pytest.approx(55.7e6 / 6) and real["bbr"].p50_rtt_s == pytest.approx(0.025)


def test_repeated_runs_of_one_sender_are_pooled(tmp_path: Path) -> None:
    """Three cubic runs over one path are one sender: the mean of their throughputs, the median of all their RTT
    samples, their retransmissions and segments after start-up summed; the lab runs it once, as long as the longest.
    The loss bounds count them as one download too (a tighter bound than any of them alone)."""
    from lab.calibrate.estimate import loss_bounds, poisson_upper

    retx = [[0, 0, 0, 1, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]]
    files = {f"cubic-{k}.json": iperf3_json("cubic", [r * (1 + k / 10) for r in RATES], rtts_ms=[60 + 10 * k] * 10,
                                             retransmits=retx[k], reverse=True) for k in range(3)}
    paths = _folder(tmp_path, **files, **{"bbr.json": iperf3_json("bbr", RATES[:8], rtts_ms=[25] * 8,
                                                                   retransmits=[0] * 8, reverse=True)})
    m = probe(paths)
    senders, real = measured_senders(m, "m")
    assert senders == {"bbr": Sender("bbr", "down", 8), "cubic": Sender("cubic", "down", 10)}
    alone = [observed(f) for f in m.flows if f.cc == "cubic"]
    assert all(o is not None for o in alone)
    assert real["cubic"].throughput_bps == pytest.approx(sum(o.throughput_bps for o in alone if o) / 3)
    assert real["cubic"].p50_rtt_s == pytest.approx(0.070)  # the middle run's: the median of all 3 x 8 samples
    assert real["cubic"].retransmits == 5  # after start-up (from 2 s): 2 + 0 + 3
    assert real["cubic"].segments == pytest.approx(sum(o.segments or 0 for o in alone if o), abs=0.2)
    point, upper = loss_bounds([f for f in m.flows if f.cc == "cubic"]) or (0.0, 0.0)
    segments = real["cubic"].segments or 1
    assert point == pytest.approx(5 / segments, rel=1e-4)
    assert upper == pytest.approx(poisson_upper(5, 0.05) / segments, rel=1e-4)


def test_a_clients_download_with_the_servers_output_in_it_is_a_sender(tmp_path: Path) -> None:
    """`iperf3 -c SERVER -R -C cc --json --get-server-output` on the user's side: the sender's RTT comes along."""
    def client_file(cc: str, rtts: list[float]) -> str:
        doc = json.loads(iperf3_json(cc, RATES, reverse=True))  # the receiving side: no RTT
        doc["server_output_json"] = json.loads(iperf3_json(cc, RATES, rtts_ms=rtts, retransmits=[0] * 9 + [2],
                                                           reverse=True))
        return json.dumps(doc)

    paths = _folder(tmp_path, **{"cubic.json": client_file("cubic", [60.0] * 10),
                                 "bbr.json": client_file("bbr", [25.0] * 10)})
    m = probe(paths)
    assert [(f.cc, f.direction, f.retransmits) for f in m.flows] == [("cubic", "down", 2), ("bbr", "down", 2)]
    senders, real = measured_senders(m, "m")
    assert set(senders) == {"bbr", "cubic"} and real["cubic"].p50_rtt_s == pytest.approx(0.060)


def test_fewer_than_two_senders_is_a_usage_error_naming_what_is_needed(tmp_path: Path) -> None:
    paths = _folder(tmp_path, **{"cubic.json": iperf3_json("cubic", RATES, rtts_ms=[30] * 10, reverse=True),
                                 "client.json": iperf3_json("bbr", RATES, reverse=True)})  # no RTT: the client file
    with pytest.raises(UsageError) as e:
        measured_senders(probe(paths), "m")
    text = str(e.value)
    assert text.startswith("m: the lab search needs 2 or more measured senders") and "only cubic" in text


def test_the_lab_reads_its_iperf3_run_by_the_users_rule() -> None:
    s = Sender("cubic", "down", 10)
    got = calibration.sender_json(iperf3_json("cubic", RATES, rtts_ms=[20, 40, 60, 62, 64, 66, 60, 58, 62, 64]), s)
    assert got is not None and (got.throughput_bps, got.p50_rtt_s) == (pytest.approx(9.3125e6), pytest.approx(0.062))
    assert calibration.sender_json(iperf3_failed(), s) is None
    assert calibration.sender_json(iperf3_json("cubic", RATES), s) is None  # no RTT samples: not measured
    with pytest.raises(EnvironmentProblem, match="asked for cubic but its sender used reno"):
        calibration.sender_json(iperf3_json("reno", RATES, rtts_ms=[30] * 10), s)


def test_the_lab_downloads_as_the_user_did_from_a_one_off_server() -> None:
    assert calibration.download_argv(Sender("bbr", "down", 12), calibration.PORT) == [
        "iperf3", "-c", config.SERVER_IP, "-p", "5399", "-R", "-C", "bbr", "-t", "12", "-l", "16K", "--json",
        "--get-server-output", "--connect-timeout", "3000"]
    # an upload (the benchmark's user measures the uplink too): the client sends, with its congestion control
    assert calibration.download_argv(Sender("cubic", "up", 10))[3:8] == ["-p", "5399", "-C", "cubic", "-t"]
    # the server with --json: --get-server-output hands the client the server's output in the server's format
    assert calibration.receiver_argv() == ["iperf3", "-s", "-1", "--json", "-p", "5399"]
    assert calibration.named("qlc-x-srv", ["iperf3", "-s"])[-3:] == ["qlc-x-srv", "iperf3", "-s"]


# iperf3 3.18's documents as `iperf3 -c SERVER -p 5399 -R -C bbr -t 10 --json --get-server-output` prints them
# (tests/data/iperf3/README.md): against `iperf3 -s -1 --json` the server's whole JSON is `server_output_json`;
# against a server without --json its human-readable lines are `server_output_text` (Retr and Cwnd, no RTT).
IPERF3 = Path(__file__).parent.parent / "data" / "iperf3"
WITH_JSON = (IPERF3 / "client-R-bbr-server-json.json").read_text()
WITH_TEXT = (IPERF3 / "client-R-bbr-server-text.json").read_text()


def test_the_client_file_of_a_json_server_carries_the_senders_rtt_and_retransmits() -> None:
    flow = iperf3_flow(json.loads(WITH_JSON), "bbr.json")
    assert (flow.cc, flow.direction, flow.retransmits) == ("bbr", "down", 3)
    assert len(flow.rtt) == 10 and flow.rtt[0][1] == pytest.approx(0.02148)  # the server's intervals, rtt in us
    got = calibration.sender_json(WITH_JSON, Sender("bbr", "down", 10))
    assert got is not None
    # after the start-up (2 s): the median of the last 8 intervals' RTT and rate
    assert got.p50_rtt_s == pytest.approx((26937 + 27016) / 2e6)
    assert got.throughput_bps == pytest.approx(9.39e6, rel=0.005)


def test_a_text_server_output_has_no_rtt_and_in_the_lab_that_is_the_labs_failure(tmp_path: Path) -> None:
    doc = json.loads(WITH_TEXT)
    assert "server_output_json" not in doc and "Retr  Cwnd" in doc["server_output_text"]
    flow = iperf3_flow(doc, "bbr.json")
    assert flow.rtt == [] and flow.rate and observed(flow) is None  # rates only: not a sender
    with pytest.raises(EnvironmentProblem, match="without --json"):
        calibration.sender_json(WITH_TEXT, Sender("bbr", "down", 10))
    # the user's two such files: the search says what is missing (a server started with --json)
    cubic = json.loads(WITH_TEXT)
    cubic["end"]["sender_tcp_congestion"] = "cubic"
    paths = _folder(tmp_path, **{"bbr.json": WITH_TEXT, "cubic.json": json.dumps(cubic)})
    with pytest.raises(UsageError, match="against a server started with --json") as e:
        measured_senders(probe(paths), "m")
    assert str(e.value).endswith("this folder has none")


def test_a_users_download_is_from_a_one_off_json_server_on_the_port_it_fetches_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's hidden side records the user's files as a user with a --json server would (the server
    container's own iperf3 on 5201 runs without --json: its files would carry no RTT)."""
    started: list[list[str]] = []
    ran: list[list[str]] = []
    monkeypatch.setattr(calibration.docker, "exec_detached", lambda _c, argv: started.append(list(argv)))
    monkeypatch.setattr(calibration, "_wait_listening", lambda _c: None)

    def exec_in(_container: str, argv: list[str], timeout_s: float = 0) -> str:
        ran.append(argv)
        return WITH_JSON if "iperf3" in argv else ""

    monkeypatch.setattr(calibration.docker, "exec_in", exec_in)
    assert calibration.user_download(Sender("bbr", "down", 10)) == WITH_JSON
    server, client = started[0], ran[0]
    assert server[server.index("iperf3"):] == ["iperf3", "-s", "-1", "--json", "-p", "5399"]
    assert client[client.index("-p") + 1] == "5399" and "--get-server-output" in client
    assert [a for a in ran if a[0] == "pkill"]  # the one-off server and the client stopped by their tag


def test_a_trace_restarts_between_the_one_off_server_and_the_download(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's hidden side gives a recorded trace again right before each sender's download (after the
    server is up), so every sender meets the same stretch of the recording: the hook runs after the server starts
    and before the client's iperf3."""
    order: list[str] = []
    monkeypatch.setattr(calibration.docker, "exec_detached", lambda _c, argv: order.append("server"))
    monkeypatch.setattr(calibration, "_wait_listening", lambda _c: order.append("listening"))

    def exec_in(_container: str, argv: list[str], timeout_s: float = 0) -> str:
        order.append("client" if "iperf3" in argv else argv[0])
        return WITH_JSON if "iperf3" in argv else ""

    monkeypatch.setattr(calibration.docker, "exec_in", exec_in)
    calibration.user_download(Sender("bbr", "down", 10), lambda: order.append("restart"))
    assert order[:4] == ["server", "listening", "restart", "client"]
    order.clear()
    assert calibration.run_sender(Sender("bbr", "down", 10), lambda: order.append("restart")) is not None
    assert order[:4] == ["server", "listening", "restart", "client"]


def _estimate(**kw: object) -> Estimate:
    base = dict(base_rtt_s=0.02, rtt_s=0.024, jitter_s=0.002, down_rate_bps=10e6, up_rate_bps=2e6)
    return Estimate(**(base | kw))  # type: ignore[arg-type]


def test_the_search_starts_at_the_estimates_and_puts_the_scenario_files_link_in_force() -> None:
    e = _estimate(down_queue_bytes=40_000, down_loss=0.001)
    start = fits.start(e, "m")
    assert start == Candidate(rate_bps=10e6, rtt_s=0.024, queue_bytes=40_000, loss=0.001, trace=False)
    default = fits.start(_estimate(), "m")
    assert default.queue_bytes == 64 * 1024 and default.loss == 0.0  # the lab's default: one BDP, at least 64 KiB
    link = parse_link(*fits.candidate_tables(e, Candidate(rate_bps=8e6, rtt_s=0.05, queue_bytes=30_000, loss=0.002)))
    d, u = link.downlink, link.uplink
    assert (d.rate_bps, d.queue_bytes, d.loss.mean, d.jitter_s) == (8_000_000, 30_000, pytest.approx(0.002), 0.002)
    assert link.rtt_s == pytest.approx(0.05)
    assert (u.rate_bps, u.queue_bytes, u.loss.mean) == (2_000_000, None, 0.0)  # loss and queue on the downlink only
    with pytest.raises(UsageError, match=r"^m: "):
        fits.start(_estimate(down_rate_bps=None), "m")


def test_a_rate_trace_is_searched_as_a_scale_of_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A downlink that varies (estimated as a trace): the candidate's rate is the trace's mean, the lab gets the
    trace scaled to it (same pattern and period), and every sender meets it from its beginning."""
    from lab.calibrate.trace import from_rates

    pattern = from_rates([(0, 1, 12e6), (1, 2, 3e6), (2, 3, 12e6), (3, 4, 0.0), (4, 5, 6e6)])
    mean = len(pattern) * 12000 / 5.0
    e = _estimate(down_trace_ms=pattern, down_rate_bps=mean)
    start = fits.start(e, "m")
    assert start.rate_bps == mean
    with pytest.raises(ValueError, match="folder"):
        fits.candidate_tables(e, start)
    link = parse_link(*fits.candidate_tables(e, Candidate(mean / 2, 0.05, 30_000), tmp_path))
    half = link.downlink.trace_ms
    assert half is not None and half[-1] == pattern[-1]  # the period
    assert len(half) == pytest.approx(len(pattern) / 2, abs=2)
    per_s = [sum(1 for t in half if k * 1000 < t <= (k + 1) * 1000) for k in range(5)]
    assert per_s[3] == 0 and per_s[0] == pytest.approx(500, abs=2) and per_s[1] == pytest.approx(125, abs=2)
    assert list(tmp_path.glob("candidate-*.down.trace"))
    applied: list[object] = []
    hooks: list[object] = []
    monkeypatch.setattr(calibration.shaper, "apply", lambda lk, _b: applied.append(lk))

    def run_sender(s: Sender, at_start: object = None) -> Observed | None:
        hooks.append(at_start)
        return Observed(1e6, 0.05)

    monkeypatch.setattr(calibration, "run_sender", run_sender)
    m = calibration.LabMeasure({"bbr": Sender("bbr", "down", 5), "cubic": Sender("cubic", "down", 5)},
                               lambda c: fits.candidate_tables(e, c, tmp_path))
    m([Candidate(mean, 0.05, 30_000)])
    assert len(hooks) == 2 and all(callable(h) for h in hooks)
    for h in hooks:
        h()  # type: ignore[operator]
    assert len(applied) == 3 and applied[1] == applied[0]  # given once, then again before each sender
    plain = calibration.LabMeasure({"bbr": Sender("bbr", "down", 5)}, lambda c: fits.candidate_tables(_estimate(), c))
    hooks.clear()
    plain([Candidate(5e6, 0.05, 30_000)])
    assert hooks == [None]  # a constant link is given once


def test_fit_json_keeps_every_candidate_and_the_table_says_each_senders_error() -> None:
    real = {"cubic": Observed(9e6, 0.06), "bbr": Observed(9.5e6, 0.03)}

    def measure(cands):  # a path model: throughput = rate, RTT = rtt + queue / rate; one candidate fails
        return [None if c.queue_bytes > 200_000 else
                {"cubic": Observed(c.rate_bps * 0.95, c.rtt_s + c.queue_bytes * 8 / c.rate_bps),
                 "bbr": Observed(c.rate_bps, c.rtt_s + 0.2 * c.queue_bytes * 8 / c.rate_bps)} for c in cands]

    start = Candidate(rate_bps=8e6, rtt_s=0.02, queue_bytes=250_000)
    f = search(real, start, measure, budget=30)
    doc = json.loads(json.dumps(fits.fit_doc(f, real, {"cubic": Sender("cubic", "down", 10)}, start)))
    assert len(doc["tried"]) == len(f.tried) and doc["tried"][0]["error"] is None  # the start could not be measured
    assert doc["stopped"] == "the first estimates could not be measured (nor with other losses)"
    assert doc["best"]["result"] is None
    f = search(real, Candidate(rate_bps=8e6, rtt_s=0.02, queue_bytes=30_000), measure, budget=30)
    assert f.best.error < 0.01
    rows = fits.error_rows(real, f.best)
    assert [r[0] for r in rows] == ["cubic", "bbr"] and all(r[3].endswith("%") and r[6].endswith("%") for r in rows)
    assert fits.error_rows(real, f.tried[0].__class__(start, None, math.inf, {}))[0][2] == "-"


def test_the_lab_measure_censors_a_candidate_a_sender_could_not_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[float | None] = []
    monkeypatch.setattr(calibration.shaper, "apply", lambda link, _b: applied.append(link.downlink.rate_bps))
    runs: list[str] = []

    def run_sender(s: Sender, at_start: object = None) -> Observed | None:
        runs.append(s.cc)
        return None if applied[-1] == 1_000_000 and s.cc == "bbr" else Observed(applied[-1] or 0, 0.05)

    monkeypatch.setattr(calibration, "run_sender", run_sender)
    seen: list[tuple[int, bool]] = []
    e = _estimate()
    m = calibration.LabMeasure({"bbr": Sender("bbr", "down", 5), "cubic": Sender("cubic", "down", 5)},
                               lambda c: fits.candidate_tables(e, c), lambda i, _c, r: seen.append((i, r is not None)))
    got = m([Candidate(5e6, 0.02, 30_000), Candidate(1e6, 0.02, 30_000)])
    assert applied == [5_000_000, 1_000_000] and runs == ["bbr", "cubic", "bbr"]  # no use running cubic after
    assert got == [{"bbr": Observed(5e6, 0.05), "cubic": Observed(5e6, 0.05)}, None]
    assert seen == [(1, True), (2, False)]


def test_estimate_then_fitted_is_what_the_scenario_file_writes(tmp_path: Path) -> None:
    from lab.calibrate import scenario_file
    from lab.plan.checks import load

    paths = _folder(tmp_path, **{"cubic.json": iperf3_json("cubic", RATES, rtts_ms=[30] * 10, reverse=True),
                                 "ping.txt": ping_text([20.0] * 20)})
    e = estimate(probe(paths), "m", "constant")
    best = Candidate(rate_bps=9.1e6, rtt_s=0.021, queue_bytes=25_000, loss=0.0005)
    out = tmp_path / "link.toml"
    scenario_file.write(out, fits.fitted(e, best), "m", "12 candidates measured")
    assert out.read_text().startswith("# Fitted in the lab by `quiclab calibrate m --search`")
    s = load(out)
    common = {k: v for k, v in s.link.items() if k not in ("down", "up")}
    assert parse_link(common, s.link.get("down"), s.link.get("up")) == parse_link(*fits.candidate_tables(e, best))


def test_a_senders_throughput_is_what_it_delivered_after_start_up_not_a_median_of_whole_reads() -> None:
    """iperf3 counts a receiver's 1 s interval in whole 128 KiB reads: at ~1.6 Mbit/s the intervals of a real run on
    ATT's LTE trace were 1048576, 917504, 0, 0, 524288, 393216, 131072 ... bytes. Their median moves in 1.05 Mbit/s
    steps; the delivered bytes over the time do not."""
    from lab.calibrate.measurements import Flow
    from lab.calibrate.senders import observed

    counts = [0, 1048576, 917504, 0, 0, 524288, 393216, 131072, 131072, 131072]
    flow = Flow(source="cubic.json", label="iperf3 cubic", cc="cubic", duration_s=10, bytes=sum(counts),
                rate=[(i, i + 1, b * 8.0) for i, b in enumerate(counts)], rtt=[(i + 0.5, 0.15) for i in range(10)])
    got = observed(flow)
    assert got is not None
    after = counts[2:]  # start-up: the first 2 s (estimate.STARTUP_S)
    assert got.throughput_bps == pytest.approx(sum(after) * 8 / len(after))  # 1.31 Mbit/s; the median was 1.05
    assert got.retransmit_rate is None  # the input does not count them
    counted = observed(flow.model_copy(update={"retransmits": 25, "segments": 2500}))
    assert counted is not None and counted.retransmit_rate == pytest.approx(0.01)
    assert calibration.download_argv(Sender("cubic", "down", 10))[-6:-4] == ["-l", "16K"]


def test_a_senders_retransmission_rate_is_after_its_start_up_with_its_counts() -> None:
    """As its throughput: a slow start's overshoot (101 retransmissions in one event, cubic on the benchmark's link 9)
    would swamp the steady state's few; the counts go with the rate (the search weighs its term by them)."""
    from lab.calibrate.measurements import Flow
    from lab.calibrate.senders import observed

    retx = [1.5] * 101 + [2.5] * 16 + [3.5] * 7
    flow = Flow(source="cubic.json", label="iperf3 cubic", cc="cubic", duration_s=10, bytes=12_500_000,
                rate=[(i, i + 1, 10e6) for i in range(10)], rtt=[(i + 0.5, 0.15) for i in range(10)],
                retransmits=len(retx), retransmit_times_s=retx, segments=8633)
    got = observed(flow)
    segments = 8 * 10e6 / 8 / 1448
    assert got is not None and got.retransmits == 23 and got.segments == pytest.approx(segments, abs=0.1)
    assert got.retransmit_rate == pytest.approx(23 / segments)  # 0.33 %, not the whole run's 1.44 %


def test_the_benchmarks_calibration_keeps_to_the_evidence_on_a_committed_links_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's calibrate job (lab/bench/calibration.py calibrate_one) on the user's files of the committed
    run's link 9 (results/reference/calibrate-20261126: 0.098 % random loss), the lab replaced by a recorder that
    answers every sender alike: the wiring from the files to the search. Its first candidates are the start held at
    the retransmissions' bound and that bound's ladder, no candidate has more loss than the bound, fit.json keeps the
    counts, and the fitted column names the link without jitter (the pings' tail is not jitter)."""
    import contextlib

    from lab.bench.calibration import calibrate_one, hidden_files

    hidden = config.ROOT / "results" / "reference" / "calibrate-20261126" / "link-9" / "hidden"
    e = estimate(probe(hidden_files(hidden)), "m", "auto")
    assert e.down_loss_max is not None and e.jitter_s == 0.0
    applied: list[object] = []
    monkeypatch.setattr(calibration.lock, "holding", lambda *_a, **_k: contextlib.nullcontext())
    monkeypatch.setattr(calibration, "check_allowed", lambda _s: None)
    monkeypatch.setattr(calibration.shaper, "apply", lambda lk, _b: applied.append(lk))
    monkeypatch.setattr(calibration, "run_sender", lambda s, _at=None: Observed(
        11e6, 0.16, 0.001, retransmits=8, segments=8000.0))
    seen: list[Candidate] = []
    got = calibrate_one(hidden, tmp_path, 6, lambda _i, c, _r: seen.append(c))
    assert got["candidates"] == len(seen) == 6 and got["why"] == "" and got["fitted_tput_bps"] == 11e6
    assert got["fitted"].startswith("rate 11.555 Mbit/s, RTT 153.00 ms, queue ")  # no jitter named
    assert [c.loss for c in seen[:3]] == [pytest.approx(0.000283, rel=0.01), 0.0, e.down_loss_max]
    assert max(c.loss for c in seen) <= e.down_loss_max
    doc = json.loads((tmp_path / "m" / fits.FILE).read_text())
    assert doc["real"]["bbr"]["retransmits"] == 3 and doc["real"]["cubic"]["retransmits"] == 23
    assert doc["tried"][0]["result"]["bbr"]["segments"] == 8000.0


def test_the_held_out_figure_is_the_median_of_its_runs_and_needs_a_majority() -> None:
    """The benchmark compares the held-out sender by the medians of its repeated runs on each side (one 10 s Reno
    run on a lossy link varied 1.8x between two runs of one link); a minority of measured runs is no figure."""
    runs = [Observed(4.39e6, 0.050), Observed(2.47e6, 0.061), Observed(3.10e6, 0.055)]
    got = calibration.median_observed(runs)
    assert got is not None and (got.throughput_bps, got.p50_rtt_s) == (3.10e6, 0.055)
    assert calibration.median_observed([runs[0], None, runs[1]]) == Observed(3.43e6, 0.0555)
    assert calibration.median_observed([runs[0], None, None]) is None
    assert calibration.median_observed([]) is None


def test_the_held_out_runs_each_meet_the_trace_from_its_beginning(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    monkeypatch.setattr(calibration, "run_sender", lambda s, at=None: (at and at(), order.append("run"))[-1])
    calibration.run_times(Sender("reno", "down", 10), 3, lambda: order.append("restart"))
    assert order == ["restart", "run"] * 3


def test_the_other_shape_of_an_auto_estimate_is_put_in_force_as_such(tmp_path: Path) -> None:
    """--rate auto keeps both shapes of the downlink (its median rate after start-up, its whole delivery rate as a
    trace): fit.shapes gives the search the start in the other one, and the lab puts in force what a candidate's
    shape says: the constant rate, or the delivery trace scaled to the candidate's rate as its mean. A recorded
    trace, or a shape the user asked for, has no other."""
    from dataclasses import replace

    from lab.calibrate.trace import from_rates, mean_rate

    delivery = from_rates([(0, 1, 12e6), (1, 2, 3e6), (2, 3, 12e6), (3, 4, 0.0), (4, 5, 6e6)])
    const = _estimate(down_rate_bps=8e6, down_median_bps=8e6, down_delivery_ms=delivery, down_loss=0.003)
    first = fits.start(const, "m")
    assert first.trace is False and first.loss == 0.003
    # the other shape without random loss: a varying rate overflowing the queue is what it may explain instead
    assert fits.shapes(const, first) == [replace(first, rate_bps=mean_rate(delivery), trace=True, loss=0.0)]
    other = fits.shapes(const, first)[0]
    traced = parse_link(*fits.candidate_tables(const, replace(other, rate_bps=other.rate_bps / 2), tmp_path))
    assert traced.downlink.trace_ms is not None and len(traced.downlink.trace_ms) == pytest.approx(
        len(delivery) / 2, abs=2)
    assert "rate trace (5 s) scaled to mean" in fits.describe(other, const)
    assert parse_link(*fits.candidate_tables(const, first)).downlink.rate_bps == 8_000_000
    trace = _estimate(down_rate_bps=mean_rate(delivery), down_trace_ms=delivery, down_median_bps=8e6,
                      down_delivery_ms=delivery)
    start = fits.start(trace, "m")
    assert start.trace is True and fits.shapes(trace, start) == [replace(start, rate_bps=8e6, trace=False, loss=0.0)]
    flat = parse_link(*fits.candidate_tables(trace, fits.shapes(trace, start)[0]))
    assert flat.downlink.trace_ms is None and flat.downlink.rate_bps == 8_000_000
    assert fits.describe(fits.shapes(trace, start)[0], trace).startswith("rate 8.000 Mbit/s")
    recorded = _estimate(down_rate_bps=mean_rate(delivery), down_trace_ms=delivery)
    assert fits.shapes(recorded, fits.start(recorded, "m")) == []
