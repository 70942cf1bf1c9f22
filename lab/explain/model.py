"""The explanation record of one run (`explain.json`): every figure carries its source."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Source = Literal["pcap", "emulator counters", "qlog", "ss", "runs.csv"]
Status = Literal["explained", "invalid", "not explainable"]
EXPLAIN_JSON = "explain.json"


class Figure(BaseModel):
    """One number with its unit and where it comes from (`value` None: not visible in this run's evidence)."""

    value: float | int | None
    unit: str = ""
    source: Source = "pcap"
    note: str = ""


class Handshake(BaseModel):
    round_trips: Figure  # client waits of at least ~one RTT before the request left (TCP+TLS 1.3: 2, QUIC: 1)
    expected_round_trips: int
    handshake_ms: Figure  # first client packet -> the client's TLS Finished
    ttfb_ms: Figure  # first client packet -> the first response HEADERS reaching the client
    extra_reasons: list[str] = []


class Direction(BaseModel):
    sent: Figure  # packets seen entering the emulator (on the sender's side of the router)
    delivered: Figure  # ... and leaving it (on the receiver's side)
    dropped: Figure  # sent - delivered (matched packet by packet)
    emulator_dropped: Figure  # the emulator's own counters (loss + queue drops) over the run
    agree: bool | None = None  # None: the run recorded no counters


class PathTruth(BaseModel):
    min_rtt_ms: Figure
    configured_rtt_ms: Figure
    down: Direction | None = None  # server -> client
    up: Direction | None = None
    captures: list[str] = []  # which capture points existed
    note: str = ""


class LossRecovery(BaseModel):
    data_packets: Figure  # server packets carrying data (TCP payload / QUIC STREAM frames)
    data_packets_lost: Figure  # of those, dropped by the emulator (matched across the two captures)
    retransmissions: Figure  # server data packets that re-sent data
    bytes_retransmitted: Figure
    spurious_retransmissions: Figure  # re-sent data whose earlier copy had reached the client
    timeouts: Figure  # TCP: retransmissions tshark does not flag as fast retransmissions (RTO or tail-loss probe)
    first_loss_offset: Figure  # data offset (TCP: bytes after the SYN; QUIC: stream offset) of the first lost packet
    first_loss_ms: Figure  # its send time from the first client packet
    first_loss_repair_ms: Figure  # first loss -> the first copy of those bytes reaching the client


class Window(BaseModel):
    loss_episodes: Figure  # inferred congestion-window reductions (one per round of loss, RFC 6675/9002)
    slow_start_exit_ms: Figure | None = None  # inferred: the first loss episode (TCP: ss's ssthresh says it left)
    flight_reductions: Figure  # episodes after which the sender's bytes in flight fell below 85 % of before
    window_full: Figure  # TCP: segments that filled the receiver's window (tshark tcp.analysis.window_full)
    zero_window: Figure  # TCP: zero-window advertisements from the client
    flow_control_limited_share: Figure  # receiver-limited share of the sending time (lab/explain/limits.py)
    sender_limited_share: Figure | None = None  # data in flight, window open: congestion window, pacing, recovery
    application_limited_share: Figure | None = None  # nothing in flight: nothing to send


class SenderKernel(BaseModel):
    """TCP runs captured with the sender's kernel state (`sender-socket.txt`: ss as the connections closed)."""

    connections: int
    segments_retransmitted: Figure
    bytes_retransmitted: Figure
    cwnd: Figure
    ssthresh: Figure
    busy_ms: Figure
    rwnd_limited_share: Figure
    sndbuf_limited_share: Figure
    delivery_rate_bps: Figure
    min_rtt_ms: Figure


class StreamHol(BaseModel):
    """One response stream's head-of-line blocking (lab/explain/hol.py)."""

    stream_id: int
    response_bytes: int  # its bytes seen (TCP: of the byte stream its frames occupy; QUIC: its highest offset)
    bytes_held: int  # received above a hole below them, so not deliverable on arrival
    hole_fill_delay_ms: float  # the longest one of its held bytes waited for the hole(s) below it to fill
    mean_wait_ms: float  # its held bytes' mean wait
    holes: int  # hole episodes it had bytes held behind


class HeadOfLine(BaseModel):
    """Multi-object runs: per stream, the bytes held behind a hole and how long (client-side capture)."""

    level: Literal["tcp byte stream", "quic stream"]  # what a hole blocks: every stream above it, or one stream
    holes: Figure
    streams: Figure
    streams_held: Figure
    bytes_held: Figure
    longest_hole_fill_delay_ms: Figure
    per_stream: list[StreamHol] = []
    note: str = ""


class Reason(BaseModel):
    text: str
    cost_ms: float | None = None  # what it cost, where it can be put in time (for the ranking)


class Explanation(BaseModel):
    run_key: str
    protocol: str
    transport: Literal["tcp", "quic"]
    status: Status
    why: str = ""  # why it is invalid or not explainable
    handshake: Handshake | None = None
    path: PathTruth | None = None
    loss: LossRecovery | None = None
    window: Window | None = None
    head_of_line: HeadOfLine | None = None  # multi-object runs (HTTP/2, HTTP/3) only
    sender_kernel: SenderKernel | None = None  # TCP runs whose sender's kernel state was read (source: ss)
    reasons: list[Reason] = Field(default_factory=list)
    timeline: Timeline | None = None  # explained runs of bulk transfers: the split and curve (lab/explain/timeline.py)

    @classmethod
    def unexplainable(cls, run_key: str, protocol: str, why: str) -> Explanation:
        return cls(run_key=run_key, protocol=protocol, transport="quic" if protocol == "h3" else "tcp",
                   status="not explainable", why=why)


class Timeline(BaseModel):
    """The run's own transfer time split as `quiclab explain --versus` splits it (lab/explain/versus.py; ms from the
    client's first packet, client side of the emulator), and its delivered-bytes-vs-time curve downsampled: what the
    report's versus part needs offline (lab/report/why.py). handshake + loss recovery + rest = total (to rounding)."""

    total_ms: float  # the run's transfer time (runs.csv total_s)
    handshake_ms: float  # the client's first packet -> its request
    loss_recovery_ms: float  # stalled_ms + resent_ms, after the request
    rest_ms: float  # total - handshake - loss recovery
    stalled_ms: float  # hole episodes: the time the link sat unused while a hole was open
    resent_ms: float  # the link time of the re-sent bytes
    episodes: int  # hole episodes after the request
    resent_bytes: int
    last_byte_ms: float | None  # the last new byte at the client's side, beside total_ms as a check
    rate_bps: float | None  # the configured downlink rate the link times use (None: unshaped)
    curve_points: int  # points of the full curve (one per server packet with payload) before downsampling
    t_ms: list[float] = []  # the curve, at most timeline.MAX_POINTS points: time from the client's first packet
    in_order_bytes: list[int] = []  # bytes delivered without a hole below them
    received_bytes: list[int] = []  # bytes received at all (each once)


Explanation.model_rebuild()  # its `timeline` names Timeline, defined after it
