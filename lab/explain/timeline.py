"""One run's own transfer-time split and delivered-bytes curve, stored in its explain.json (`Explanation.timeline`)
so that the report can compare methods offline (lab/report/why.py) without tshark.

The split and the curve are exactly what `quiclab explain --versus` computes for the run explained
(lab/explain/versus.py: `trace`, `analyse`, `components`; docs/explain.md), here for every explained run; only the
curve is downsampled to at most MAX_POINTS points. Sans-IO: tshark's rows of the client-side capture and the run's
runs.csv fields in, a Timeline (or None) out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lab.explain import versus as vs
from lab.explain.model import Timeline
from lab.explain.rows import Row
from lab.results.schema import RunRecord

#: the most curve points a timeline keeps (the full curve has one point per server packet with payload)
MAX_POINTS = 300


def downsample(curve: vs.Curve, limit: int = MAX_POINTS) -> list[int]:
    """Indices of at most `limit` (>= 4) points of the curve that keep its shape: the first and the last point, the
    hole fills (an arrival after which the in-order bytes grew by more than the bytes it brought: the jump at the
    end of a flat stretch) each with the first and last point of the flat stretch before it, the largest jumps
    first while they take at most half the budget, and every k-th point to fill the rest."""
    n, limit = len(curve.t), max(limit, 4)
    if n <= limit:
        return list(range(n))
    flat_start = [0] * n  # the first point of the flat stretch (equal in-order bytes) each point is in
    for k in range(1, n):
        flat_start[k] = flat_start[k - 1] if curve.in_order[k] == curve.in_order[k - 1] else k
    fills = [i for i in range(1, n)
             if curve.in_order[i] - curve.in_order[i - 1] > curve.received[i] - curve.received[i - 1]]
    fills.sort(key=lambda i: (curve.in_order[i - 1] - curve.in_order[i], i))  # the largest jump first
    keep = {0, n - 1}
    for i in fills:
        corners = {flat_start[i - 1], i - 1, i}
        if len(keep | corners) > limit // 2:
            break
        keep |= corners
    step = math.ceil(n / (limit - len(keep)))  # range(0, n, step) has at most limit - len(keep) points
    keep.update(range(0, n, step))
    return sorted(keep)


def timeline(rows: Sequence[Row], protocol: str, total_s: float | None, rate_bps: float | None,
             limit: int = MAX_POINTS) -> Timeline | None:
    """The run's split (versus.components) and its downsampled curve, from tshark's rows of its client-side capture
    (decrypted); None when there is no transfer time, no request or no server payload in the rows: nothing is
    invented."""
    if total_s is None:
        return None
    tr = vs.trace(rows, "quic" if protocol == "h3" else "tcp")
    if tr.request_s is None or not any(a.ranges for a in tr.arrivals):
        return None
    c, an = vs.components(protocol, "", [total_s], total_s, tr, rate_bps)
    keep = downsample(an.curve, limit)
    return Timeline(total_ms=c.total_ms, handshake_ms=c.handshake_ms, loss_recovery_ms=c.loss_recovery_ms,
                    rest_ms=c.rest_ms, stalled_ms=c.stalled_ms, resent_ms=c.resent_ms, episodes=c.episodes,
                    resent_bytes=c.resent_bytes, last_byte_ms=c.last_byte_ms, rate_bps=rate_bps,
                    curve_points=len(an.curve.t), t_ms=[round(an.curve.t[i] * 1000, 3) for i in keep],
                    in_order_bytes=[an.curve.in_order[i] for i in keep],
                    received_bytes=[an.curve.received[i] for i in keep])


def of_run(rows: Sequence[Row], record: RunRecord) -> Timeline | None:
    """A run's timeline from its record: only an `ok` bulk transfer (one object over one connection: several
    connections' byte streams would share one curve, as `--versus` refuses them) has one."""
    if record.status != "ok" or (record.workload or "bulk") != "bulk":
        return None
    return timeline(rows, record.protocol, record.total_s, record.rate_bps)
