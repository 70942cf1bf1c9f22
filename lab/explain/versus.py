"""Two methods at one point, compared (`quiclab explain FOLDER --versus A,B --point P`, docs/explain.md): the
difference of their transfer times split into handshake, loss recovery and the rest, from the delivered-bytes-vs-time
curves of one run of each (sans-IO: tshark's rows of the client-side capture in, curves and components out).

Per run, from the client's side of the emulator (the router's client-side capture, decrypted), times from the
client's first packet:
- the curve: server -> client payload (TCP: the byte stream by sequence number; QUIC: STREAM frame bytes, summed
  over streams) delivered in order (`in_order`: no hole below it) and received at all (`received`);
- a *hole episode*: a maximal interval during which the client holds bytes above a hole (received > in order),
  from the arrival that opened the first hole to the arrival that filled the last;
- handshake = the client's first packet to the packet carrying its request;
- loss recovery = per episode, its length minus the time the downlink needed for the packets it delivered (their
  wire bytes at the configured rate): the time the link sat unused while a hole was open; plus the link time of the
  re-sent bytes (arrivals below the highest offset already received), wherever they fall;
- rest = the run's transfer time (runs.csv `total_s`) - handshake - loss recovery.
The difference rows are B - A per component; they add up to B's total - A's total by construction.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from lab.errors import UsageError
from lab.explain.rows import H2_HEADERS, H3_HEADERS, Row, client_of
from lab.quantiles import median, middle
from lab.results.schema import RunRecord

#: IP + TCP header bytes per segment on the wire (20 + 20 + 12 bytes of timestamps), for the link time of TCP data
TCP_WIRE_OVERHEAD = 52
#: IP header bytes per QUIC datagram (its UDP length is in the rows)
UDP_WIRE_OVERHEAD = 20
PROTOCOLS = ("h1", "h2", "h3")


@dataclass
class Arrival:
    """One server packet reaching the client's side of the emulator."""

    t: float  # seconds from the client's first packet
    ranges: list[tuple[int, int, int]]  # (stream id, 0 for TCP; start offset; end offset) of its payload
    wire_bytes: int


@dataclass
class Trace:
    """What the versus comparison reads from one run's client-side capture."""

    request_s: float | None  # the client's first packet -> its request
    arrivals: list[Arrival] = field(default_factory=list)


def trace(rows: Sequence[Row], transport: str) -> Trace:
    """tshark's rows of a client-side capture (decrypted) -> the request time and the server's arrivals."""
    if not rows:
        return Trace(None)
    client = client_of(rows) or rows[0].src
    t0 = next(r.time for r in rows if r.src == client)
    req = next((r for r in rows if r.src == client and _is_request(r, transport)), None)
    out = Trace(None if req is None else req.time - t0)
    for r in rows:
        if r.src == client:
            continue
        if transport == "tcp":
            rng = [(0, r.tcp_seq - 1, r.tcp_seq - 1 + r.tcp_len)] if r.tcp_len > 0 else []
            wire = r.tcp_len + TCP_WIRE_OVERHEAD
        else:
            rng = [(sid, off, off + n) for sid, off, n in r.streams() if n > 0]
            wire = r.udp_len + UDP_WIRE_OVERHEAD
        out.arrivals.append(Arrival(r.time - t0, rng, wire))
    return out


def _is_request(r: Row, transport: str) -> bool:  # as lab/explain/analyze.py finds the request
    if transport == "tcp":
        return H2_HEADERS in r.h2_types or r.http_request
    return H3_HEADERS in r.h3_types or any(sid % 4 == 0 for sid in r.stream_ids if r.short)


@dataclass
class Curve:
    t: list[float] = field(default_factory=list)  # seconds from the client's first packet, one point per arrival
    in_order: list[int] = field(default_factory=list)  # bytes delivered without a hole below them (all streams)
    received: list[int] = field(default_factory=list)  # bytes received at all (each byte once)


@dataclass
class Episode:
    start: float  # the arrival that opened a hole
    end: float  # the arrival that filled the last one
    link_s: float  # the link time of the packets that arrived in (start, end]
    stalled_s: float  # max(0, end - start - link_s)


@dataclass
class Analysis:
    curve: Curve
    episodes: list[Episode]
    resent_bytes: int  # wire bytes of arrivals that re-sent bytes below the highest offset received
    last_byte_s: float | None  # the last new byte's arrival


