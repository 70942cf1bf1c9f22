"""Per-run probes: every concern that measures something around a run besides the transfer itself.

A probe owns its columns of runs.csv (lab/results/schema.py) and any files it writes; the runner calls every probe
at the same moments and builds the run's RunRecord once, after the run, from the run's identity, its outcome and
the probes' columns (lab/run/runner.py `execute`):

    before(rc)            just before the transfer (the link set, captures and adverse conditions running)
    after(rc)             just after the transfer, still inside the adverse conditions (nothing else ran since)
    settled(rc)           the adverse conditions are over, the run's captures still open (servers as configured)
    close()               always, last (also when the run raised): stop what the probe started
    columns(rc, so_far)   the captures closed: this probe's columns; `so_far` holds the identity, the outcome and
                          the columns of the probes before it (read-only)

A probe that finds the lab (not the transport) failed raises a QuiclabError: the run is not a result. Probes run in
PROBES order; a later probe may read an earlier one's columns. Only the workload probe may change the outcome
(status/failure/goodput), and only to fail a run whose capture does not prove what it asked for.

Adding a metric = one probe here (or a column in an existing one) + its column in RunRecord + its line in
docs/results.md."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lab import config
from lab.adverse.run import Conditions
from lab.endpoints.registry import Implementation
from lab.errors import EnvironmentFailure, QuiclabError
from lab.evidence import capture, sender_socket, sender_view
from lab.evidence.goodput import pcap_figures
from lab.link import counters, linkem, router
from lab.link.model import Link
from lab.models import TransferResult
from lab.plan.plan import PlannedRun
from lab.protocols import Protocol
from lab.quantiles import median
from lab.results import objects_csv as objects
from lab.run import workload as workloads
from lab.run.sender import Prepared, SenderControl
from lab.run.workload import WorkloadRun
from lab.workloads.spec import Workload


@dataclass
class ProbeState:
    """What the probes carry from one run to the next, per sweep (the runner's Context holds it; `quiclab run` has
    its own): the link's counters when the last run ended (None before the first). What crossed the link since is
    the tail of that run (e.g. an HTTP/3 server still sending to a client that left, its CONNECTION_CLOSE lost) or
    another command's traffic."""

    last_end: counters.Snapshot | None = None


@dataclass
class RunContext:
    """What the probes of one run see: the plan, what was put in force, and (as the run goes) what it produced."""

    run: PlannedRun
    server: Implementation
    workload: Workload
    backend: str                       # the shaper in force: linkem | netem
    applied: Link                      # the link as set for the run
    applied_unix: float | None         # when it was (unix s; a trace starts then); None: the link was in force
    started_at: str
    folder: Path | None                # the sweep folder (None: `quiclab run` and tests)
    cc_claim: str                      # the server's congestion control as the sweep's start recorded it
    senders: SenderControl
    sender: Prepared
    other_traffic: bool = False        # competing flows or the caller's own probe share the link by design
    port: int | None = None            # where the client fetched from (None: the server's own port)
    ev: capture.Evidence | None = None
    adv: Conditions | None = None
    result: TransferResult | None = None
    state: ProbeState = field(default_factory=ProbeState)  # carried over from the sweep's previous run

    @property
    def protocol(self) -> Protocol:
        return self.run.protocol

    @property
    def size(self) -> int:
        """The bytes the run was to move: the object, or all of a workload's objects."""
        return self.result.size if isinstance(self.result, WorkloadRun) else self.run.point.size


