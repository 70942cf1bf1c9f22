"""`quiclab probe`: a user's measurement files -> one measurement folder, and what those files can and cannot tell
about the path.

Each file's kind is told from its content: a pcap or pcapng capture; a flent data file (gzipped JSON); iperf3's or
irtt's JSON; a mahimahi trace (one millisecond timestamp a line: a recorded capacity, e.g. by Saturator; `.up` in
its name makes it the uplink's); else ping's text output."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lab.calibrate import flent, tools
from lab.calibrate.measurements import Flow, IdleKind, IdleRtt, Input, Measurements, TraceInput
from lab.calibrate.pcapfile import GZIP_MAGIC, is_capture, is_gzipped_capture, read_segments
from lab.calibrate.tcpflows import MIN_BULK_BYTES, bulk_flows
from lab.errors import UsageError
from lab.link.spec import read_trace
from lab.sizes import format_size

_TRACE_LINE = re.compile(r"^\s*\d+\s*$")
MIN_JITTER_SAMPLES = 10
TRACE_MIN_S = 10.0


def probe(paths: list[Path]) -> Measurements:
    m = Measurements(inputs=[])
    for path in paths:
        _read_one(path, m)
    _join_captured(m)
    m.can_tell, m.cannot_tell = assess(m)
    return m


def _join_captured(m: Measurements) -> None:
    """A capture of an iperf3 run (the same connection: its ports) and that run's file are one flow: the file's
    (it names the congestion control and, from the sender's side, its RTT and retransmissions) with the capture's
    packet arrivals and unseen stretches; counted once, not twice."""
    by_ports = {(f.ports, f.direction): f for f in m.flows if f.ports and f.cc is not None and f.arrivals is None}
    joined: list[tuple[str, str]] = []
    for f in list(m.flows):
        twin = by_ports.get((f.ports, f.direction)) if f.arrivals and f.cc is None else None
        if twin is not None:
            twin.arrivals, twin.unseen = f.arrivals, f.unseen
            m.flows.remove(f)
            joined.append((f.source, twin.source))
    for captured, run in joined:
        for i in m.inputs:
            if i.file == captured:
                i.note += f"; the packets of {run}'s run (joined to it)"


def _read_one(path: Path, m: Measurements) -> None:
    name = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {name!r}: {e.strerror}") from None
    if not raw.strip():
        raise UsageError(f"{name}: empty file: nothing measured in it (expected a pcap, ping or irtt output, "
                         "iperf3 --json, a .flent.gz or a mahimahi trace)")
    if is_capture(raw) or is_gzipped_capture(raw):
        _pcap(path, m)
    elif raw[:2] == GZIP_MAGIC or name.endswith((".flent", ".flent.gz")):
        run = flent.read(path)
        m.inputs.append(Input(file=name, kind="flent", note=f"flent {run.test}"))
        m.flows.append(run.flow)
        _idle(m, run.idle_rtts_s, name, "flent")
    elif raw.lstrip()[:1] == b"{":
        _json(path, raw, m)
    else:
        _text(path, raw, m)


def _pcap(path: Path, m: Measurements) -> None:
    name = str(path)
    packets, segments = read_segments(path)
    if packets == 0:
        raise UsageError(f"{name}: a capture without packets: no download in it")
    found = bulk_flows(segments, name)
    if not found.flows:
        raise UsageError(f"{name}: no TCP download in it (a TCP connection carrying at least "
                         f"{format_size(MIN_BULK_BYTES)} one way): {packets} packets, {found.connections} TCP "
                         f"connection(s), the largest carried {format_size(found.largest_bytes)}")
    m.inputs.append(Input(file=name, kind="pcap", note=f"{len(found.flows)} bulk TCP transfer(s)"))
    m.flows += found.flows
    _idle(m, found.handshake_rtts_s, name, "handshake")


def _json(path: Path, raw: bytes, m: Measurements) -> None:
    name = str(path)
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{name}: not valid JSON ({getattr(e, 'msg', 'not UTF-8')})") from None
    if tools.is_irtt(data):
        rtts = tools.irtt_rtts(data, name)
        m.inputs.append(Input(file=name, kind="irtt", note=f"{len(rtts)} round trips"))
        _idle(m, rtts, name, "irtt")
    elif tools.is_iperf3(data):
        flow = tools.iperf3_flow(data, name)
        m.inputs.append(Input(file=name, kind="iperf3", note=flow.label + f", {flow.direction}"))
        m.flows.append(flow)
    else:
        raise UsageError(f"{name}: JSON that is neither iperf3's (--json: start, intervals, end) nor irtt's "
                         "(round_trips)")


def _text(path: Path, raw: bytes, m: Measurements) -> None:
    name = str(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{name}: neither a capture nor text (ping output, a mahimahi trace)") from None
    first = next(line for line in text.splitlines() if line.strip())
    if _TRACE_LINE.match(first):
        times = read_trace(path)  # (its errors name the file: timestamps going backwards, ...)
        way = "up" if ".up" in path.name else "down"
        m.inputs.append(Input(file=name, kind="trace", note=f"{way}link capacity, {times[-1] / 1000:g} s"))
        m.traces.append(TraceInput(file=name, direction=way, trace_ms=times))
        return
    rtts = tools.ping_rtts(text, name)
    m.inputs.append(Input(file=name, kind="ping", note=f"{len(rtts)} replies"))
    _idle(m, rtts, name, "ping")


def _idle(m: Measurements, rtts: list[float], source: str, kind: IdleKind) -> None:
    if rtts:
        m.idle.append(IdleRtt(source=source, kind=kind, rtt_s=[round(r, 7) for r in rtts]))


def assess(m: Measurements) -> tuple[list[str], list[str]]:
    """What these measurements can tell about the path, and what they cannot (each a sentence)."""
    can: list[str] = []
    cannot: list[str] = []
    down = [f for f in m.flows if f.direction == "down"]
    traces = {t.direction for t in m.traces}
    _rate(down, "down" in traces, can, cannot)
    _base_rtt(m, down, can, cannot)
    if any(f.rtt for f in down):
        can.append("the queue size, from how far the RTT rises while a download fills the link")
    else:
        cannot.append("the queue size: no RTT samples under load (a capture without TCP timestamps, or iperf3 -R, "
                      "whose RTT stays on the server's side unless --get-server-output fetches it from a server "
                      "started with --json; ping or irtt running during the downloads would do)")
    _loss(down, can, cannot)
    if len(m.idle_rtts(series_only=True)) >= MIN_JITTER_SAMPLES:
        can.append("the jitter, from the spread of the RTT without load")
    else:
        cannot.append(f"the jitter: fewer than {MIN_JITTER_SAMPLES} RTT samples without load (ping or irtt output "
                      "gives them)")
    ccs = sorted({f.cc for f in m.flows if f.cc})
    if len(ccs) >= 2:
        can.append(f"a search in the lab over candidate links, with {len(ccs)} senders: {', '.join(ccs)}")
    else:
        unnamed = " (a capture does not say which congestion control the server ran)" if any(
            f.cc is None for f in m.flows) else ""
        cannot.append(f"the lab search over candidate links (Pantheon's): it needs two or more senders of known "
                      f"congestion control; these measurements name {len(ccs) or 'none'}{unnamed}")
    if "up" not in traces and not any(f.direction == "up" for f in m.flows):
        cannot.append("the uplink's rate: nothing was sent upwards (the calibrated link leaves the uplink unlimited)")
    return can, cannot


def _rate(down: list[Flow], trace: bool, can: list[str], cannot: list[str]) -> None:
    if trace:
        can.append("the downlink's capacity over time, from a recorded trace")
    if not down:
        if not trace:
            cannot.append("the downlink's rate: no download in these measurements (a pcap of a download, iperf3 -R, "
                          "flent tcp_download or rrul)")
        return
    can.append(f"the downlink's rate, from {len(down)} download(s): each one's delivery rate is a lower bound of the "
               "capacity wherever its sender did not fill the link (slow start, after a loss)")
    if max(f.duration_s for f in down) >= TRACE_MIN_S:
        can.append("a rate trace of the downlink (mahimahi format) where its delivery rate varies")
    else:
        cannot.append(f"a rate trace: no download lasted {TRACE_MIN_S:g} s")


def _base_rtt(m: Measurements, down: list[Flow], can: list[str], cannot: list[str]) -> None:
    if m.idle:
        sources = "; ".join(f"{len(i.rtt_s)} from {i.kind} ({i.source})" for i in m.idle)
        can.append(f"the base RTT, from RTT samples without load: {sources}")
    elif any(f.rtt for f in down):
        can.append("the base RTT only from RTT samples under load (their lowest): too high if the queue never "
                   "emptied")
    else:
        cannot.append("the base RTT: no RTT samples at all (give ping or irtt output, or a capture with the TCP "
                      "handshake)")


def _loss(down: list[Flow], can: list[str], cannot: list[str]) -> None:
    timed = [f for f in down if f.retransmit_times_s is not None and f.rtt]
    counted = [f for f in down if f.retransmits is not None]
    if timed:
        can.append("random loss apart from queue overflow: retransmissions while the RTT is far below its peak")
    elif counted:
        n = sum(f.retransmits or 0 for f in counted)
        cannot.append(f"random loss apart from queue overflow: {n} retransmission(s) but no RTT samples beside them "
                      "to tell a full queue from random loss (their rate is only an upper bound of random loss)")
    elif down:
        cannot.append("loss: these inputs do not record retransmissions (flent does not)")
