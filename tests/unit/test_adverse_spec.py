"""Adverse-condition specs: faults, competing flows, path changes; scenario checks; fairness arithmetic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from lab.adverse import fairness, faults, spec
from lab.adverse.competing import cc_of_port
from lab.adverse.faults import faulty_link
from lab.adverse.spec import parse_competing, parse_fault, parse_faults, parse_path
from lab.errors import UsageError
from lab.evidence.pcap import Packet
from lab.link.spec import parse_link
from lab.plan.checks import validate
from lab.plan.plan import points


def test_fault_forms():
    f = parse_fault("pause:2s@1s")
    assert (f.kind, f.duration_s, f.start_s, f.end_s) == ("pause", 2.0, 1.0, 3.0)
    assert parse_fault("blackout:500ms@0").duration_s == 0.5
    assert parse_fault("kill:0@1.5s").start_s == 1.5
    assert parse_fault("rate=1mbit:2s@1s").rate_bps == 1_000_000
    assert parse_fault("rate=10%:2s@1s").rate_fraction == pytest.approx(0.1)
    assert parse_fault("delay=100ms:1s@1s").delay_s == pytest.approx(0.1)
    assert parse_fault("delay=+50ms:1s@1s").delay_add_s == pytest.approx(0.05)
    assert parse_faults("none") == () and parse_faults("") == ()
    assert [f.kind for f in parse_faults("blackout:1s@5s, pause:1s@1s")] == ["pause", "blackout"]
    # a container fault and a link fault may overlap
    assert len(parse_faults("pause:3s@1s,blackout:1s@2s")) == 2


@pytest.mark.parametrize(("value", "needle"), [
    ("pause:-2s@1s", "negative"),
    ("pause:2s@-1s", "negative"),
    ("explode:1s@1s", "unknown kind 'explode'"),
    ("pause:2s", "accepted"),
    ("pause@1s", "accepted"),
    ("pause:2@1s", "'2'"),
    ("pause:2s@1h", "'1h'"),
    ("rate:1s@1s", "needs a value"),
    ("rate=0%:1s@1s", "percentage"),
    ("rate=fast:1s@1s", "'fast'"),
    ("pause=1:1s@1s", "takes no value"),
    ("pause:1s@1s,kill:1s@1.5s", "overlap"),
    ("blackout:1s@1s,rate=1mbit:1s@1.5s", "overlap"),
    ("pause:1s@1s,,kill:1s@5s", "empty item"),
    ("blackout:3601s@1s", "beyond"),
])
def test_bad_faults_are_one_line_naming_the_value(value, needle):
    with pytest.raises(UsageError) as e:
        parse_faults(value)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg
    assert "accepted" in msg or "overlap" in msg


def test_competing_and_path_forms():
    flows = parse_competing("tcp-cubic, tcp-bbr@2s, udp=5mbit@1s, quic, quic-bbr")
    assert [(f.kind, f.cc, f.start_s) for f in flows] == [("tcp", "cubic", 0.0), ("tcp", "bbr", 2.0),
                                                          ("udp", None, 1.0), ("quic", "cubic", 0.0),
                                                          ("quic", "bbr", 0.0)]
    assert flows[2].rate_bps == 5_000_000
    assert parse_competing("none") == ()
    p = parse_path("rebind@2s")
    assert p is not None and (p.kind, p.at_s, p.client_side) == ("rebind", 2.0, False)
    assert parse_path("migrate-nat@500ms").client_side  # type: ignore[union-attr]
    assert parse_path("none") is None


@pytest.mark.parametrize(("fn", "value", "needle"), [
    (parse_competing, "tcp", "congestion control"),
    (parse_competing, "tcp-vegas", "congestion control"),
    (parse_competing, "udp", "needs a rate"),
    (parse_competing, "sctp-cubic", "unknown kind"),
    (parse_competing, "tcp-bbr@-1s", "negative"),
    (parse_path, "teleport@1s", "unknown kind"),
    (parse_path, "rebind", "accepted"),
    (parse_path, "rebind@1s,readdr@2s", "one path change"),
])
def test_bad_competing_and_path(fn, value, needle):
    with pytest.raises(UsageError) as e:
        fn(value)
    assert needle in str(e.value) and "\n" not in str(e.value)


def scen(**kw):
    base = {"name": "t", "sizes": ["1MB"], "repeats": 1, "timeout": 30, "link": {"rtt": "20ms", "rate": "10mbit"}}
    base.update(kw)
    return validate(base, "test")


def test_scenario_dimensions_default_and_swept():
    s = scen(faults=["pause:2s@1s", "blackout:1s@4s"], sweep={"competing": ["none", "tcp-bbr"]})
    pts = points(s)
    assert [{k: v for k, v in p.settings.strings().items() if k != "workload"} for p in pts] == [
        {"faults": "pause:2s@1s,blackout:1s@4s", "competing": "none"},
        {"faults": "pause:2s@1s,blackout:1s@4s", "competing": "tcp-bbr"}]
    s = scen(sweep={"faults": ["none", "blackout:500ms@2s", "blackout:2s@2s"]})
    assert [(p.x_name, p.x) for p in points(s)] == [("fault_s", 0.0), ("fault_s", 0.5), ("fault_s", 2.0)]


@pytest.mark.parametrize(("change", "needle"), [
    ({"faults": "pause:2s@29s"}, "after the run's timeout of 30 s"),
    ({"sweep": {"faults": ["none", "blackout:20s@20s"]}}, "timeout"),
    ({"faults": "rate=10%:1s@1s", "link": {"rtt": "20ms"}}, "no rate"),
    ({"faults": "blackout:1s@1s", "link": {"outage": "10s:100ms"}}, "outage"),
    ({"path": "migrate@1s"}, "gtlsclient"),
    ({"faults": "boom:1s@1s"}, "'boom'"),
    ({"sweep": {"competing": ["tcp-cubic", "tcp-x"]}}, "tcp-x"),
])
def test_bad_scenarios(change, needle):
    with pytest.raises(UsageError) as e:
        scen(**change)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_fault_spec_exits_2_with_one_line(tmp_path: Path):
    f = tmp_path / "s.toml"
    f.write_text('name = "x"\ntimeout = 10\nfaults = ["pause:5s@8s"]\n')
    r = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(f)], capture_output=True, text=True,
                       timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "'pause:5s@8s'" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_faulty_links():
    link = parse_link({"rtt": "40ms", "rate": "20mbit", "loss": "1%", "seed": 7})
    b = faulty_link(parse_fault("blackout:1s@1s"), link)
    assert b.downlink.outage is not None and b.downlink.outage.down_s == 1.0 and b.uplink.outage == b.downlink.outage
    assert b.downlink.outage.offset_s == 0 and b.seed == 7 and b.downlink.loss == link.downlink.loss
    r = faulty_link(parse_fault("rate=25%:1s@1s"), link)
    assert r.downlink.rate_bps == 5_000_000 and r.uplink.rate_bps == 5_000_000 and r.downlink.delay_s == 0.02
    d = faulty_link(parse_fault("delay=+100ms:1s@1s"), link)
    assert d.downlink.delay_s == pytest.approx(0.12) and d.downlink.rate_bps == 20_000_000
    assert faulty_link(parse_fault("pause:1s@1s"), link) == link  # a fault on the server leaves the link


def test_each_fault_kind_is_one_class_chosen_by_name():
    """One table per side: the kinds spec.py parses are the kinds faults.py has a class for, and a run's fault gets
    its kind's class (blackout: the nft rule where netem shapes or when asked, else linkem's outage window)."""
    assert set(faults.KINDS) == set(spec.KINDS) == set(get_args(spec.FaultKind))
    link = parse_link({"rtt": "40ms", "rate": "20mbit"})

    def action(item: str, backend: str = "linkem", blackout_with: str | None = None) -> faults.Action:
        return faults.action_for(parse_fault(item), faults.Target(backend, link, "c", "s", blackout_with))

    assert type(action("pause:1s@1s")) is faults.Pause and type(action("kill:1s@1s")) is faults.Kill
    assert action("kill:1s@1s").route_helper.endswith("-s-route-1")  # type: ignore[attr-defined]
    b = action("blackout:1s@1s")
    assert type(b) is faults.Blackout and b.self_ending and b.verifies_link
    assert type(action("blackout:1s@1s", "netem")) is faults.NftBlackout
    assert type(action("blackout:1s@1s", "linkem", "nft")) is faults.NftBlackout
    r, n = action("rate=1mbit:1s@1s"), action("rate=1mbit:1s@1s", "netem")
    assert type(r) is type(n) is faults.Rate and r.verifies_link and not n.verifies_link and not r.self_ending
    assert type(action("delay=+10ms:1s@1s")) is faults.Delay
    assert {parse_fault(x).family for x in ("pause:1s@1s", "kill:1s@1s")} == {"server"}
    assert {parse_fault(x).family for x in ("blackout:1s@1s", "rate=1mbit:1s@1s", "delay=1ms:1s@1s")} == {"link"}


def test_a_link_fault_puts_its_link_then_the_runs_back(monkeypatch: pytest.MonkeyPatch):
    """The linkem side of a link fault's apply and undo (the emulator's PUT itself: tests/lab/test_adverse.py)."""
    link = parse_link({"rtt": "40ms", "rate": "20mbit"})
    put: list[object] = []
    monkeypatch.setattr(faults.calibrate, "path_delays", lambda backend: None)
    monkeypatch.setattr(faults.linkem, "apply", lambda lk, delays: put.append(lk))
    monkeypatch.setattr(faults.linkem, "current", lambda: put[-1])
    a = faults.action_for(parse_fault("rate=50%:1s@1s"), faults.Target("linkem", link, "c", "s"))
    a.apply()
    assert put[-1].downlink.rate_bps == 10_000_000 and a.verify() is not None  # type: ignore[attr-defined]
    a.undo()
    assert put[-1] == link and a.verify() is None and len(put) == 2


def pkt(t: float, src: str, sport: int, n: int) -> Packet:
    return Packet(time=t, src=src, dst="10.71.1.10", proto=6, sport=sport, dport=40000, payload=b"", payload_len=n)


def test_fairness_shared_interval_and_jain():
    names = {("10.71.2.10", 443): "measured", ("10.71.2.10", 5301): "bg"}
    packets = []
    for i in range(100):  # measured: 0..10 s, 1000 B per 0.1 s; bg: 2..12 s, 3000 B per 0.1 s; others ignored
        packets.append(pkt(100 + i * 0.1, "10.71.2.10", 443, 1000))
        packets.append(pkt(102 + i * 0.1, "10.71.2.10", 5301, 3000))
        packets.append(pkt(100 + i * 0.1, "10.71.2.99", 1, 5000))
    packets.append(Packet(time=100.5, src="10.71.2.10", dst="10.71.1.10", proto=6, sport=5301, dport=40001,
                          payload=b"", payload_len=100))  # iperf3's control connection: does not start the flow
    flows = fairness.split_flows(packets, names, zero_unix=100.0)
    assert flows["bg"].first_s == pytest.approx(2.0)
    fair = fairness.fairness([flows["measured"], flows["bg"]])
    assert fair.interval == pytest.approx((2.0, 9.9))
    assert fair.share["bg"] == pytest.approx(0.75, abs=0.01)
    # J = (1 + 3)^2 / (2 * (1 + 9)) = 0.8
    assert fair.jain == pytest.approx(0.8, abs=0.01)
    assert fairness.jain([5, 5, 5]) == pytest.approx(1.0)
    assert fairness.jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert fairness.fairness([flows["measured"], fairness.FlowSeries("empty")]).jain is None
    series = fairness.intervals_mbit(flows["measured"], 10.0, 1.0)
    assert len(series) == 10 and series[5] == pytest.approx(10 * 1000 * 8 / 1e6)


def test_cc_of_port_reads_ss():
    out = ("0      0      10.71.2.10:5301 10.71.1.10:51234\n\t cubic wscale:7,7 rto:204 rtt:20/10\n"
           "0      0      10.71.2.10:5301 10.71.1.10:51232\n\t bbr wscale:7,7 rto:204\n"
           "0      0      10.71.2.10:5302 10.71.1.10:51236\n\t reno wscale:7,7\n")
    assert cc_of_port(out, 5301) == {"cubic", "bbr"}
    assert cc_of_port(out, 5302) == {"reno"}
    assert cc_of_port(out, 5303) == set()


def test_the_client_agent_passes_a_migration_to_gtlsclient(monkeypatch):
    """images/client/agent.py: CHANGE_LOCAL_ADDR (and NAT_REBINDING) become gtlsclient's migration options."""
    import importlib.util

    from lab.adverse.path import client_env
    from lab.config import ROOT

    spec = importlib.util.spec_from_file_location("quiclab_agent", ROOT / "images" / "client" / "agent.py")
    assert spec is not None and spec.loader is not None
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    seen: list[list[str]] = []

    class FakeProc:
        returncode = 0
        pid = 0

        def __init__(self, argv, **_kw):
            seen.append(argv)

        def communicate(self, timeout=None):
            return b"", b""

    monkeypatch.setattr(agent.subprocess, "Popen", FakeProc)
    base = {"PROTOCOL": "h3", "URL": "https://ngtcp2.quiclab/obj/1000", "TIMEOUT": "10"}
    for kind, want in (("migrate", ["--change-local-addr=1500ms"]),
                       ("migrate-nat", ["--change-local-addr=1500ms", "--nat-rebinding"])):
        change = parse_path(f"{kind}@1.5s")
        assert change is not None
        agent.fetch_ngtcp2({**base, **client_env(change)})
        assert [a for a in seen[-1] if a.startswith(("--change-local-addr", "--nat-rebinding"))] == want
    agent.fetch_ngtcp2(base)
    assert not [a for a in seen[-1] if a.startswith(("--change-local-addr", "--nat-rebinding"))]