class Probe:
    """The probe interface (every hook optional). COLUMNS: the runs.csv columns this probe owns."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()

    def before(self, rc: RunContext) -> None:
        return None

    def after(self, rc: RunContext) -> None:
        return None

    def settled(self, rc: RunContext) -> None:
        return None

    def close(self) -> None:
        return None

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        return {}


# --- the link's own counters ----------------------------------------------------------------------------------------

def wire_counters(backend: str) -> counters.Snapshot | None:
    """The link's counters so far: linkem's (bytes, packets, drops by cause), or under netem the router's interface
    counters (IP bytes and packets delivered per direction) and its qdiscs' statistics (what entered, drops by
    cause: lab/link/counters.py), read in one exec."""
    try:
        if backend == "linkem":
            return counters.parse_linkem(linkem.metrics_text())
        ifs = router.interfaces()
        files = " ".join(f"/sys/class/net/{i}/statistics/{c}" for i in (ifs.client_side, ifs.server_side)
                         for c in ("tx_bytes", "tx_packets"))
        out = router.run("sh", "-c", f"cat {files} && tc -s -j qdisc show")
        lines = out.split("\n", 4)
        cb, cp, sb, sp = (int(x) for x in lines[:4])
        return counters.parse_netem(lines[4], ifs.client_side, ifs.server_side, (cb, cp, sb, sp))
    except (QuiclabError, ValueError):
        return None


#: More packets than this between one run's end and the next run's start: wait for the link to go quiet first.
TAIL_PACKETS = 20
#: ... checking every SETTLE_POLL_S, until no packet moved in one poll, for at most SETTLE_MAX_S.
SETTLE_POLL_S, SETTLE_MAX_S = 0.2, 10.0


def _moved(a: counters.Snapshot, b: counters.Snapshot) -> int:
    return sum((b - a).by_protocol.values()) if a.by_protocol else (b.down.packets + b.up.packets
                                                                     - a.down.packets - a.up.packets)


def settle(backend: str, now: counters.Snapshot | None, prev: counters.Snapshot | None) -> counters.Snapshot | None:
    """The counters to start a run from: at once when the link was quiet since the last run ended (no cost),
    else after the previous run's tail has passed (no packet in SETTLE_POLL_S; at most SETTLE_MAX_S, outside the
    run's timed transfer). Without this a QUIC server's last burst to a client that had left crossed into the next
    run, which the other-traffic check then took for another command (yu at 5 % loss, 200 ms: 303-439 packets).
    `prev`: the counters when the previous run ended (ProbeState.last_end)."""
    if prev is None or now is None or _moved(prev, now) <= TAIL_PACKETS:
        return now
    deadline = time.monotonic() + config.deadline(SETTLE_MAX_S)
    while time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        later = wire_counters(backend)
        if later is None:
            return now
        if _moved(now, later) == 0:
            return later
        now = later
    return now


#: Packets of another IP protocol crossing the link during a run beyond which another command was using it. Not
#: zero: the previous run's QUIC connection may still send a few closing packets into a TCP run (12 seen).
FOREIGN_PACKETS = 50
#: The largest IP packet a run's sender puts on the link (a 1500-byte MTU), for the byte bound below.
FULL_PACKET_BYTES = 1500


def reorders(link: Link) -> bool:
    """Whether the link lets packets overtake each other toward the client (jitter that reorders, netem reorder)."""
    d = link.downlink
    return (d.reorder and d.jitter_s > 0) or d.reorder_prob > 0


def disturbed(backend: str, applied: Link, before: counters.Snapshot | None, after: counters.Snapshot | None,
              protocol: Protocol, size: int, others_expected: bool = False) -> None:
    """Raise (the lab's failure: not a result) if another command changed the link or sent traffic over it
    during the run: packets of another IP protocol, or more packets toward the client than twice the object's
    (in 1200-byte packets, retransmissions included, plus 200, plus one for each packet the emulator dropped toward
    the client: nginx 1.26's QUIC, which does not back off, overflowed a 0.3 ms-RTT queue and sent 10 MB as
    17600 packets) and more bytes than twice the object's (plus as many full packets: a sender of small packets is
    not another download); not on a link that reorders, where a sender's
    spurious retransmissions alone exceed it: nginx's QUIC sent 3.7 times the object's packets through 10 ms of
    reordering jitter). Every measuring command should hold the lab lock; not all do."""
    if backend != "linkem":
        return
    now = linkem.current()
    if now != applied:
        raise EnvironmentFailure("the link was changed during the run by another command (not a result)")
    if before and after and not others_expected:
        delta = after - before
        foreign = delta.foreign("udp" if protocol is Protocol.H3 else "tcp")
        # every packet the emulator dropped toward the client is one the sender may send again
        drops = (delta.down.loss_drops or 0) + (delta.down.queue_drops or 0)
        bound = int(2 * size / 1200 + 200) + drops
        # ... and more bytes than that too: many small packets alone are the sender's own (quiche's server sends
        # ~650-byte packets to quiche's client through 1 % loss at 600 ms RTT: up to 20,000 for 10 MiB, 11.8 MB)
        byte_bound = 2 * size + (200 + drops) * FULL_PACKET_BYTES
        if (delta.down.received or 0) > bound and delta.down.bytes > byte_bound and not reorders(applied):
            foreign = max(foreign, (delta.down.received or 0) - bound)
        if foreign > FOREIGN_PACKETS:
            raise EnvironmentFailure(f"{foreign} packets of other traffic crossed the link during the run: another "
                                     "command was using the lab (not a result)")


def loss_columns(delta: counters.Snapshot) -> dict[str, Any]:
    """The link's per-direction counts over the run (host drops: linkem only)."""
    out: dict[str, Any] = {
        "link_down_sent_pkts": delta.down.received, "link_up_sent_pkts": delta.up.received,
        "link_down_loss_drops": delta.down.loss_drops, "link_up_loss_drops": delta.up.loss_drops,
        "link_down_queue_drops": delta.down.queue_drops, "link_up_queue_drops": delta.up.queue_drops}
    if delta.down.host_drops is not None or delta.up.host_drops is not None:
        out["link_host_drops"] = (delta.down.host_drops or 0) + (delta.up.host_drops or 0)
    return out


