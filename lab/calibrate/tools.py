"""The output of the usual path tools, read into the measurement folder's terms: ping's text (Linux iputils or BSD,
with or without -D), irtt's JSON (`irtt client -o FILE`), iperf3's JSON (`iperf3 --json`, TCP, either direction).
Errors name the file and what is missing."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from lab.calibrate.measurements import Flow
from lab.errors import UsageError

_PING = re.compile(r"^(?:\[(?P<at>\d+(?:\.\d+)?)\]\s*)?\d+ bytes from .*?\btime[=<](?P<ms>\d+(?:\.\d+)?)\s*ms",
                   re.MULTILINE)
NS = 1e-9
US = 1e-6
DEFAULT_MSS = 1448


def ping_rtts(text: str, name: str) -> list[float]:
    """The RTT of every reply line, in seconds."""
    rtts = [float(m.group("ms")) / 1000 for m in _PING.finditer(text)]
    if not rtts:
        raise UsageError(f"{name}: no ping replies in it (expected lines such as "
                         "'64 bytes from 192.0.2.1: icmp_seq=1 ttl=57 time=20.1 ms')")
    return rtts


def is_irtt(data: Any) -> bool:
    return isinstance(data, dict) and "round_trips" in data


def is_iperf3(data: Any) -> bool:
    return isinstance(data, dict) and "start" in data and ("intervals" in data or "end" in data or "error" in data)


def irtt_rtts(data: dict[str, Any], name: str) -> list[float]:
    """The RTT of every round trip irtt did not lose, in seconds (irtt writes nanoseconds)."""
    rtts = []
    for rt in data.get("round_trips") or []:
        rtt = (rt.get("delay") or {}).get("rtt") if isinstance(rt, dict) else None
        if str(rt.get("lost", "false")) == "false" and isinstance(rtt, int | float) and rtt > 0:
            rtts.append(rtt * NS)
    if not rtts:
        raise UsageError(f"{name}: an irtt run without a completed round trip (every one lost, or none sent)")
    return rtts


def iperf3_flow(data: dict[str, Any], name: str) -> Flow:
    """One iperf3 TCP run as a flow: its intervals' rates; the sender's RTT and retransmissions per interval when
    the file is the sender's side (a plain run's client; with -R that is the server, whose side the client's file
    has only in its end totals, or whole with --get-server-output when that server runs with --json)."""
    if data.get("error"):
        raise UsageError(f"{name}: a failed iperf3 run (iperf3 said: {' '.join(str(data['error']).split())}): "
                         "it has no measurement")
    test = (data.get("start") or {}).get("test_start") or {}
    protocol = str(test.get("protocol", "TCP"))
    if protocol.upper() != "TCP":
        raise UsageError(f"{name}: an iperf3 {protocol} run: a TCP run is needed (its congestion control is what "
                         "the calibration compares)")
    intervals = [i for i in data.get("intervals") or [] if isinstance(i, dict) and isinstance(i.get("sum"), dict)]
    if not intervals:
        raise UsageError(f"{name}: an iperf3 run without intervals: nothing was measured")
    end = data.get("end") or {}
    rate: list[tuple[float, float, float]] = []
    rtt: list[tuple[float, float]] = []
    retx_times: list[float] = []
    retx_known = True
    for i in intervals:
        s = i["sum"]
        start, stop = float(s.get("start", 0)), float(s.get("end", 0))
        if stop <= start:
            continue
        rate.append((round(start, 6), round(stop, 6), float(s.get("bits_per_second", 0))))
        samples = [st["rtt"] * US for st in i.get("streams") or [] if isinstance(st.get("rtt"), int | float)
                   and st["rtt"] > 0]
        if samples:
            rtt.append((round((start + stop) / 2, 6), sum(samples) / len(samples)))
        if isinstance(s.get("retransmits"), int):
            retx_times += [round((start + stop) / 2, 6)] * s["retransmits"]
        else:
            retx_known = False
    server = data.get("server_output_json")
    if not rtt and isinstance(server, dict) and server.get("intervals"):
        # the client of a -R run with --get-server-output against a server run with --json: the server's whole JSON
        # document (its intervals with the sender's rtt, us, per stream) is in the client's file. A server without
        # --json sends `server_output_text` instead (its text lines: Retr and Cwnd, no RTT): nothing to read there.
        side = iperf3_flow(server, f"{name} (the server's output in it)")
        rtt, retx_times, retx_known = side.rtt, side.retransmit_times_s or [], side.retransmit_times_s is not None
    reverse = bool(test.get("reverse"))
    if not reverse and isinstance(server, dict) and server.get("intervals"):
        # an upload's client is its sender: its intervals count what it wrote, which runs ahead of what the link
        # delivered by a socket buffer (through an outage too); the receiving server's intervals are the delivery
        with contextlib.suppress(UsageError):
            rate = iperf3_flow(server, f"{name} (the server's output in it)").rate or rate
    sent = end.get("sum_sent") or {}
    received = end.get("sum_received") or {}
    total = sent.get("retransmits") if isinstance(sent.get("retransmits"), int) else None
    bytes_ = int(received.get("bytes") or sum((i["sum"].get("bytes") or 0) for i in intervals))
    cc = end.get("sender_tcp_congestion") or test.get("congestion") or None
    streams = int(test.get("num_streams", 1) or 1)
    return Flow(
        source=name, label=f"iperf3 {cc or 'unknown cc'}{f' x{streams}' if streams > 1 else ''}",
        direction="down" if reverse else "up", cc=str(cc) if cc else None,
        duration_s=round(rate[-1][1] - rate[0][0], 6) if rate else 0.0, bytes=bytes_, rate=rate, rtt=rtt,
        retransmits=len(retx_times) if retx_known else total, retransmit_times_s=retx_times if retx_known else None,
        segments=max(1, round(bytes_ / DEFAULT_MSS)), ports=_ports(data, reverse))


def _ports(data: dict[str, Any], reverse: bool) -> tuple[int, int] | None:
    """The data connection's (sender's port, receiver's port) from `start.connected` (one stream only; with -R the
    far end sends)."""
    conns = (data.get("start") or {}).get("connected") or []
    if len(conns) != 1 or not isinstance(conns[0], dict):
        return None
    local, remote = conns[0].get("local_port"), conns[0].get("remote_port")
    if not isinstance(local, int) or not isinstance(remote, int):
        return None
    return (remote, local) if reverse else (local, remote)
