"""The pcap-based figures of one run (lab/evidence/pcap.py), from its client-side capture: the goodput, and the bytes
delivered over time (lab/evidence/delivered.py)."""

from __future__ import annotations

from lab.endpoints.registry import registry
from lab.evidence import pcap
from lab.evidence.capture import Evidence
from lab.evidence.delivered import Delivered, delivered
from lab.protocols import Protocol


def pcap_goodput(ev: Evidence, server: str, protocol: Protocol, size: int, port: int | None = None) -> float | None:
    """The quic-interop-runner's goodput from the client-side capture (None without one)."""
    return pcap_figures(ev, server, protocol, size, port)[0]


def pcap_figures(ev: Evidence, server: str, protocol: Protocol, size: int, port: int | None = None,
                 zero_unix: float | None = None) -> tuple[float | None, Delivered | None]:
    """The goodput (as pcap_goodput) and, given the link's application time (`zero_unix`, unix seconds), the
    bytes the server delivered over time since then; the capture read once. (None, None) without a capture."""
    path = ev.find("client-side.pcap")
    if path is None:
        return None, None
    impl = registry().server(server)
    port = port or ev.server_port or impl.port or 443  # the instance the run used (qlog, congestion control)
    try:
        packets = pcap.read_pcap(path.read_bytes())
    except pcap.PcapError:
        return None, None
    g = pcap.goodput(packets, impl.address or "", port, protocol is Protocol.H3, size)
    series = delivered(packets, impl.address or "", port, zero_unix) if zero_unix is not None else None
    return (g.goodput_bps if g else None), series