def _others_expected(rc: RunContext) -> bool:
    """Competing flows or the caller's own probe share the link with this run by design."""
    return rc.other_traffic or (rc.adv is not None and rc.adv.flows is not None)


@dataclass
class LinkCounters(Probe):
    """Bytes and packets over the link during the transfer, drops by cause, and the check that nobody else used
    the link meanwhile (a run someone disturbed is the lab's failure)."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "wire_down_bytes", "wire_up_bytes", "wire_overhead", "link_down_sent_pkts", "link_up_sent_pkts",
        "link_down_loss_drops", "link_up_loss_drops", "link_down_queue_drops", "link_up_queue_drops",
        "link_host_drops")
    start: counters.Snapshot | None = None
    end: counters.Snapshot | None = None

    @property
    def delta(self) -> counters.Snapshot | None:
        return self.end - self.start if self.start and self.end else None

    def before(self, rc: RunContext) -> None:
        now = wire_counters(rc.backend)
        # competing flows (or the caller's own probe) are already on the link by design: nothing to wait out
        self.start = now if _others_expected(rc) else settle(rc.backend, now, rc.state.last_end)

    def after(self, rc: RunContext) -> None:
        self.end = wire_counters(rc.backend)
        rc.state.last_end = self.end

    def settled(self, rc: RunContext) -> None:
        # what the run moves toward the client: every object, twice for resume/0rtt (two connections)
        moved = rc.workload.total_bytes(rc.run.point.size) * (2 if rc.workload.sessions else 1)
        disturbed(rc.backend, rc.applied, self.start, self.end, rc.protocol, moved,
                  others_expected=_others_expected(rc))

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        delta = self.delta
        if delta is None:
            return {}
        down, up = delta.down.bytes, delta.up.bytes
        return {"wire_down_bytes": down, "wire_up_bytes": up,
                "wire_overhead": (down + up) / rc.size if rc.size else None, **loss_columns(delta)}


# --- the sender's congestion control, read back ---------------------------------------------------------------------

@dataclass
class SenderCC(Probe):
    """The congestion control in force at the sender for this run, read back from the server after the
    conditions ended (a paused or stopped server cannot be read) and before its qlog instance stops."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("cc_sender", "cc_sender_source", "cc_server")
    read: tuple[str, str] = ("", "")

    def settled(self, rc: RunContext) -> None:
        self.read = rc.senders.read_back(rc.server, rc.sender, rc.port)

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        algorithm, source = self.read
        # what was in force for this run, not at the sweep's start
        return {"cc_sender": algorithm, "cc_sender_source": source, "cc_server": algorithm or rc.cc_claim}


@dataclass
class SenderSocket(Probe):
    """Captured TCP runs: the server kernel's TCP_INFO of the run's connections as they close (ss's destroy events,
    lab/evidence/sender_socket.py), kept as the run's `sender-socket.txt` for `quiclab explain`. Not a column; a
    helper that cannot listen leaves the file out (the explanation says so), never fails the run. Its output is
    collected at `close`, after the captures stopped: waiting for the connection to close must not keep them open
    past the moment the emulator's counters were read (the explanation compares the two)."""

    watch: sender_socket.SocketWatch | None = None
    ev: capture.Evidence | None = None

    def before(self, rc: RunContext) -> None:
        if rc.ev is None or rc.protocol is Protocol.H3 or "pcap" not in rc.ev.kinds:
            return
        self.watch = sender_socket.SocketWatch(rc.server.container, rc.port or rc.server.port or 443,
                                               workloads.client_ip(rc.run.client))
        self.ev = rc.ev
        if not self.watch.start():
            rc.ev.problems.append(self.watch.problem)
            self.watch = None

    def close(self) -> None:
        if self.watch is None or self.ev is None:
            return
        try:
            text = self.watch.collect()
            if text:
                self.ev.files.append(sender_socket.write(self.ev.folder, text))
            else:
                self.ev.problems.append("the ss helper saw no connection of the client close")
        finally:
            self.watch.stop()
            self.watch = None


