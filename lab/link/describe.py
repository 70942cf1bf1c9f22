"""Human-readable rows for a Link (used by `quiclab shape` and run headers)."""

from __future__ import annotations

from lab.link.model import Bernoulli, Codel, Direction, FqCodel, GilbertElliott, Link, Loss, Pie
from lab.link.units import format_duration, format_rate


def _loss(d: Direction) -> str:
    return _loss_model(d.loss)


def _loss_model(loss: Loss) -> str:
    if isinstance(loss, Bernoulli):
        return f"{loss.p * 100:g} %"
    if isinstance(loss, GilbertElliott):
        g = loss
        return (f"GE p={g.p * 100:g}% r={g.r * 100:g}% (mean {g.mean * 100:.3g} %, burst {g.mean_burst:.3g})")
    return "0"


def _queue(link: Link, d: Direction) -> str:
    q = link.queue_limit_bytes(d)
    limit = f"{d.queue_packets} packets" if d.queue_packets is not None else ("-" if q is None else f"{q} bytes")
    if d.queue_bdp is not None and q is not None:
        limit += f" ({d.queue_bdp:g} BDP)"
    return limit if d.qdisc.kind == "drop_tail" else f"{limit}, {_qdisc(d)}"


def _qdisc(d: Direction) -> str:
    q = d.qdisc
    if isinstance(q, Codel | FqCodel | Pie):
        ecn = ", ecn" if q.ecn else ""
        return f"{q.kind} target {format_duration(q.target_s)}{ecn}"
    return q.kind


def _pct(p: float) -> str:
    return f"{p * 100:g} %"


def _netem_like(d: Direction) -> list[str]:
    parts = []
    if d.duplicate:
        parts.append(f"duplicate {_pct(d.duplicate)}")
    if d.corrupt:
        parts.append(f"corrupt {_pct(d.corrupt)}")
    if d.reorder_prob:
        parts.append(f"reorder {_pct(d.reorder_prob)} gap {d.reorder_gap}")
    if d.loss_after.mean > 0:
        parts.append(f"loss after the link {_loss_model(d.loss_after)}")
    if d.loss_ecn:
        parts.append("loss marks ECN")
    if d.slot is not None:
        sl = d.slot
        jitter = f" ± {format_duration(sl.jitter_s)} {sl.dist}" if sl.jitter_s else ""
        budget = "".join([f", {sl.packets} packets" if sl.packets else "", f", {sl.bytes} bytes" if sl.bytes else ""])
        parts.append(f"slots every {format_duration(sl.delay_s)}{jitter}{budget}")
    if d.overhead_bytes or d.mpu_bytes:
        parts.append(f"overhead {d.overhead_bytes} B, mpu {d.mpu_bytes} B")
    if d.jitter_interval_s is not None:
        parts.append(f"jitter interval {format_duration(d.jitter_interval_s)}")
    return parts


def _extras(d: Direction) -> str:
    parts = _netem_like(d)
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
        out.append([name, format_rate(d.rate_bps), format_duration(d.delay_s), jitter, _loss(d), _queue(link, d),
                    _extras(d)])
    return out


COLUMNS = ["direction", "rate", "delay", "jitter", "loss", "queue", "other"]


def one_line(link: Link) -> str:
    d, u = link.downlink, link.uplink
    same = d == u
    base = f"rtt {format_duration(link.rtt_s)}"
    if same:
        return f"{base}, rate {format_rate(d.rate_bps)}, loss {_loss(d)}, seed {link.seed}"
    return (f"{base}, down {format_rate(d.rate_bps)} loss {_loss(d)}, up {format_rate(u.rate_bps)} "
            f"loss {_loss(u)}, seed {link.seed}")
