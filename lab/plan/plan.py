"""Expand a scenario into points and a seeded, shuffled list of runs.

Every point x protocol x client x server x repeat is one run. Runs execute in a random order drawn from the
scenario seed (so drift over time does not masquerade as an effect of a parameter), and all protocols at the
same point and repeat share one link seed (a paired comparison: the same loss pattern for each protocol).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any

from lab.adverse.spec import parse_faults
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.link.units import parse_duration, parse_percent, parse_rate
from lab.plan.scenario import DIMENSIONS, OFF, Scenario, runs_pair
from lab.plan.settings import Settings, parse_settings
from lab.protocols import Protocol
from lab.sizes import parse_size

_X = {  # swept key -> (x_name, numeric value of a setting)
    "loss": ("loss_pct", lambda v: parse_percent(v) * 100),
    "rtt": ("rtt_ms", lambda v: parse_duration(v) * 1000),
    "delay": ("delay_ms", lambda v: parse_duration(v) * 1000),
    "jitter": ("jitter_ms", lambda v: parse_duration(v) * 1000),
    "rate": ("rate_mbit", lambda v: parse_rate(v) / 1e6),
    "size": ("size_bytes", lambda v: float(parse_size(v))),
    "faults": ("fault_s", lambda v: sum(f.duration_s for f in parse_faults(v))),  # total fault time in the run
}


@dataclass(frozen=True)
class Point:
    index: int
    label: str
    link: Link      # with the scenario's base seed; each run replaces it with its paired seed
    size: int
    x_name: str
    x: float
    #: the non-link dimensions at this point (scenario.DIMENSIONS but size), parsed once: swept values, else the
    #: scenario's defaults
    settings: Settings = field(default_factory=Settings)


@dataclass(frozen=True)
class PlannedRun:
    key: str
    point: Point
    protocol: Protocol
    client: str
    server: str
    repeat: int
    seed: int
    order: int

    def link(self) -> Link:
        return self.point.link.model_copy(update={"seed": self.seed})


def _dims(s: Scenario) -> list[tuple[str, list[str]]]:
    dims = [(k, [str(v) for v in vs]) for k, vs in s.sweep.items()]
    if "size" not in s.sweep and len(s.sizes) > 1:
        dims.append(("size", list(s.sizes)))
    return dims


def points(s: Scenario) -> list[Point]:
    dims = _dims(s)
    base = {k: v for k, v in s.link.items() if k not in ("down", "up")}
    down, up = s.link.get("down", {}), s.link.get("up", {})
    single = len(dims) == 1 and dims[0][0] in _X
    out = []
    for i, combo in enumerate(itertools.product(*(vs for _, vs in dims))):
        setting = dict(zip((k for k, _ in dims), combo, strict=True))
        size = parse_size(setting.get("size", s.sizes[0]))
        spec: dict[str, Any] = dict(base)
        spec.update({k: v for k, v in setting.items() if k not in DIMENSIONS and v != OFF})
        label = " ".join(f"{k}={v}" for k, v in setting.items()) or "base"
        if single:
            key = dims[0][0]
            x_name, x = _X[key][0], _X[key][1](setting[key])
        else:
            x_name, x = "point", float(i)
        extra = {k: str(getattr(s, k)) for k in DIMENSIONS if k != "size" and getattr(s, k, None) not in (None, "")}
        extra.update({k: v for k, v in setting.items() if k in DIMENSIONS and k != "size"})
        out.append(Point(index=i, label=label, link=parse_link(spec, down, up), size=size, x_name=x_name, x=x,
                         settings=parse_settings(extra)))
    return out


def link_seed(scenario_seed: int, point: int, repeat: int) -> int:
    digest = hashlib.sha256(f"{scenario_seed}:{point}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**63


def plan(s: Scenario) -> list[PlannedRun]:
    runs = []
    for p in points(s):
        for repeat in range(s.repeats):
            seed = link_seed(s.seed, p.index, repeat)
            for proto, client, server in itertools.product(s.protocols, s.clients, s.servers):
                if not runs_pair(s, client, server, proto):
                    continue
                key = f"{p.index}/{proto}/{client}/{server}/{repeat}"
                runs.append(PlannedRun(key, p, Protocol(proto), client, server, repeat, seed, 0))
    random.Random(s.seed).shuffle(runs)
    return [PlannedRun(r.key, r.point, r.protocol, r.client, r.server, r.repeat, r.seed, i)
            for i, r in enumerate(runs)]


def timeout_for(s: Scenario, p: Point) -> float:
    """The scenario's timeout, or a generous one derived from the link: 4x the time a loss-limited TCP flow
    (Mathis: rate <= MSS/RTT * 1.22/sqrt(p)) would need, plus slack; 60 s at least, 3600 s at most."""
    if s.timeout:
        return s.timeout
    d = p.link.downlink
    rate = d.effective_rate_bps or 1e9
    rtt = max(p.link.rtt_s + 2 * d.jitter_s, 0.001)
    loss = d.loss.mean + p.link.uplink.loss.mean
    if loss > 0:
        rate = min(rate, 1448 * 8 / rtt * 1.22 / math.sqrt(loss))
    w = p.settings.workload
    connections = w.objects if w.kind == "new" else 2 if w.sessions else 1
    expected = w.total_bytes(p.size) * (2 if w.sessions else 1) * 8 / rate + 10 * rtt * connections
    return min(3600.0, max(60.0, 4 * expected + 10))


def groups(runs: list[PlannedRun]) -> list[tuple[int, int]]:
    """The plan's (point, repeat) groups, sorted: each holds every protocol/client/server run of one paired
    comparison (one link seed)."""
    return sorted({(r.point.index, r.repeat) for r in runs})


def shard(runs: list[PlannedRun], index: int, count: int) -> list[PlannedRun]:
    """Shard `index` of `count` (1-based) of a plan: whole (point, repeat) groups, dealt in turn over the groups
    sorted by point and repeat (so every shard gets about repeats/count of every point: a slow point is spread
    over the shards, and a difference between shards' machines spreads over all points instead of mimicking a
    parameter's effect). The runs keep their keys, seeds and `order`; a shard executes them in the plan's order.
    The shards of one plan are disjoint and together hold every run."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: need 1 <= index <= count")
    mine = {g for n, g in enumerate(groups(runs)) if n % count == index - 1}
    return sorted((r for r in runs if (r.point.index, r.repeat) in mine), key=lambda r: r.order)
