"""Human-readable rows for a Link (used by `quiclab shape` and run headers)."""

from __future__ import annotations

from lab.link.model import Bernoulli, Direction, GilbertElliott, Link
from lab.link.units import format_duration, format_rate


def _loss(d: Direction) -> str:
    if isinstance(d.loss, Bernoulli):
        return f"{d.loss.p * 100:g} %"
    if isinstance(d.loss, GilbertElliott):
        g = d.loss
        return (f"GE p={g.p * 100:g}% r={g.r * 100:g}% (mean {g.mean * 100:.3g} %, burst {g.mean_burst:.3g})")
    return "0"


def _queue(d: Direction) -> str:
    if d.queue_packets is not None:
        return f"{d.queue_packets} packets"
    q = d.queue_limit_bytes
    return "-" if q is None else f"{q} bytes"


def _extras(d: Direction) -> str:
    parts = []
    if d.outage:
        parts.append(f"outage {format_duration(d.outage.down_s)} every {format_duration(d.outage.period_s)}")
    if d.rate_schedule:
        parts.append(f"schedule {len(d.rate_schedule.steps)} steps / {format_duration(d.rate_schedule.period_s)}"
                     f" (mean {format_rate(d.rate_schedule.mean_bps)})")
    if d.trace_ms:
        parts.append(f"trace {len(d.trace_ms)} opportunities (mean {format_rate(d.effective_rate_bps)})")
    return "; ".join(parts) or "-"


def rows(link: Link) -> list[list[str]]:
    out = []
    for name, d in (("downlink (→ client)", link.downlink), ("uplink (→ server)", link.uplink)):
        jitter = "0" if d.jitter_s == 0 else (
            f"{format_duration(d.jitter_s)} {d.jitter_dist}{', reorders' if d.reorder else ''}")
        out.append([name, format_rate(d.rate_bps), format_duration(d.delay_s), jitter, _loss(d), _queue(d),
                    _extras(d)])
    return out


COLUMNS = ["direction", "rate", "delay", "jitter", "loss", "queue", "schedule"]


def one_line(link: Link) -> str:
    d, u = link.downlink, link.uplink
    same = d == u
    base = f"rtt {format_duration(link.rtt_s)}"
    if same:
        return f"{base}, rate {format_rate(d.rate_bps)}, loss {_loss(d)}, seed {link.seed}"
    return (f"{base}, down {format_rate(d.rate_bps)} loss {_loss(d)}, up {format_rate(u.rate_bps)} "
            f"loss {_loss(u)}, seed {link.seed}")
