"""The pcap-based goodput of one run (lab/evidence/pcap.py), from its client-side capture."""

from __future__ import annotations

from lab.endpoints.registry import registry
from lab.evidence import pcap
from lab.evidence.capture import Evidence
from lab.protocols import Protocol


def pcap_goodput(ev: Evidence, server: str, protocol: Protocol, size: int, port: int | None = None) -> float | None:
    """The quic-interop-runner's goodput from the client-side capture (None without one)."""
    path = ev.find("client-side.pcap")
    if path is None:
        return None
    impl = registry().server(server)
    try:
        port = port or ev.server_port or impl.port or 443  # the instance the run used (qlog, congestion control)
        g = pcap.goodput(pcap.read_pcap(path.read_bytes()), impl.address or "", port,
                          protocol is Protocol.H3, size)
    except pcap.PcapError:
        return None
    return g.goodput_bps if g else None
