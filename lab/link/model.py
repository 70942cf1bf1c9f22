"""The link parameter model: per direction, validated. Shared by both backends (they must agree on meaning).

Directions: `downlink` carries packets toward the client (server -> client), `uplink` toward the server.
Pipeline per direction, in this order (linkem/README.md has the exact semantics):
outage -> duplicate -> loss -> corrupt -> reorder pick -> queue discipline -> rate (overhead/mpu) -> loss after
the link -> delay + jitter -> slots.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Seconds = Annotated[float, Field(ge=0.0, le=60.0)]
PositiveSeconds = Annotated[float, Field(gt=0.0, le=60.0)]
JitterDist = Literal["uniform", "normal", "pareto", "paretonormal"]
MIN_QUEUE_BYTES = 64 * 1024
MIN_QUEUE_RTT_S = 0.010
MTU_BYTES = 1500


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoLoss(_Strict):
    model: Literal["none"] = "none"

    @property
    def mean(self) -> float:
        return 0.0


class Bernoulli(_Strict):
    model: Literal["bernoulli"] = "bernoulli"
    p: Probability

    @property
    def mean(self) -> float:
        return self.p


class GilbertElliott(_Strict):
    """Two-state Markov loss (netem `gemodel`): p = P(good->bad), r = P(bad->good) per packet."""

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p: Probability
    r: Annotated[float, Field(gt=0.0, le=1.0)]
    loss_good: Probability = 0.0
    loss_bad: Probability = 1.0

    @property
    def mean(self) -> float:
        return (self.p * self.loss_bad + self.r * self.loss_good) / (self.p + self.r)

    @property
    def mean_burst(self) -> float:
        """Mean run length of the bad state, in packets (= mean loss burst when loss_good=0, loss_bad=1)."""
        return 1.0 / self.r


Loss = Annotated[NoLoss | Bernoulli | GilbertElliott, Field(discriminator="model")]


class Outage(_Strict):
    """Link down (every arriving packet dropped) for `down_s` of every `period_s`, starting at `offset_s`."""

    period_s: Annotated[float, Field(gt=0.0, le=86400.0)]
    down_s: Annotated[float, Field(ge=0.0)]
    offset_s: Annotated[float, Field(ge=0.0, le=86400.0)] = 0.0

    @model_validator(mode="after")
    def _down_within_period(self) -> Outage:
        if self.down_s > self.period_s:
            raise ValueError(f"outage down time {self.down_s:g} s is longer than its period {self.period_s:g} s")
        return self


class RateSchedule(_Strict):
    """Piecewise-constant rate looping every `period_s`; steps are (start time in s, rate in bit/s)."""

    period_s: Annotated[float, Field(gt=0.0, le=86400.0)]
    steps: list[tuple[float, int]]

    @model_validator(mode="after")
    def _steps_sorted(self) -> RateSchedule:
        times = [t for t, _ in self.steps]
        if not self.steps or times[0] != 0:
            raise ValueError("a rate schedule's first step must start at 0")
        if any(b <= a for a, b in itertools.pairwise(times)) or times[-1] >= self.period_s:
            raise ValueError("rate schedule steps must be strictly increasing and inside the period")
        if any(r < 0 for _, r in self.steps) or not any(r > 0 for _, r in self.steps):
            raise ValueError("rate schedule rates must be >= 0 with at least one > 0")
        return self

    @property
    def mean_bps(self) -> float:
        ends = [t for t, _ in self.steps[1:]] + [self.period_s]
        return sum((end - t) * r for (t, r), end in zip(self.steps, ends, strict=True)) / self.period_s


class DropTail(_Strict):
    """FIFO; an arriving packet that does not fit is dropped."""

    kind: Literal["drop_tail"] = "drop_tail"


class DropHead(_Strict):
    """FIFO; the oldest waiting packets are dropped to make room for an arriving one."""

    kind: Literal["drop_head"] = "drop_head"


class Codel(_Strict):
    """CoDel (RFC 8289): drop (or ECN-mark) once the sojourn time stayed above target for an interval."""

    kind: Literal["codel"] = "codel"
    target_s: PositiveSeconds = 0.005
    interval_s: PositiveSeconds = 0.100
    ecn: bool = False


class FqCodel(_Strict):
    """fq_codel (RFC 8290): per-flow queues, deficit round robin of `quantum` IP bytes, CoDel per flow."""

    kind: Literal["fq_codel"] = "fq_codel"
    target_s: PositiveSeconds = 0.005
    interval_s: PositiveSeconds = 0.100
    ecn: bool = True
    flows: Annotated[int, Field(ge=1, le=65536)] = 1024
    quantum: Annotated[int, Field(ge=256, le=1 << 20)] = 1500


class Pie(_Strict):
    """PIE (RFC 8033, Linux sch_pie): early drop with a probability steered toward `target` queue delay."""

    kind: Literal["pie"] = "pie"
    target_s: PositiveSeconds = 0.015
    tupdate_s: Annotated[float, Field(ge=0.001, le=60.0)] = 0.015
    alpha: Annotated[float, Field(ge=0.0, le=2.0)] = 0.125
    beta: Annotated[float, Field(ge=0.0, le=2.0)] = 1.25
    max_burst_s: Seconds = 0.150
    ecn: bool = False
    bytemode: bool = False


Qdisc = Annotated[DropTail | DropHead | Codel | FqCodel | Pie, Field(discriminator="kind")]
QDISC_KINDS = ("drop_tail", "drop_head", "codel", "fq_codel", "pie")


class Slot(_Strict):
    """netem `slot`: packets leave only at slot instants, `delay_s` (+ jitter) apart, each passing at most `packets`
    packets and `bytes` bytes."""

    delay_s: PositiveSeconds
    jitter_s: Seconds = 0.0
    dist: JitterDist = "uniform"
    packets: Annotated[int, Field(gt=0, lt=2**32)] | None = None
    bytes: Annotated[int, Field(gt=0)] | None = None


def trace_mean_bps(entries: int, period_ms: float) -> float:
    """A mahimahi trace's mean rate: one 1500-byte delivery opportunity per entry, over its period (its last
    timestamp, ms)."""
    return entries * 1500 * 8 / (period_ms / 1000)


class Direction(_Strict):
    rate_bps: Annotated[int, Field(gt=0, le=10**12)] | None = None
    delay_s: Seconds = 0.0
    jitter_s: Seconds = 0.0
    jitter_dist: JitterDist = "uniform"
    # With order kept, how long each value of the delay process holds (None: 5 x jitter, at least 1 ms)
    jitter_interval_s: PositiveSeconds | None = None
    reorder: bool = False
    # netem `reorder P gap N`: once gap-1 packets were delayed normally, each skips the delay with probability P
    reorder_prob: Probability = 0.0
    reorder_gap: Annotated[int, Field(ge=1, lt=2**32)] = 1
    loss: Loss = NoLoss()
    loss_after: Loss = NoLoss()  # after the link (radio-like): the lost packet used link time
    loss_ecn: bool = False  # netem `ecn`: a loss event marks an ECN-capable packet CE instead of dropping it
    duplicate: Probability = 0.0
    corrupt: Probability = 0.0
    queue_packets: Annotated[int, Field(gt=0)] | None = None
    queue_bytes: Annotated[int, Field(gt=0)] | None = None
    queue_bdp: Annotated[float, Field(gt=0.0, le=1000.0)] | None = None  # bytes = this x the path's BDP
    qdisc: Qdisc = DropTail()
    overhead_bytes: Annotated[int, Field(ge=-1500, le=65535)] = 0
    mpu_bytes: Annotated[int, Field(ge=0, le=65535)] = 0
    slot: Slot | None = None
    outage: Outage | None = None
    rate_schedule: RateSchedule | None = None
    trace_ms: list[int] | None = None

    @model_validator(mode="after")
    def _trace_valid(self) -> Direction:
        t = self.trace_ms
        if t is not None and (not t or t[-1] <= 0 or any(b < a for a, b in itertools.pairwise(t))
                              or t[0] < 0):
            raise ValueError("a mahimahi trace must be non-decreasing millisecond timestamps ending above 0")
        if self.reorder_prob > 0 and self.delay_s <= 0:
            raise ValueError("reorder_prob needs a delay (a reordered packet skips the delay), as in netem")
        if self.queue_bdp is not None and (self.queue_bytes is not None or self.queue_packets is not None):
            raise ValueError("give the queue in BDPs or in bytes/packets, not both")
        return self

    @property
    def effective_rate_bps(self) -> float | None:
        """The mean rate of whatever shapes this direction (trace > schedule > constant rate)."""
        if self.trace_ms:
            return trace_mean_bps(len(self.trace_ms), self.trace_ms[-1])
        if self.rate_schedule:
            return self.rate_schedule.mean_bps
        return self.rate_bps

    @property
    def peak_rate_bps(self) -> float | None:
        if self.trace_ms:
            return self.effective_rate_bps
        if self.rate_schedule:
            return float(max(r for _, r in self.rate_schedule.steps))
        return self.rate_bps

    def queue_limit_bytes_for(self, rtt_s: float) -> int | None:
        """The byte limit in force on a path with round-trip time `rtt_s`: the one given; `queue_bdp` x the
        bandwidth-delay product (at least one packet); else one BDP (linkem's default rule):
        max(64 KiB, peak rate / 8 * max(rtt, 10 ms)). None when the rate is unlimited or only packets are given."""
        if self.queue_bytes is not None or self.queue_packets is not None:
            return self.queue_bytes
        rate = self.peak_rate_bps
        if rate is None:
            return None
        bdp = rate / 8 * max(rtt_s, MIN_QUEUE_RTT_S)
        if self.queue_bdp is not None:
            return max(MTU_BYTES, int(bdp * self.queue_bdp))
        return max(MIN_QUEUE_BYTES, int(bdp))




class Link(_Strict):
    """Both directions plus the seed that makes loss and jitter reproducible."""

    downlink: Direction = Direction()
    uplink: Direction = Direction()
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 1
    # Applying this link continues the random streams and Gilbert-Elliott states in force (a change in the middle of
    # a transfer) instead of restarting them from the seed (linkem only; the seed must then stay the same).
    keep_state: bool = False

    @property
    def rtt_s(self) -> float:
        """Base round-trip time the link adds (without queueing)."""
        return self.downlink.delay_s + self.uplink.delay_s

    def queue_limit_bytes(self, d: Direction) -> int | None:
        """`d`'s byte limit in force, the default sized from the whole path's RTT (both directions' delays)."""
        return d.queue_limit_bytes_for(self.rtt_s)
