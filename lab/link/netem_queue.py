"""The queue discipline of a netem-backed direction: a child of its tbf (lab/link/netem.py), mapped from linkem's
queue disciplines (lab/link/model.py) as far as the Linux qdiscs allow (the deviations are listed in netem.py)."""

from __future__ import annotations

from lab.link.model import Codel, Direction, DropHead, FqCodel, Pie

CHILD_HANDLE = "20:"
ETHERNET_HEADER_BYTES = 14
PACKET_BYTES = 1500  # a byte limit becomes this many bytes per packet for the packet-counting qdiscs


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def packet_limit(queue_packets: int | None, queue_bytes: int | None) -> tuple[int, str]:
    """The limit in packets for qdiscs that count packets: the packet limit, or bytes / 1500 (at least 1); the
    smaller when both are given."""
    limits: list[tuple[int, str]] = []
    if queue_packets is not None:
        limits.append((queue_packets, "as given"))
    if queue_bytes is not None:
        limits.append((max(1, queue_bytes // PACKET_BYTES), f"{queue_bytes} bytes / 1500"))
    return min(limits) if limits else (10240, "no limit given: fq_codel's default")


def queue_commands(dev: str, tbf_handle: str, d: Direction, queue_packets: int | None, queue_bytes: int | None
                   ) -> tuple[list[list[str]], list[str]]:
    """The tc command that installs `d`'s queue discipline under its tbf, and notes; none for drop-tail (tbf's
    own byte FIFO)."""
    q = d.qdisc
    parent = ["tc", "qdisc", "replace", "dev", dev, "parent", f"{tbf_handle.rstrip(':')}:1", "handle", CHILD_HANDLE]
    limit, why = packet_limit(queue_packets, queue_bytes)
    note = f"{q.kind} under tbf, limit {limit} packets ({why})"
    if isinstance(q, DropHead):
        return [[*parent, "pfifo_head_drop", "limit", str(limit)]], [note]
    if isinstance(q, Codel):
        return [[*parent, "codel", "limit", str(limit), "target", f"{_us(q.target_s)}us",
                 "interval", f"{_us(q.interval_s)}us", "ecn" if q.ecn else "noecn"]], [note]
    if isinstance(q, FqCodel):
        quantum = q.quantum + ETHERNET_HEADER_BYTES
        return [[*parent, "fq_codel", "limit", str(limit), "flows", str(q.flows), "quantum", str(quantum),
                 "target", f"{_us(q.target_s)}us", "interval", f"{_us(q.interval_s)}us",
                 "ecn" if q.ecn else "noecn"]], [f"{note}; quantum {quantum} (counts the Ethernet header)"]
    if isinstance(q, Pie):
        alpha, beta = round(q.alpha * 16), round(q.beta * 16)
        rounded = "" if (alpha / 16, beta / 16) == (q.alpha, q.beta) else "; alpha/beta rounded to 1/16 steps"
        return [[*parent, "pie", "limit", str(limit), "target", f"{_us(q.target_s)}us",
                 "tupdate", f"{_us(q.tupdate_s)}us", "alpha", str(alpha), "beta", str(beta),
                 "ecn" if q.ecn else "noecn", "bytemode" if q.bytemode else "nobytemode"]], [note + rounded]
    return [], []