class _Stream:
    """One stream's received bytes: everything below `contig`, and above it `pending`, sorted disjoint intervals
    that do not touch (merged as they arrive, so a long-open hole costs O(log n) per packet, not O(n))."""

    def __init__(self) -> None:
        self.contig = 0
        self.highest = 0
        self.pending: list[tuple[int, int]] = []  # received intervals above a hole
        self.got = 0  # bytes received (each once)

    def add(self, a: int, b: int) -> bool:
        """Receive [a, b); True if it re-sent bytes below the highest offset received."""
        resent = a < self.highest
        self.highest = max(self.highest, b)
        s, e = max(a, self.contig), b
        if s >= e:
            return resent
        # the pending intervals that overlap or touch [s, e): from the last one starting at or before s
        i = bisect.bisect_right(self.pending, (s, float("inf"))) - 1
        if i < 0 or self.pending[i][1] < s:
            i += 1
        j = i
        covered = 0
        while j < len(self.pending) and self.pending[j][0] <= e:
            ps, pe = self.pending[j]
            covered += max(0, min(pe, e) - max(ps, s))
            j += 1
        self.got += (e - s) - covered  # count each byte once
        if i < j:
            s, e = min(s, self.pending[i][0]), max(e, self.pending[j - 1][1])
        self.pending[i:j] = [(s, e)]
        if self.pending[0][0] <= self.contig:
            self.contig = max(self.contig, self.pending.pop(0)[1])
        return resent

    @property
    def hole(self) -> bool:
        return bool(self.pending)


def analyse(arrivals: Sequence[Arrival], rate_bps: float | None, after: float = 0.0) -> Analysis:
    """The curve, the hole episodes and the re-sent bytes of one run's arrivals (in capture order). Episodes and
    re-sent bytes count only after `after` (the request: what comes before is the handshake's), an episode open at
    that time from then on."""
    streams: dict[int, _Stream] = {}
    curve = Curve()
    episodes: list[Episode] = []
    resent = 0
    start: float | None = None
    busy = 0.0
    last_new: float | None = None
    per_byte = 8 / rate_bps if rate_bps else 0.0
    for a in arrivals:
        was_open = any(s.hole for s in streams.values())
        got_before = sum(s.got for s in streams.values())
        re = False
        for sid, x, y in a.ranges:
            re |= streams.setdefault(sid, _Stream()).add(x, y)
        if re and a.t > after:
            resent += a.wire_bytes
        now_open = any(s.hole for s in streams.values())
        if was_open and start is not None and a.t > max(start, after):
            busy += a.wire_bytes * per_byte
        if not was_open and now_open:
            start, busy = a.t, 0.0
        elif was_open and not now_open and start is not None:
            if a.t > after:
                s0 = max(start, after)
                episodes.append(Episode(s0, a.t, busy, max(0.0, a.t - s0 - busy)))
            start = None
        got = sum(s.got for s in streams.values())
        if got > got_before:
            last_new = a.t
        if a.ranges:
            curve.t.append(a.t)
            curve.in_order.append(sum(s.contig for s in streams.values()))
            curve.received.append(got)
    if start is not None and curve.t and curve.t[-1] > after:  # a hole never filled: the episode runs to the end
        end, s0 = curve.t[-1], max(start, after)
        episodes.append(Episode(s0, end, busy, max(0.0, end - s0 - busy)))
    return Analysis(curve, episodes, resent, last_new)


class Components(BaseModel):
    """One method's side: its runs at the point, the run explained and its transfer time split in three (ms)."""

    method: str
    runs: int  # ok runs of the method at the point that have captures
    median_ms: float  # their median transfer time (runs.csv total_s)
    run_key: str  # the run explained: the median run (the lower of the two middle ones for an even count)
    total_ms: float  # its transfer time (runs.csv total_s)
    handshake_ms: float
    loss_recovery_ms: float
    rest_ms: float
    stalled_ms: float  # loss recovery's part from the hole episodes
    resent_ms: float  # ... and from the re-sent bytes' link time
    episodes: int
    resent_bytes: int
    last_byte_ms: float | None  # the last new byte at the client's side (capture), beside total_ms as a check


class Versus(BaseModel):
    point: str
    a: Components
    b: Components
    median_difference_ms: float  # b.median_ms - a.median_ms
    difference_ms: float  # b.total_ms - a.total_ms: what the rows below add up to
    handshake_ms: float  # b - a, per component
    loss_recovery_ms: float
    rest_ms: float
    rate_bps: float | None
    curves_csv: str = ""
    notes: list[str] = []


def components(method: str, run_key: str, totals_s: Sequence[float], total_s: float, tr: Trace,
               rate_bps: float | None) -> tuple[Components, Analysis]:
    """One method's components from its median run's trace (`totals_s`: the transfer times of all its runs)."""
    an = analyse(tr.arrivals, rate_bps, tr.request_s or 0.0)
    stalled = sum(e.stalled_s for e in an.episodes)
    resent = an.resent_bytes * 8 / rate_bps if rate_bps else 0.0
    hs = tr.request_s or 0.0
    loss = stalled + resent
    ms = 1000.0
    c = Components(method=method, runs=len(totals_s), median_ms=round(median(totals_s) * ms, 3),
                   run_key=run_key, total_ms=round(total_s * ms, 3), handshake_ms=round(hs * ms, 3),
                   loss_recovery_ms=round(loss * ms, 3), rest_ms=round((total_s - hs - loss) * ms, 3),
                   stalled_ms=round(stalled * ms, 3), resent_ms=round(resent * ms, 3), episodes=len(an.episodes),
                   resent_bytes=an.resent_bytes,
                   last_byte_ms=None if an.last_byte_s is None else round(an.last_byte_s * ms, 3))
    return c, an


