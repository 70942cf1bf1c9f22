"""Issue 10: the sender's congestion control as a measured, controlled dimension, on the real lab.

Each test runs a small real sweep (which holds the lab lock) or holds the lock itself while it changes a server's
network namespace, so it never disturbs another command's measurements."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import config, docker, lock
from lab.endpoints import get_client
from lab.endpoints.instances import listener
from lab.endpoints.registry import registry
from lab.endpoints.sender_cc import resolve
from lab.evidence import sender_view
from lab.link import shaper
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.plan.checks import validate
from lab.protocols import Protocol
from lab.results import store
from lab.results.schema import RunRecord
from lab.run import sweep as lifecycle
from lab.run.sender import SOURCE_CLAIM, SOURCE_CMDLINE, SOURCE_NETNS, SenderControl
from lab.run.transfer import run_transfer

pytestmark = pytest.mark.lab

LOCK_WAIT_S = 1800.0


def sweep(tmp_path: Path, **scenario: Any) -> tuple[Path, list[RunRecord]]:
    """A real sweep (waiting while another command holds the lab); its folder and runs."""
    s = validate({"name": "cc-test", "repeats": 1, "sizes": ["300kB"], "link": {"rtt": "10ms", "rate": "50mbit"},
                  **scenario}, "test")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            folder, complete = lifecycle.start(s, None, tmp_path)
            break
        except lock.LabBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(20)
    assert complete
    return folder, store.load_runs(folder)


@pytest.fixture
def held_lab(lab_up: None) -> Iterator[None]:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            with lock.holding("pytest tests/lab/test_cc.py"):
                yield
            return
        except lock.LabBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(20)


def netns_cc(container: str) -> str:
    return docker.exec_in(container, ["cat", "/proc/sys/net/ipv4/tcp_congestion_control"]).strip()


def test_each_tcp_algorithm_set_in_the_server_netns_is_read_back_per_run(lab_up: None, tmp_path: Path) -> None:
    native = SenderControl().native_tcp()
    folder, runs = sweep(tmp_path, protocols=["h1", "h2"], sweep={"cc": ["reno", "cubic", "bbr", "native"]})
    assert len(runs) == 8 and all(r.status == "ok" for r in runs), [(r.run_key, r.failure) for r in runs]
    for r in runs:
        want = r.point_label.removeprefix("cc=")
        assert r.cc_sender == (native if want == "native" else want), r.run_key
        assert r.cc_sender_source == SOURCE_NETNS and r.cc_server == r.cc_sender
        assert r.link_down_sent_pkts and r.link_down_sent_pkts > 200  # 300 kB toward the client
        assert r.link_down_loss_drops == 0
    assert netns_cc(config.SERVER_CONTAINER) == native, "the sweep leaves the server's namespace as it found it"
    assert "Sender congestion control and loss response" in (folder / "summary.md").read_text()


def test_the_live_connection_runs_the_algorithm_set(held_lab: None) -> None:
    """`ss -ti` on the server shows the algorithm of the connection itself while a transfer runs."""
    nginx, curl = registry().server("nginx"), get_client("curl")
    seen: list[str] = []
    with SenderControl() as senders:
        for algorithm in ("reno", "cubic"):
            prepared = senders.prepare(nginx, resolve(nginx, Protocol.H1, algorithm))
            shaper.apply(parse_link({"rate": "20mbit", "rtt": "20ms"}))
            done = threading.Event()
            out: list[str] = []

            def poll(done: threading.Event = done, out: list[str] = out) -> None:
                while not done.is_set():
                    text = docker.exec_in(config.SERVER_CONTAINER, ["ss", "-Htin", "state", "established",
                                                                    "( sport = :443 )"])
                    if "rtt:" in text:
                        out.append(text)
                        return
                    time.sleep(0.05)

            t = threading.Thread(target=poll)
            t.start()
            try:
                result = run_transfer(curl, "nginx", Protocol.H1, 3_000_000, 60)
            finally:
                done.set()
                t.join()
                shaper.apply(Link())
            assert result.ok, result.failure
            assert out, "the transfer's connection was never seen"
            seen.append(out[0])
            assert f" {algorithm} " in f" {out[0]} ", out[0]
            assert senders.read_back(nginx, prepared, None) == (algorithm, SOURCE_NETNS)
    assert netns_cc(config.SERVER_CONTAINER) == SenderControl().native_tcp()


def test_a_gtlsserver_instance_per_algorithm_serves_a_verified_transfer(lab_up: None, tmp_path: Path) -> None:
    ngtcp2 = registry().server("ngtcp2")
    assert ngtcp2.sender_cc.quic is not None
    ports = ngtcp2.sender_cc.quic.ports
    _, runs = sweep(tmp_path, protocols=["h3"], clients=["gtlsclient"], servers=["ngtcp2"],
                    sweep={"cc": ["reno", "cubic", "bbr"]})
    assert len(runs) == 3
    for r in runs:
        want = r.point_label.removeprefix("cc=")
        assert r.status == "ok" and r.sha256_ok, r.failure
        assert (r.cc_sender, r.cc_sender_source) == (want, SOURCE_CMDLINE)
    for port in ports.values():
        assert listener(ngtcp2.container, port) is None, f"the instance on port {port} outlived the sweep"


def test_a_qlog_capture_runs_the_algorithm_asked_for_and_shows_its_loss_response(lab_up: None,
                                                                                 tmp_path: Path) -> None:
    folder, runs = sweep(tmp_path, protocols=["h3"], clients=["gtlsclient"], servers=["ngtcp2"], cc="reno",
                         sizes=["1MB"], capture=["pcap", "qlog"],
                         link={"rtt": "20ms", "rate": "20mbit", "loss": "3%", "up": {"loss": "0%"}})
    (r,) = runs
    assert r.status == "ok", r.failure
    assert (r.cc_sender, r.cc_sender_source) == ("reno", SOURCE_CMDLINE)  # the qlog instance, started with CC
    assert r.loss_response_source == "server qlog"
    assert r.link_down_loss_drops and r.link_down_loss_drops > 0
    assert r.sender_retx_bytes and r.sender_retx_bytes > 0 and r.sender_data_bytes and r.sender_data_bytes > 1e6
    figure = folder / f"evidence/{r.run_key.replace('/', '_')}/{sender_view.FIGURE}"
    assert figure.stat().st_size > 10_000 and str(figure.relative_to(folder)) in r.evidence.split()
    assert str(figure.relative_to(folder)) in (folder / "report.html").read_text()


def test_nginx_with_reno_over_h3_is_recorded_unsupported(lab_up: None, tmp_path: Path) -> None:
    _, runs = sweep(tmp_path, protocols=["h1", "h3"], sweep={"cc": ["reno", "native"]})
    by = {(r.point_label, r.protocol): r for r in runs}
    reno_h3 = by[("cc=reno", "h3")]
    assert reno_h3.status == "unsupported" and reno_h3.total_s is None and reno_h3.cc_sender == ""
    assert "nginx's QUIC congestion control is fixed" in reno_h3.failure and "cc=reno" in reno_h3.failure
    assert by[("cc=reno", "h1")].status == "ok" and by[("cc=reno", "h1")].cc_sender == "reno"
    native_h3 = by[("cc=native", "h3")]
    assert native_h3.status == "ok"
    assert (native_h3.cc_sender, native_h3.cc_sender_source) == (registry().server("nginx").quic_cc.describe(),
                                                                 SOURCE_CLAIM)


def test_the_loss_response_of_tcp_and_of_nginx_quic_from_captures(lab_up: None, tmp_path: Path) -> None:
    """TCP from sequence numbers (checked against tshark's own analysis), nginx's QUIC decrypted with the key log."""
    folder, runs = sweep(tmp_path, protocols=["h1", "h3"], cc="native", sizes=["1MB"], capture=["pcap", "keylog"],
                         link={"rtt": "20ms", "rate": "20mbit", "loss": "3%", "up": {"loss": "0%"}})
    by = {r.protocol: r for r in runs}
    for r in runs:
        assert r.status == "ok", r.failure
        assert r.link_down_loss_drops and r.link_down_loss_drops > 5
        assert r.sender_retx_bytes and r.sender_retx_bytes > 0
    assert by["h1"].loss_response_source == "pcap (TCP sequence numbers)"
    assert by["h3"].loss_response_source == "pcap decrypted with the key log (tshark)"
    # tshark's tcp.analysis counts the same retransmitted payload bytes
    pcap = folder / f"evidence/{by['h1'].run_key.replace('/', '_')}/server-side.pcap"
    docker.exec_in(config.ROUTER_CONTAINER, ["mkdir", "-p", "/tmp/cc-test"])
    docker.client().container.copy(pcap, (config.ROUTER_CONTAINER, "/tmp/cc-test/s.pcap"))
    out = docker.exec_in(config.ROUTER_CONTAINER, ["tshark", "-n", "-r", "/tmp/cc-test/s.pcap", "-Y",
                                                   "tcp.analysis.retransmission and ip.src=="
                                                   f"{registry().server('nginx').address}",  # (this lab's)
                                                   "-T", "fields", "-e", "tcp.len"])
    docker.exec_in(config.ROUTER_CONTAINER, ["rm", "-rf", "/tmp/cc-test"])
    theirs = sum(int(x) for x in out.split())
    assert theirs > 0
    assert abs(by["h1"].sender_retx_bytes - theirs) <= 0.1 * theirs, (by["h1"].sender_retx_bytes, theirs)


def test_the_sysctl_helper_leaves_no_container_behind(held_lab: None) -> None:
    def helpers() -> list[str]:
        return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={config.PROJECT}.helper=1"],
                              capture_output=True, text=True, check=True).stdout.split()

    before = helpers()
    with SenderControl() as senders:
        native = senders.native_tcp()
        t0 = time.monotonic()
        senders.set_tcp(config.SERVER_CONTAINER, "reno")
        cost = time.monotonic() - t0
        assert netns_cc(config.SERVER_CONTAINER) == "reno"
        assert helpers() == before
    assert netns_cc(config.SERVER_CONTAINER) == native  # close() set it back
    assert helpers() == before
    assert cost < 5, f"one sysctl helper took {cost:.1f} s"