# --- from the run's captures ----------------------------------------------------------------------------------------

class PcapGoodput(Probe):
    """From the client-side capture (one object on one connection only): the quic-interop-runner's goodput, and the
    bytes delivered over time since the link was applied (lab/evidence/delivered.py)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("pcap_goodput_bps", "delivered")

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        assert rc.ev is not None and rc.result is not None
        if not rc.result.ok or isinstance(rc.result, WorkloadRun):
            return {}
        goodput, series = pcap_figures(rc.ev, rc.run.server, rc.protocol, rc.run.point.size, rc.port,
                                       rc.applied_unix)
        return {"pcap_goodput_bps": goodput, "delivered": series.to_json() if series else ""}


@dataclass
class SenderResponse(Probe):
    """From the run's evidence: the sender's data and retransmitted bytes, and its loss-response figure
    (loss-response.png beside the captures)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("sender_data_pkts", "sender_data_bytes", "sender_retx_bytes",
                                          "loss_response_source")
    link: LinkCounters | None = None  # the counters drawn into the figure

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        ev = rc.ev
        assert ev is not None
        if not ev.files:
            return {}
        port = rc.port or rc.server.port or 443
        response = sender_view.analyse(ev, rc.server, rc.protocol, port, rc.run.point.size)
        if response is None:
            return {}
        title = (f"{rc.run.key}: {rc.protocol.label} {rc.run.client}→{rc.run.server}, sender cc "
                 f"{so_far.get('cc_sender') or '?'}, {rc.run.point.label}")
        delta = self.link.delta if self.link is not None else None
        ev.files.append(sender_view.figure(response, delta, title, ev.folder / sender_view.FIGURE))
        return {"sender_data_pkts": response.data_packets, "sender_data_bytes": response.data_bytes,
                "sender_retx_bytes": response.retx_bytes, "loss_response_source": response.source}


# --- workloads --------------------------------------------------------------------------------------------------------

class WorkloadColumns(Probe):
    """The workload's columns; per-object times to objects.csv; resume/0rtt proven from the capture (a run whose
    capture does not prove what it asked for fails with the reason: the one probe that may change the outcome)."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "workload", "objects", "page_time_s", "object_p50_s", "connections", "handshakes", "resumed", "early_data",
        "wire_connections")

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        result, w, ev = rc.result, rc.workload, rc.ev
        assert result is not None and ev is not None
        if not isinstance(result, WorkloadRun):
            return {"workload": w.label(), "objects": 1 if result.ok else None, "page_time_s": result.total_s}
        done = [o.done_s for o in result.objects_timed]
        out: dict[str, Any] = {
            "workload": w.label(), "objects": len(result.objects_timed) or None, "page_time_s": result.page_time_s,
            "connections": result.connections, "handshakes": result.handshakes,
            "object_p50_s": median(done) if done and not w.sessions else None,
            "wire_connections": workloads.wire_connections(ev, rc.run.server, workloads.client_ip(rc.run.client))}
        if w.sessions and so_far["status"] == "ok":
            out.update(workloads.prove_sessions(rc.run.client, result, ev))
        if rc.folder is not None and result.objects_timed and so_far["status"] != "unsupported":
            objects.append(rc.folder, rc.run.key, rc.started_at, result.objects_timed)
        return out


# --- adverse conditions ---------------------------------------------------------------------------------------------

class AdverseEvents(Probe):
    """What the run's faults, competing flows and path change did (lab/adverse; nothing when the run had none)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("faults_actual", "competing", "jain_index", "probe_rtt_ms_p50",
                                          "probe_rtt_ms_p95", "path_change")

    def columns(self, rc: RunContext, so_far: Mapping[str, Any]) -> dict[str, Any]:
        assert rc.adv is not None and rc.ev is not None
        return rc.adv.columns(so_far["status"] == "ok", so_far["failure"], rc.ev.files)


def probes() -> list[Probe]:
    """A fresh set for one run, in the order their columns are computed."""
    link = LinkCounters()
    return [link, SenderCC(), SenderSocket(), PcapGoodput(), SenderResponse(link=link), WorkloadColumns(),
            AdverseEvents()]


#: Every column some probe owns (a unit test checks they are RunRecord columns and owned once).
PROBE_COLUMNS: tuple[str, ...] = tuple(c for p in (LinkCounters, SenderCC, SenderSocket, PcapGoodput,
                                                    SenderResponse, WorkloadColumns, AdverseEvents)
                                       for c in p.COLUMNS)