def versus(point: str, a: Components, b: Components, rate_bps: float | None) -> Versus:
    v = Versus(point=point, a=a, b=b, median_difference_ms=round(b.median_ms - a.median_ms, 3),
               difference_ms=round(b.total_ms - a.total_ms, 3), handshake_ms=round(b.handshake_ms - a.handshake_ms, 3),
               loss_recovery_ms=round(b.loss_recovery_ms - a.loss_recovery_ms, 3), rest_ms=0.0, rate_bps=rate_bps)
    # rest by subtraction, so that the three rows add up to the difference exactly (after rounding)
    v.rest_ms = round(v.difference_ms - v.handshake_ms - v.loss_recovery_ms, 3)
    if a.runs % 2 == 0 or b.runs % 2 == 0:
        v.notes.append("an even number of runs: the run explained is the lower of the two middle ones, so the "
                       "difference explained is not exactly the median difference (both are shown)")
    if not rate_bps:
        v.notes.append("no configured rate: loss recovery counts the hole episodes whole and no re-send time")
    return v


def median_index(totals: Sequence[float]) -> int:
    """The index of the median run (the lower of the two middle ones for an even count)."""
    return middle(sorted(range(len(totals)), key=lambda i: totals[i]))


def csv_rows(method: str, run_key: str, curve: Curve) -> list[list[str]]:
    return [[method, run_key, f"{t * 1000:.3f}", str(i), str(r)]
            for t, i, r in zip(curve.t, curve.in_order, curve.received, strict=True)]


CSV_HEADER = ["method", "run_key", "t_ms", "in_order_bytes", "received_bytes"]


def parse_method(text: str) -> tuple[str, str | None, str | None]:
    """'h2' or 'h2:curl>nginx' -> (protocol, client, server); ValueError if neither."""
    proto, _, pair = text.strip().partition(":")
    if proto not in PROTOCOLS:
        raise ValueError(text)
    if not pair:
        return proto, None, None
    client, sep, server = pair.partition(">")
    if not sep or not client or not server:
        raise ValueError(text)
    return proto, client, server


Method = tuple[str, list[RunRecord]]  # its label and its ok runs at the point that have captures


def select(records: Sequence[RunRecord], versus_text: str, point: str | None,
           captured: Callable[[RunRecord], bool]) -> tuple[str, Method, Method]:
    """The point and the two methods of `--versus A,B --point P` from a sweep's records (`captured`: whether a
    run has a client-side capture); bad values are a UsageError naming the value and the allowed ones."""
    points = list(dict.fromkeys(r.point_label for r in records))
    if point is None:
        if len(points) != 1:
            raise UsageError(f"--versus needs --point: the points of this sweep are {', '.join(points)}")
        point = points[0]
    if point not in points:
        raise UsageError(f"invalid --point {point!r}: the points of this sweep are {', '.join(points)}")
    here = [r for r in records if r.point_label == point]
    pairs = {p: sorted({(r.client, r.server) for r in here if r.protocol == p}) for p in PROTOCOLS}
    allowed = [p for p in PROTOCOLS if len(pairs[p]) == 1] + [
        f"{p}:{c}>{s}" for p in PROTOCOLS for c, s in pairs[p]]
    parts = [x.strip() for x in versus_text.split(",")]
    if len(parts) != 2 or parts[0] == parts[1]:
        raise UsageError(f"invalid --versus {versus_text!r}: two different methods A,B, each a protocol or "
                         f"protocol:client>server; at {point}: {', '.join(allowed)}")
    out: list[Method] = []
    for text in parts:
        try:
            proto, client, server = parse_method(text)
        except ValueError:
            proto, client, server = "", None, None
        if client is None and proto and len(pairs[proto]) == 1:
            client, server = pairs[proto][0]
        if (proto, client, server) == ("", None, None) or (client, server) not in pairs.get(proto, []):
            raise UsageError(f"invalid --versus method {text!r}: at {point} the methods are {', '.join(allowed)} "
                             "(protocol:client>server where a protocol has several pairs)")
        runs = [r for r in here if (r.protocol, r.client, r.server) == (proto, client, server)
                and r.status == "ok" and r.total_s is not None and captured(r)]
        if not runs:
            raise UsageError(f"invalid --versus method {text!r}: no ok run of it at {point} has captures "
                             "(sweep with --capture pcap,keylog)")
        other = next((r.workload for r in runs if (r.workload or "bulk") != "bulk"), None)
        if other is not None:  # one curve per run: several connections' byte streams would overlap
            raise UsageError(f"invalid --versus method {text!r}: its runs at {point} have workload {other!r}; "
                             "--versus explains bulk transfers (one object over one connection) only")
        out.append((text, runs))
    return point, out[0], out[1]
