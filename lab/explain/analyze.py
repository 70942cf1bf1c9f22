"""One run's explanation from its evidence (sans-IO: packets and tshark rows in, an Explanation out)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lab.evidence.pcap import Packet
from lab.explain import closing, hol, limits, ss
from lab.explain import path as pathmod
from lab.explain.model import (
    Direction,
    Explanation,
    Figure,
    Handshake,
    LossRecovery,
    PathTruth,
    Reason,
    Window,
)
from lab.explain.rows import H2_HEADERS, H3_HEADERS, HS_FINISHED, QUIC_RETRY, Row, client_of

#: A gap between two client packets before the request of at least this share of the minimum RTT is a round trip
#: the client spent waiting for the server.
WAIT_SHARE = 0.8
#: An episode's bytes in flight fell if its peak one RTT after detection is below this share of the peak before.
FLIGHT_FELL = 0.85
EXPECTED_ROUND_TRIPS = {"tcp": 2, "quic": 1}


@dataclass
class RunInputs:
    run_key: str
    protocol: str
    client_side: list[Packet] | None  # the router's client-side capture (None: there is none)
    server_side: list[Packet] | None
    client_rows: list[Row]  # tshark's rows of client-side.pcap, decrypted with keys.log
    server_rows: list[Row]
    configured_rtt_s: float | None = None
    client_extras: list[bytes] = field(default_factory=list)  # per packet: IP ID and TCP options (path.header_extras)
    server_extras: list[bytes] = field(default_factory=list)
    counter_drops: tuple[int | None, int | None] = (None, None)  # the emulator's drops (down, up) over the run
    problems: list[str] = field(default_factory=list)  # e.g. a capture cut short: the run is not explainable
    sender_socket: str | None = None  # sender-socket.txt (ss as the sender's connections closed), TCP only
    failed: bool = False  # the run did not transfer (runs.csv status failed or timeout)
    competing: bool = False  # competing flows shared the emulator (runs.csv `competing`): its counters hold theirs


#: the emulator's drops beside a run with competing flows (they are the sum of every flow's drops)
SHARED_NOTE = ("every flow's drops: competing flows shared the emulator, so the captures' count may be lower but "
               "not higher")

#: a run's last moments, beyond half its RTT, in which the emulator's counters (read as the transfer ends) and the
#: captures (stopped after it) may see a drop differently: the closing packets of the connection
TAIL_S = 0.1


def _fig(value: float | int | None, unit: str = "", source: str = "pcap", note: str = "") -> Figure:
    if isinstance(value, float):
        value = round(value, 3)
    return Figure(value=value, unit=unit, source=source, note=note)  # type: ignore[arg-type]


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1000


def explain(inp: RunInputs) -> Explanation:
    transport = "quic" if inp.protocol == "h3" else "tcp"
    bad = Explanation.unexplainable(inp.run_key, inp.protocol, "")
    if inp.problems:
        bad.why = "; ".join(inp.problems)
        return bad
    if not inp.client_side or not inp.client_rows:
        bad.why = "no client-side capture with packets (was the run captured with --capture pcap?)"
        return bad
    client_ip = client_of(inp.client_rows) or inp.client_side[0].src
    # from the client's first packet (a capture may begin with the previous run's stray server packets)
    t0 = next((p.time for p in inp.client_side if p.src == client_ip), inp.client_side[0].time)
    c_from = [r for r in inp.client_rows if r.src == client_ip]
    req = next((r for r in c_from if _is_request(r, transport)), None)
    if req is None:
        said = None
        if transport == "quic":
            said = (closing.stalled_handshake(inp.client_rows, client_ip)
                    or closing.error_close(inp.client_rows, client_ip, None))
        bad.why = said or ("the capture could not be decrypted: no HTTP request is visible in it (keys.log missing, "
                           "empty or not this connection's)")
        return bad
    down = up = None
    if inp.server_side:
        if len(inp.server_side) != len(inp.server_rows):
            bad.why = (f"server-side.pcap: tshark read {len(inp.server_rows)} frames, the pcap reader "
                       f"{len(inp.server_side)}: the rows cannot be lined up with the packets")
            return bad
        down, up = pathmod.directions(inp.client_side, inp.server_side, client_ip, inp.client_extras,
                                      inp.server_extras, horizon_s=(inp.configured_rtt_s or 0.0) / 2 + TAIL_S)
    min_rtt = _min_rtt(inp, client_ip, transport)
    hs = _handshake(inp, transport, client_ip, t0, req, min_rtt, down, up)
    pt = _path(inp, min_rtt, down, up)
    e = Explanation(run_key=inp.run_key, protocol=inp.protocol, transport=transport,  # type: ignore[arg-type]
                    status="explained", handshake=hs, path=pt)
    invalid = [f"{name}: {d.dropped.value} drops counted from the captures, the emulator counted "
               f"{d.emulator_dropped.value}" for name, d in (("down", pt.down), ("up", pt.up))
               if d is not None and d.agree is False]
    if invalid:
        e.status, e.why = "invalid", ("the captures and the emulator's counters disagree by more than "
                                      f"{pathmod.AGREEMENT:.0%}: " + "; ".join(invalid))
        return e
    if down is not None and inp.server_side is not None:
        arrival = _arrivals(inp.server_side, down, client_ip)
        losses = _losses(inp, transport, client_ip, arrival, t0, min_rtt)
        e.loss = losses.record
        e.window = _window(inp, transport, client_ip, losses, min_rtt, t0)
    e.head_of_line, _ = hol.head_of_line(inp.protocol, inp.client_rows, inp.server_rows, client_ip)
    if transport == "tcp" and inp.sender_socket:
        e.sender_kernel = ss.kernel(ss.parse(inp.sender_socket))
    e.reasons = _reasons(e, inp)
    close = closing.first_error(inp.client_rows, client_ip) if transport == "quic" else None
    if close is not None:  # the server's error close outranks how the transfer went, and so does the client's
        # when the run failed (its close is the failure: e.g. quinn's reassembly limit); else the client's comes last
        text = closing.describe(close, inp.client_rows, client_ip, req.time)
        first = close.side == "server" or inp.failed
        e.reasons.insert(0 if first else len(e.reasons), Reason(text=text, cost_ms=None))
    return e


def _is_request(r: Row, transport: str) -> bool:
    if transport == "tcp":
        return H2_HEADERS in r.h2_types or r.http_request
    return H3_HEADERS in r.h3_types or any(sid % 4 == 0 for sid in r.stream_ids if r.short)


def _is_response(r: Row, transport: str) -> bool:
    if transport == "tcp":
        return H2_HEADERS in r.h2_types or r.http_response
    return H3_HEADERS in r.h3_types


def _min_rtt(inp: RunInputs, client_ip: str, transport: str) -> float | None:
    """The smallest round trip seen: the first client packet to the server's first answer (client side), and
    per-packet acknowledgment times (TCP: tshark's ack_rtt on both captures; QUIC: 1-RTT packet numbers and the
    client's largest acknowledged, server side)."""
    cands: list[float] = []
    rows = inp.client_rows
    first_client = next((r for r in rows if r.src == client_ip), None)
    if first_client is not None:
        first_server = next((r for r in rows if r.src != client_ip and r.time > first_client.time), None)
        if first_server is not None:
            cands.append(first_server.time - first_client.time)
    if transport == "tcp":
        # ACKs that crossed the emulator: the server's in the client-side capture, the client's in the server-side
        cands += [r.ack_rtt for r in inp.client_rows if r.src != client_ip and r.ack_rtt is not None]
        cands += [r.ack_rtt for r in inp.server_rows if r.src == client_ip and r.ack_rtt is not None]
    else:
        sent: dict[int, float] = {}
        for r in inp.server_rows:
            if r.src != client_ip and r.short and not r.long_types:
                for pn in r.pns:
                    sent.setdefault(pn, r.time)
            elif r.src == client_ip and r.short and not r.long_types:
                cands += [r.time - sent[a] for a in r.acked if a in sent]
    cands = [c for c in cands if c > 0]
    return min(cands) if cands else None


#: QUIC frames that ask nothing of the peer: PADDING and ACK (RFC 9000 12.4); a datagram of only these is an ACK.
ACK_ONLY_FRAMES = frozenset({0x00, 0x02, 0x03})


def _only_acks(r: Row, first: bool) -> bool:
    """A client packet that carries nothing the server answers: a TCP segment without payload other than the SYN
    (the connection's first packet), a QUIC datagram whose frames are all ACK/PADDING. Unknown frames (not
    decrypted) count as data."""
    if first:
        return False
    if r.udp_len:
        return bool(r.quic_frame_types) and set(r.quic_frame_types) <= ACK_ONLY_FRAMES
    return r.tcp_len == 0


def handshake_waits(rows: Sequence[Row], client_ip: str, until: float, min_rtt: float) -> int:
    """Round trips the client spent waiting for the server before its request left (at `until`): gaps between its
    packets of at least WAIT_SHARE x the minimum RTT that follow a packet the server answers (data, the SYN, a
    probe), or in which a server packet arrived at least that long after the gap began (the server's answer to an
    ACK: a flight held back by its window or the amplification limit). A gap that follows a bare ACK with no late
    server packet in it is the client computing (its key share, the certificate check: tens of ms on a slow or
    emulated CPU), not a round trip."""
    mine = [r for r in rows if r.src == client_ip and r.time <= until]
    theirs = [r.time for r in rows if r.src != client_ip and r.time <= until]
    threshold = WAIT_SHARE * min_rtt
    waits = 0
    for i, (a, b) in enumerate(itertools.pairwise(mine)):
        if b.time - a.time < threshold:
            continue
        answered_late = any(a.time + threshold <= t <= b.time for t in theirs)
        if not _only_acks(a, i == 0) or answered_late:
            waits += 1
    return waits


def _handshake(inp: RunInputs, transport: str, client_ip: str, t0: float, req: Row, min_rtt: float | None,
               down: pathmod.Matched | None, up: pathmod.Matched | None) -> Handshake:
    rows = inp.client_rows
    waits = handshake_waits(rows, client_ip, req.time, min_rtt) if min_rtt else None
    expected = EXPECTED_ROUND_TRIPS[transport]
    fin = next((r for r in rows if r.src == client_ip and HS_FINISHED in r.hs_types), None)
    resp = next((r for r in rows if r.src != client_ip and _is_response(r, transport)), None)
    if resp is None and transport == "quic":  # HEADERS not dissected (e.g. re-sent): data on a request stream
        resp = next((r for r in rows if r.src != client_ip and any(s % 4 == 0 for s in r.stream_ids)), None)
    reasons: list[str] = []
    if waits is not None and waits > expected:
        if any(QUIC_RETRY in r.long_types for r in rows if r.src != client_ip and r.time <= req.time):
            reasons.append("the server sent a Retry (address validation): one more round trip")
        lost = [(name, sum(1 for p, a in zip(m.sent, m.arrival, strict=True) if a is None and p.time <= req.time))
                for name, m in (("server->client", down), ("client->server", up)) if m is not None]
        lost_txt = ", ".join(f"{n} {name}" for name, n in lost if n)
        if lost_txt:
            reasons.append(f"handshake packets dropped by the emulator before the request: {lost_txt}")
        late = closing.hello_resent(rows, client_ip) if not reasons and transport == "quic" else None
        if late:
            reasons.append(late)
        if not reasons and transport == "quic":
            sb = sum(r.udp_len for r in rows if r.src != client_ip and r.time <= req.time)
            cb = sum(r.udp_len for r in rows if r.src == client_ip and r.time <= req.time)
            reasons.append(f"no loss and no Retry: the server waited for the client (the 3x amplification limit "
                           f"with a large certificate chain?): {sb} bytes from the server for {cb} from the client")
        if not reasons:
            reasons.append("not visible in the capture")
    return Handshake(
        round_trips=_fig(waits, "round trips", note="client waits of at least "
                         f"{WAIT_SHARE:g} x the minimum RTT before its request left (client-side capture)"),
        expected_round_trips=expected,
        handshake_ms=_fig(_ms(fin.time - t0) if fin else None, "ms",
                          note="first client packet to the client's TLS Finished"),
        ttfb_ms=_fig(_ms(resp.time - t0) if resp else None, "ms",
                     note="first client packet to the response's HEADERS reaching the client"),
        extra_reasons=reasons)


def _path(inp: RunInputs, min_rtt: float | None, down: pathmod.Matched | None,
          up: pathmod.Matched | None) -> PathTruth:
    caps = ["client-side.pcap"] + (["server-side.pcap"] if inp.server_side else [])
    pt = PathTruth(min_rtt_ms=_fig(_ms(min_rtt), "ms", note="smallest handshake or acknowledgment round trip"),
                   configured_rtt_ms=_fig(_ms(inp.configured_rtt_s), "ms", source="runs.csv"), captures=caps)
    if down is None or up is None:
        pt.note = "only the client-side capture exists: the emulator's drops cannot be counted from the captures"
        return pt
    dirs = []
    for m, counter in ((down, inp.counter_drops[0]), (up, inp.counter_drops[1])):
        d = Direction(sent=_fig(len(m.sent), "packets"), delivered=_fig(m.delivered, "packets"),
                      dropped=_fig(m.dropped, "packets", note="; ".join(n for n in (
                          f"{m.unmatched_arrivals} packets left the emulator that never entered it"
                          if m.unmatched_arrivals else "",
                          f"{m.unjudged} packets sent after the last one that arrived not judged (the capture "
                          "may have ended first)" if m.unjudged else "",
                          f"{m.tail_dropped} of the drops in the run's last moments (the emulator's counters may "
                          "have been read before)" if m.tail_dropped else "")
                          if n)),
                      emulator_dropped=_fig(counter, "packets", source="emulator counters",
                                            note="the run recorded no counters" if counter is None else
                                            SHARED_NOTE if inp.competing else ""),
                      agree=None if counter is None else pathmod.agree(m.dropped, counter,
                                                                       m.unjudged + m.tail_dropped, inp.competing))
        dirs.append(d)
    pt.down, pt.up = dirs
    return pt


def _arrivals(server_side: Sequence[Packet], down: pathmod.Matched, client_ip: str) -> list[float | None]:
    """Per server-side frame (by index): when it reached the client's side (None: dropped or not downlink)."""
    it = iter(down.arrival)
    return [next(it) if p.dst == client_ip else None for p in server_side]


@dataclass
class Losses:
    record: LossRecovery
    lost_sent_detect: list[tuple[float, float]]  # per lost data packet: (sent, first re-send) times


@dataclass
class _Sent:
    row: Row
    arrival: float | None
    ranges: list[tuple[tuple[int, int], int, int]]  # ((connection, stream id or 0 for TCP), start, end offset)


def _data_sent(inp: RunInputs, transport: str, client_ip: str, arrival: list[float | None]) -> list[_Sent]:
    out = []
    for r in inp.server_rows:
        if r.src == client_ip:
            continue
        # each connection's byte streams apart: a run of several connections (resume, 0rtt, new, HTTP/1.1 pages)
        # numbers each one's TCP sequence and QUIC stream offsets from 0, which is no re-sending
        if transport == "tcp":
            conn = r.tcp_stream or 0
            rng = [((conn, 0), r.tcp_seq - 1, r.tcp_seq - 1 + r.tcp_len)] if r.tcp_len > 0 else []
        else:
            conn = r.quic_conn or 0
            rng = [((conn, sid), off, off + n) for sid, off, n in r.streams() if n > 0]
        if rng:
            out.append(_Sent(r, arrival[r.number - 1], rng))
    return out


def _covers(s: _Sent, sid: tuple[int, int], off: int) -> bool:
    return any(i == sid and a <= off < b for i, a, b in s.ranges)


def _timeouts(inp: RunInputs, client_ip: str, min_rtt: float | None) -> int | None:
    """TCP retransmissions that are not fast retransmissions (tshark) and came after the server had been silent
    for at least the minimum RTT: a retransmission timeout or a tail-loss probe (a retransmission inside SACK
    recovery follows the previous one closely)."""
    if not min_rtt:
        return None
    n, last = 0, None
    for r in inp.server_rows:
        if r.src == client_ip:
            continue
        if r.retransmission and not r.fast_retransmission and last is not None and r.time - last >= min_rtt:
            n += 1
        last = r.time
    return n


#: a server packet sent within this long of a client packet's arrival may be that packet's answer (ACK-clocked)
ACK_CLOCKED_S = 0.002


def _quic_timeouts(inp: RunInputs, client_ip: str, min_rtt: float | None) -> int | None:
    """QUIC probe timeouts (PTO, RFC 9002 6.2) seen from the server side of the emulator: a 1-RTT packet the
    server sent with bytes in flight after it had been silent for at least the minimum RTT (a PTO is at least the
    smoothed RTT plus its variation) and not as the answer to a client packet that had just arrived."""
    if not min_rtt:
        return None
    n = 0
    last_send = last_client = None
    unacked: dict[int, int] = {}
    largest = -1
    for r in inp.server_rows:
        if r.src == client_ip:
            last_client = r.time
            if r.short:
                largest = max([largest, *r.acked])
                for pn in [pn for pn in unacked if pn <= largest]:
                    del unacked[pn]
            continue
        if r.short and not r.long_types and r.pns:
            if (unacked and last_send is not None and r.time - last_send >= min_rtt
                    and (last_client is None or r.time - last_client > ACK_CLOCKED_S)):
                n += 1
            if not r.quic_frame_types or set(r.quic_frame_types) - limits.NOT_ACK_ELICITING:
                unacked[r.pns[-1]] = r.udp_len  # (older tshark output without frame types: every packet)
        last_send = r.time
    return n


def _losses(inp: RunInputs, transport: str, client_ip: str, arrival: list[float | None], t0: float,
            min_rtt: float | None) -> Losses:
    sent = _data_sent(inp, transport, client_ip, arrival)
    hi: dict[tuple[int, int], int] = {}
    delivered: dict[tuple[int, int], list[tuple[int, int]]] = {}
    retx = retx_bytes = spurious = 0
    for s in sent:
        old = 0
        spur = False
        for sid, a, b in s.ranges:
            h = hi.get(sid, 0)
            if a < h:
                old += min(b, h) - a
                spur |= any(da <= a and db >= min(b, h) for da, db in delivered.get(sid, []))
            hi[sid] = max(h, b)
        if old:
            retx += 1
            retx_bytes += old
            spurious += spur
        if s.arrival is not None:
            for sid, a, b in s.ranges:
                delivered.setdefault(sid, []).append((a, b))
    lost = [s for s in sent if s.arrival is None]
    pairs: list[tuple[float, float]] = []
    for i, s in enumerate(sent):
        if s.arrival is None:
            sid, off, _ = s.ranges[0]
            again = next((x for x in sent[i + 1:] if _covers(x, sid, off)), None)
            if again is not None:
                pairs.append((s.row.time, again.row.time))
    first = lost[0] if lost else None
    repair = None
    if first is not None:
        sid, off, _ = first.ranges[0]
        k = sent.index(first)
        fix = next((x for x in sent[k + 1:] if x.arrival is not None and _covers(x, sid, off)), None)
        repair = None if fix is None or fix.arrival is None else fix.arrival - first.row.time
    timeouts = (_timeouts(inp, client_ip, min_rtt) if transport == "tcp"
                else _quic_timeouts(inp, client_ip, min_rtt))
    tshark_spurious = sum(1 for r in inp.server_rows if r.src != client_ip and r.spurious)
    unit = "bytes of the TCP stream" if transport == "tcp" else "bytes of its stream"
    rec = LossRecovery(
        data_packets=_fig(len(sent), "packets"),
        data_packets_lost=_fig(len(lost), "packets", note="sent by the server, never left the emulator"),
        retransmissions=_fig(retx, "packets", note=(
            "data packets re-sending bytes below the highest offset sent"
            + (f"; tshark flags {sum(1 for r in inp.server_rows if r.src != client_ip and r.retransmission)}"
               if transport == "tcp" else ""))),
        bytes_retransmitted=_fig(retx_bytes, "bytes"),
        spurious_retransmissions=_fig(spurious, "packets", note=(
            "re-sent bytes an earlier delivered packet had carried (matched across the captures)"
            + (f"; tshark's spurious flag: {tshark_spurious}" if transport == "tcp" else ""))),
        timeouts=_fig(timeouts, "retransmissions", note=(
            "not a fast retransmission (tshark), after the server was silent for the minimum RTT: an RTO or "
            "a tail-loss probe" if transport == "tcp"
            else "a probe timeout (PTO): a packet sent with bytes in flight after the server was silent for the "
                 "minimum RTT, not within 2 ms of a client packet's arrival (server-side capture)")),
        first_loss_offset=_fig(first.ranges[0][1] if first else None, unit,
                               note=f"stream {first.ranges[0][0][1]}" if first and transport == "quic" else ""),
        first_loss_ms=_fig(_ms(first.row.time - t0) if first else None, "ms",
                           note="when the server sent it, from the first client packet"),
        first_loss_repair_ms=_fig(_ms(repair), "ms", note="its bytes first reached the client after this"))
    return Losses(rec, pairs)


def _flight(inp: RunInputs, transport: str, client_ip: str) -> list[tuple[float, float]]:
    if transport == "tcp":
        return [(r.time, float(r.bytes_in_flight)) for r in inp.server_rows
                if r.src != client_ip and r.bytes_in_flight is not None]
    out: list[tuple[float, float]] = []
    unacked: dict[int, int] = {}
    largest = -1
    for r in inp.server_rows:
        if not r.short or r.long_types:
            continue
        if r.src == client_ip:
            largest = max([largest, *r.acked])
            for pn in [pn for pn in unacked if pn <= largest]:
                del unacked[pn]
        elif r.pns:
            unacked[r.pns[-1]] = r.udp_len
            out.append((r.time, float(sum(unacked.values()))))
    return out


def episodes(lost_sent_detect: Sequence[tuple[float, float]]) -> list[float]:
    """Detection times of the loss episodes: a loss starts a new one (one window reduction, RFC 6675/9002) only
    if its packet was sent after the current episode began."""
    starts: list[float] = []
    for sent_t, detect_t in sorted(lost_sent_detect, key=lambda x: x[1]):
        if not starts or sent_t > starts[-1]:
            starts.append(detect_t)
    return starts


def _window(inp: RunInputs, transport: str, client_ip: str, losses: Losses, min_rtt: float | None,
            t0: float) -> Window:
    starts = episodes(losses.lost_sent_detect)
    flight = _flight(inp, transport, client_ip)
    fell = None
    if flight and min_rtt:
        t = np.array([x[0] for x in flight])
        f = np.array([x[1] for x in flight])
        fell = 0
        for d in starts:
            before = f[(t >= d - min_rtt) & (t <= d)]
            after = f[(t >= d + min_rtt) & (t <= d + 2 * min_rtt)]
            if before.size and after.size and after.max() < FLIGHT_FELL * before.max():
                fell += 1
    wf = zf = None
    if transport == "tcp":
        data = [r for r in inp.server_rows if r.src != client_ip and r.tcp_len > 0]
        wf = sum(1 for r in data if r.window_full)
        zf = sum(1 for r in inp.server_rows if r.src == client_ip and r.zero_window)
    req = next((r.time for r in inp.server_rows if r.src == client_ip and _is_request(r, transport)), None)
    sh = (limits.tcp if transport == "tcp" else limits.quic)(inp.server_rows, client_ip, req)
    span = (f"; share of the sending time ({sh.seconds * 1000:.0f} ms: the server's first data packet after the "
            "request to its last; server-side capture)" if sh else "")
    note_tcp = "" if transport == "tcp" else "TCP only"
    return Window(
        loss_episodes=_fig(len(starts), "reductions", note="inferred: one per round of loss (RFC 6675/9002)"),
        slow_start_exit_ms=_fig(_ms(starts[0] - t0) if starts else None, "ms", note=(
            "inferred: the first loss episode's detection, from the client's first packet (a loss-based sender "
            "leaves slow start there; one that leaves it without loss, e.g. HyStart, is not seen here; none: no "
            "loss episode)")),
        flight_reductions=_fig(fell, "episodes", note=(
            f"bytes in flight one RTT after detection below {FLIGHT_FELL:g} x the RTT before"
            + ("; tshark tcp.analysis.bytes_in_flight" if transport == "tcp"
               else "; 1-RTT packets above the client's largest acknowledged"))),
        window_full=_fig(wf, "segments", note=note_tcp or "tshark tcp.analysis.window_full"),
        zero_window=_fig(zf, "advertisements", note=note_tcp or "tshark tcp.analysis.zero_window"),
        flow_control_limited_share=_fig(sh and sh.receiver, "share", note=(
            ("receiver-limited: bytes in flight + one segment above the client's advertised window"
             if transport == "tcp" else "receiver-limited: the server said it was blocked "
             "(DATA_BLOCKED/STREAM_DATA_BLOCKED) and no limit was raised yet") + span)),
        sender_limited_share=_fig(sh and sh.sender, "share", note=(
            "data in flight, the receiver's window open: the congestion window, pacing or loss recovery (not told "
            "apart by a capture)" + span)),
        application_limited_share=_fig(sh and sh.application, "share", note=(
            "nothing in flight: the sender had nothing to send" + span)))


def _reasons(e: Explanation, inp: RunInputs) -> list[Reason]:
    out: list[Reason] = []
    hs, pt, lr, w = e.handshake, e.path, e.loss, e.window
    rtt = pt.min_rtt_ms.value if pt else None
    if hs and hs.round_trips.value is not None:
        extra = int(hs.round_trips.value) - hs.expected_round_trips
        if extra > 0:
            out.append(Reason(text=f"handshake: {hs.round_trips.value} round trips before the request (expected "
                                   f"{hs.expected_round_trips}): {'; '.join(hs.extra_reasons)}",
                              cost_ms=extra * rtt if rtt else None))
        else:
            ttfb = "no response" if hs.ttfb_ms.value is None else f"TTFB {hs.ttfb_ms.value} ms"
            out.append(Reason(text=f"handshake: {hs.round_trips.value} round trips before the request, {ttfb}",
                              cost_ms=0.0))
    if lr and lr.data_packets_lost.value:
        out.append(Reason(text=(
            f"loss: {lr.data_packets_lost.value} of {lr.data_packets.value} server data packets dropped, "
            f"{lr.bytes_retransmitted.value} bytes retransmitted ({lr.spurious_retransmissions.value} spurious); "
            f"first loss at offset {lr.first_loss_offset.value} after {lr.first_loss_ms.value} ms, "
            + ("not repaired in the capture" if lr.first_loss_repair_ms.value is None
               else f"repaired in {lr.first_loss_repair_ms.value} ms")), cost_ms=lr.first_loss_repair_ms.value))
    elif lr:
        out.append(Reason(text=f"no server data packet was dropped; {lr.bytes_retransmitted.value} bytes "
                               "retransmitted", cost_ms=0.0))
    if w and w.loss_episodes.value:
        fell = w.flight_reductions.value
        out.append(Reason(text=(f"window: {w.loss_episodes.value} loss episodes (inferred reductions); bytes in "
                                f"flight fell after {fell if fell is not None else '?'} of them"), cost_ms=None))
    if w and w.sender_limited_share is not None and w.sender_limited_share.value is not None:
        shares = [(w.sender_limited_share.value, "sender-limited (congestion window, pacing or recovery)"),
                  (w.flow_control_limited_share.value or 0.0, "receiver-limited (flow control)"),
                  (w.application_limited_share.value if w.application_limited_share else 0.0,
                   "application-limited (nothing in flight)")]
        out.append(Reason(text="sending time: " + ", ".join(f"{v:.0%} {name}" for v, name in shares if v),
                          cost_ms=None))
    if e.head_of_line is not None and e.head_of_line.streams_held.value:
        h = e.head_of_line
        out.append(Reason(text=(
            f"head-of-line ({h.level}): {h.streams_held.value} of {h.streams.value} streams had bytes held behind "
            f"a hole ({h.bytes_held.value} bytes, {h.holes.value} holes); the longest wait "
            f"{h.longest_hole_fill_delay_ms.value} ms"), cost_ms=None))
    if e.sender_kernel is not None:
        k = e.sender_kernel
        rw = k.rwnd_limited_share.value
        out.append(Reason(text=(
            f"sender's kernel (ss, as its connection closed): {k.segments_retransmitted.value} segments "
            f"retransmitted ({k.bytes_retransmitted.value} bytes), cwnd {k.cwnd.value} segments"
            + (f", ssthresh {k.ssthresh.value}" if k.ssthresh.value is not None else ", never left slow start")
            + (f", receiver-window-limited {rw:.0%} of its busy time" if rw else "")), cost_ms=None))
    if lr and lr.timeouts.value:
        out.append(Reason(text=f"timeouts: {lr.timeouts.value} retransmission/probe timeouts (the sender waited "
                               "for a timer, not for acknowledgments)", cost_ms=None))
    if pt and pt.min_rtt_ms.value is not None and pt.configured_rtt_ms.value:
        out.append(Reason(text=f"path: minimum RTT seen {pt.min_rtt_ms.value} ms, configured "
                               f"{pt.configured_rtt_ms.value} ms", cost_ms=None))
    return sorted(out, key=lambda r: -(r.cost_ms or 0.0))
