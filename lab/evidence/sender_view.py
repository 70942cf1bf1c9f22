"""The sender's loss response of one run from its evidence files (lab/evidence/loss_response.py reads them):
the server's qlog where there is one, else the server-side capture (TCP: directly; QUIC: decrypted by tshark
in the router with the client's key log). Also draws the run's loss-response figure."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from lab import config, docker
from lab.endpoints.registry import Implementation
from lab.errors import QuiclabError
from lab.evidence import loss_response, pcap, tshark
from lab.evidence.capture import Evidence
from lab.link import router
from lab.link.counters import Snapshot
from lab.protocols import Protocol

FIGURE = "loss-response.png"
TSHARK_TIMEOUT_S = 120.0


def analyse(ev: Evidence, server: Implementation, protocol: Protocol, port: int,
            size: int) -> loss_response.LossResponse | None:
    """The loss response from what the run captured. None when there is nothing to read it from, or when what
    could be read does not cover the whole object (e.g. tshark decrypts only part of gtlsserver's packets): a
    partial view is never recorded."""
    r = _analyse(ev, server, protocol, port)
    if r is not None and r.data_bytes - r.retx_bytes < size:
        ev.problems.append(f"the sender's view ({r.source}) holds {r.data_bytes - r.retx_bytes} new data bytes, "
                           f"less than the {size}-byte object: not recorded")
        return None
    return r


def _analyse(ev: Evidence, server: Implementation, protocol: Protocol,
             port: int) -> loss_response.LossResponse | None:
    if protocol is Protocol.H3:
        qlogs = sorted((f for f in ev.files if f.name.startswith("server-") and f.suffix == ".sqlog"),
                       key=lambda f: f.stat().st_size)
        if qlogs:
            r = loss_response.qlog_response(qlogs[-1].read_text(errors="replace"))
            if r is not None:
                return r
        side, keys = ev.find("server-side.pcap"), ev.find("keys.log")
        if side is None or keys is None:
            return None
        text = _tshark_fields(side, keys, port)
        return loss_response.tshark_quic_response(text, server.address or "") if text else None
    side = ev.find("server-side.pcap")
    if side is None:
        return None
    try:
        return loss_response.tcp_response(pcap.read_pcap(side.read_bytes()), server.address or "", port)
    except pcap.PcapError:
        return None


def _tshark_fields(capture: Path, keys: Path, port: int) -> str:
    """tshark's decrypted QUIC fields (loss_response.TSHARK_FIELDS) for a capture, run in the router (QUIC on
    `port`, and every QUIC port of the registry: tshark finds QUIC only by a heuristic; lab/evidence/tshark.py)."""
    work = f"/tmp/quiclab-tshark-{uuid.uuid4().hex[:10]}"
    try:
        router.run("mkdir", "-p", work)
        docker.copy_to(capture, config.ROUTER_CONTAINER, f"{work}/c.pcap")
        docker.copy_to(keys, config.ROUTER_CONTAINER, f"{work}/keys.log")
        fields = [x for f in loss_response.TSHARK_FIELDS for x in ("-e", f)]
        argv = ["tshark", "-n", "-r", f"{work}/c.pcap", "-o", f"tls.keylog_file:{work}/keys.log",
                *tshark.decode_as(port), "-Y", "quic", "-T", "fields", *fields,
                "-E", "occurrence=a", "-E", "aggregator=;"]
        return docker.exec_in(config.ROUTER_CONTAINER, argv, timeout_s=TSHARK_TIMEOUT_S)
    except QuiclabError:  # DockerError too
        return ""
    finally:
        with contextlib.suppress(QuiclabError):
            router.try_run("rm", "-rf", work)


def figure(r: loss_response.LossResponse, link: Snapshot | None, title: str, path: Path) -> Path:
    """Two panels over time: the sender's data (end offset per packet; retransmissions in red) and bytes in
    flight (with the congestion window where the source has it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, constrained_layout=True)
    new = [(t, y / 1e6) for t, y, retx in r.sent if not retx]
    old = [(t, y / 1e6) for t, y, retx in r.sent if retx]
    if new:
        top.scatter(*zip(*new, strict=True), s=2, color="#1f77b4", label="new data")
    if old:
        top.scatter(*zip(*old, strict=True), s=8, color="#d62728", marker="x", label="retransmitted")
    top.set_ylabel("data offset (MB)")
    top.legend(loc="upper left", fontsize=8)
    if r.in_flight:
        bottom.step(*zip(*[(t, v / 1e3) for t, v in r.in_flight], strict=True), where="post", lw=0.8,
                    label="bytes in flight")
    if r.cwnd:
        bottom.step(*zip(*[(t, v / 1e3) for t, v in r.cwnd], strict=True), where="post", lw=0.8,
                    label="congestion window")
    bottom.set_ylabel("kB")
    bottom.set_xlabel("time (s)")
    if r.in_flight or r.cwnd:
        bottom.legend(loc="upper left", fontsize=8)
    frac = r.retx_fraction
    lines = [title, f"sender ({r.source}): {r.data_packets} data packets, {r.retx_bytes} of {r.data_bytes} data bytes "
                    f"retransmitted ({frac * 100 if frac is not None else 0:.1f} %)"]
    if link is not None and link.down.received:
        lines.append(f"link toward the client: {link.down.received} packets in, {link.down.loss_drops or 0} dropped "
                     f"by the loss model, {link.down.queue_drops or 0} by the queue")
    fig.suptitle("\n".join(lines), fontsize=8.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
