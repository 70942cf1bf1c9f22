"""The TCP sender's kernel state as its connections closed (`sender-socket.txt`, lab/evidence/sender_socket.py):
`ss -tinHE` text in, per-connection values and the run's SenderKernel figures out (sans-IO)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lab.explain.model import Figure, SenderKernel

_MS = re.compile(r"^([\d.]+)ms(?:\(([\d.]+)%\))?$")
_BPS = re.compile(r"^([\d.]+)([KMG]?)bps$")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass
class Socket:
    """One connection's TCP_INFO as ss prints it (only what the explanation uses)."""

    local: str
    peer: str
    values: dict[str, str] = field(default_factory=dict)

    def int(self, key: str) -> int | None:
        v = self.values.get(key)
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None

    def ms(self, key: str) -> float | None:
        """`busy:16ms` / `rwnd_limited:8ms(50.0%)` -> 16.0 / 8.0; absent (ss prints none when 0) -> 0.0."""
        v = self.values.get(key)
        if v is None:
            return 0.0
        m = _MS.match(v)
        return float(m.group(1)) if m else None

    def bps(self, key: str) -> float | None:
        v = self.values.get(key)
        m = _BPS.match(v) if v else None
        return float(m.group(1)) * _SCALE[m.group(2)] if m else None

    @property
    def retrans_total(self) -> int | None:
        """`retrans:0/4`: the total (after the slash); absent: none retransmitted."""
        v = self.values.get("retrans")
        if v is None:
            return 0
        try:
            return int(v.split("/")[-1])
        except ValueError:
            return None


#: ss prints these as `key value` (two tokens); the rest as `key:value` or a lone flag
_SPACED = {"send", "pacing_rate", "delivery_rate"}


def parse(text: str) -> list[Socket]:
    """ss -tinH text (an address line, then an indented info line, per socket) -> sockets."""
    out: list[Socket] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith((" ", "\t")):
            parts = line.split()
            if len(parts) >= 5:
                out.append(Socket(local=parts[3], peer=parts[4]))
            continue
        if not out:
            continue
        tokens = line.split()
        i = 0
        while i < len(tokens):
            t = tokens[i]
            if t in _SPACED and i + 1 < len(tokens):
                out[-1].values[t] = tokens[i + 1]
                i += 2
                continue
            key, sep, value = t.partition(":")
            out[-1].values[key] = value if sep else ""
            i += 1
    return out


def _fig(value: float | int | None, unit: str, note: str = "") -> Figure:
    if isinstance(value, float):
        value = round(value, 3)
    return Figure(value=value, unit=unit, source="ss", note=note)


def kernel(sockets: list[Socket]) -> SenderKernel | None:
    """The run's figures: totals over its connections; window values of the one that moved the most bytes."""
    if not sockets:
        return None
    main = max(sockets, key=lambda s: s.int("bytes_acked") or 0)

    def total(get: str) -> int | None:
        vals = [s.retrans_total if get == "retrans" else s.int(get) for s in sockets]
        return None if any(v is None for v in vals) else sum(v or 0 for v in vals)

    def total_ms(key: str) -> float | None:
        vals = [s.ms(key) for s in sockets]
        return None if any(v is None for v in vals) else sum(v or 0.0 for v in vals)

    busy = total_ms("busy")
    rwnd, sndbuf = total_ms("rwnd_limited"), total_ms("sndbuf_limited")

    def share(x: float | None) -> float | None:
        return None if x is None or not busy else x / busy

    main_note = "the connection that moved the most bytes, as it closed"
    return SenderKernel(
        connections=len(sockets),
        segments_retransmitted=_fig(total("retrans"), "segments", "TCP_INFO tcpi_total_retrans, all connections"),
        bytes_retransmitted=_fig(total("bytes_retrans"), "bytes", "tcpi_bytes_retrans, all connections"),
        cwnd=_fig(main.int("cwnd"), "segments", main_note),
        ssthresh=_fig(main.int("ssthresh"), "segments",
                      main_note + "; none: the sender never left slow start (ss prints no ssthresh then)"),
        busy_ms=_fig(busy, "ms", "time with data queued to send (tcpi_busy_time), all connections"),
        rwnd_limited_share=_fig(share(rwnd), "share of busy",
                                "the receiver's window held the sender (tcpi_rwnd_limited / busy)"),
        sndbuf_limited_share=_fig(share(sndbuf), "share of busy",
                                  "the send buffer held the sender (tcpi_sndbuf_limited / busy)"),
        delivery_rate_bps=_fig(main.bps("delivery_rate"), "bit/s", main_note + ": its last delivery-rate sample"),
        min_rtt_ms=_fig(float(main.values["minrtt"]) if "minrtt" in main.values else None, "ms", main_note))
