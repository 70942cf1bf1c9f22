"""The link's own counters around one run: what entered the emulator per direction (what the sender put on the
wire), what it delivered, and what it dropped by cause. Read before and after each run; the difference is the
run's, unless another command sent traffic meanwhile: packets of another IP protocol than the run's betray that
(`Snapshot.foreign`), and such a run is the lab's failure, never a result.

linkem gives all of them (its /metrics); with netem only the router's interface counters are read (delivered
bytes and packets; the drop counts stay unknown)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DIRECTIONS = ("downlink", "uplink")
_SAMPLE = re.compile(r'^(quiclab_link_[a-z_]+_total)\{([^}]*)\} (\d+)$', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Counters:
    """Cumulative counts for one direction (or their difference over a run)."""

    bytes: int = 0  # IP bytes delivered
    packets: int = 0  # packets delivered
    received: int | None = None  # packets that entered the emulator (None: unknown, e.g. netem)
    loss_drops: int | None = None  # dropped by the loss model (random, Gilbert-Elliott)
    queue_drops: int | None = None  # dropped by the bottleneck queue (drop-tail)
    outage_drops: int | None = None  # dropped while the link was down
    # dropped because the host could not keep up (the emulator's TUN queue full, a failed write): not the link's
    host_drops: int | None = None

    def __sub__(self, other: Counters) -> Counters:
        def d(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a - b

        return Counters(self.bytes - other.bytes, self.packets - other.packets, d(self.received, other.received),
                        d(self.loss_drops, other.loss_drops), d(self.queue_drops, other.queue_drops),
                        d(self.outage_drops, other.outage_drops), d(self.host_drops, other.host_drops))

    @property
    def loss_rate(self) -> float | None:
        """Random-loss drops over the packets that entered (the loss the transport met), None when unknown."""
        if self.received is None or self.loss_drops is None or self.received <= 0:
            return None
        return self.loss_drops / self.received


@dataclass(frozen=True)
class Snapshot:
    down: Counters
    up: Counters
    #: packets that entered the link per IP protocol (tcp, udp, icmp, other), both directions (linkem only)
    by_protocol: dict[str, int] = field(default_factory=dict)

    def __sub__(self, other: Snapshot) -> Snapshot:
        return Snapshot(self.down - other.down, self.up - other.up,
                        {k: v - other.by_protocol.get(k, 0) for k, v in self.by_protocol.items()})

    def foreign(self, transport: str) -> int:
        """Packets of other IP protocols than the run's `transport` ("tcp" or "udp") that crossed the link: another
        command's traffic (a run makes none; 0 when unknown)."""
        return sum(n for proto, n in self.by_protocol.items() if proto != transport)


def parse_linkem(text: str) -> Snapshot:
    """linkem's Prometheus exposition -> per-direction totals (summed over IP protocols)."""
    acc: dict[str, dict[str, int]] = {d: {} for d in DIRECTIONS}
    protocols: dict[str, int] = {}
    for name, labels, value in _SAMPLE.findall(text):
        lab = dict(_LABEL.findall(labels))
        direction = lab.get("direction")
        if direction not in acc:
            continue
        if name == "quiclab_link_received_packets_total" and "protocol" in lab:
            protocols[lab["protocol"]] = protocols.get(lab["protocol"], 0) + int(value)
        key = {"quiclab_link_bytes_total": "bytes", "quiclab_link_packets_total": "packets",
               "quiclab_link_received_packets_total": "received"}.get(name)
        if name == "quiclab_link_drops_total":
            key = {"loss": "loss_drops", "queue": "queue_drops", "outage": "outage_drops",
                   "tun_queue": "host_drops"}.get(lab.get("cause", ""))
        if name == "quiclab_link_write_errors_total":
            key = "host_drops"
        if key:
            acc[direction][key] = acc[direction].get(key, 0) + int(value)

    def counters(d: dict[str, int]) -> Counters:
        return Counters(bytes=d.get("bytes", 0), packets=d.get("packets", 0), received=d.get("received"),
                        loss_drops=d.get("loss_drops"), queue_drops=d.get("queue_drops"),
                        outage_drops=d.get("outage_drops"), host_drops=d.get("host_drops"))

    return Snapshot(counters(acc["downlink"]), counters(acc["uplink"]), protocols)
