"""The link's own counters around one run: what entered the emulator per direction (what the sender put on the
wire), what it delivered, and what it dropped by cause. Read before and after each run; the difference is the
run's, unless another command sent traffic meanwhile: packets of another IP protocol than the run's betray that
(`Snapshot.foreign`), and such a run is the lab's failure, never a result.

linkem gives all of them (its /metrics). With netem the delivered bytes and packets come from the router's
interface counters and the rest from the qdiscs' own statistics (`tc -s -j qdisc show`, read in the same exec):
per direction, on the egress that faces the receiver (lab/link/netem.py: a prio root 1: that sends IPv4 to netem
2:, tbf 10: under it, a queue discipline 20: under tbf; older folders had netem as the root),

    loss_drops  = netem's drops - tbf's drops
    queue_drops = tbf's drops
    received    = netem's sent + netem's drops + netem's backlog (packets)

because a qdisc's drops include its children's: what a child refuses at enqueue is counted by the parent that
enqueued it, and what a child drops later (CoDel's and fq_codel's drops at dequeue, fq_codel dropping another
flow's packets when full) is added to every ancestor (the kernel's qdisc_tree_reduce_backlog). So netem's drops =
its loss model's + its own limit's (sized never to drop) + everything below it, and tbf's = its byte limit's + its
queue discipline's. Seen on Debian trixie's 6.12 kernel (tests/data/tc: CoDel, fq_codel, PIE and pfifo_head_drop
under tbf each report the same drops as the tbf above them).
A direction without netem (unimpaired) has the veth's default qdisc (noqueue): nothing is dropped, received =
delivered. Host drops stay unknown (None): netem has no userspace step that could fall behind. Where the meaning
differs from linkem's: docs/link.md, "netem's counters"."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError

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


# --- netem: the qdiscs' statistics ------------------------------------------------------------------------------------

class TcQdisc(BaseModel):
    """One qdisc of `tc -s -j qdisc show` (iproute2's JSON)."""

    model_config = ConfigDict(extra="ignore")
    kind: str
    handle: str = ""
    dev: str = ""
    parent: str = ""
    root: bool = False
    packets: int = 0
    drops: int = 0
    qlen: int = 0


class BadTcOutput(ValueError):
    """tc's JSON did not have the expected shape."""


def parse_tc(text: str) -> dict[str, list[TcQdisc]]:
    """`tc -s -j qdisc show` (all devices) -> the qdiscs per device."""
    try:
        raw = json.loads(text)
        qdiscs = [TcQdisc.model_validate(q) for q in raw]
    except (ValueError, TypeError, ValidationError) as e:
        raise BadTcOutput(f"unreadable tc -s -j qdisc output: {e}") from None
    out: dict[str, list[TcQdisc]] = {}
    for q in qdiscs:
        out.setdefault(q.dev, []).append(q)
    return out


def netem_direction(qdiscs: list[TcQdisc], delivered_packets: int, delivered_bytes: int) -> Counters:
    """A direction's cumulative counters from its egress qdiscs (see the module docstring) and the interface's
    delivered IP bytes and packets."""
    netem = next((q for q in qdiscs if q.kind == "netem"), None)
    if netem is None:
        return Counters(delivered_bytes, delivered_packets, received=delivered_packets, loss_drops=0, queue_drops=0)
    handle = netem.handle.rstrip(":")
    tbf = next((q for q in qdiscs if q.kind == "tbf" and q.parent.split(":")[0] == handle), None)
    below = tbf.drops if tbf is not None else 0
    return Counters(delivered_bytes, delivered_packets, received=netem.packets + netem.drops + netem.qlen,
                    loss_drops=netem.drops - below, queue_drops=below)


def parse_netem(tc_json: str, client_if: str, server_if: str, tx: tuple[int, int, int, int]) -> Snapshot:
    """The link's counters under netem: `tc -s -j qdisc show` and the interfaces' (tx_bytes, tx_packets) of the
    client side then the server side (IP bytes: the 14-byte Ethernet header of each frame taken off)."""
    by_dev = parse_tc(tc_json)
    cb, cp, sb, sp = tx
    return Snapshot(netem_direction(by_dev.get(client_if, []), cp, cb - 14 * cp),
                    netem_direction(by_dev.get(server_if, []), sp, sb - 14 * sp))
