"""The link parameter model: per direction, validated. Shared by both backends (they must agree on meaning).

Directions: `downlink` carries packets toward the client (server -> client), `uplink` toward the server.
Pipeline per direction, in this order: outage -> loss -> drop-tail queue + rate -> delay + jitter.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Seconds = Annotated[float, Field(ge=0.0, le=60.0)]
JitterDist = Literal["uniform", "normal", "pareto", "paretonormal"]
MIN_QUEUE_BYTES = 64 * 1024
MIN_QUEUE_RTT_S = 0.010


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


class Direction(_Strict):
    rate_bps: Annotated[int, Field(gt=0, le=10**12)] | None = None
    delay_s: Seconds = 0.0
    jitter_s: Seconds = 0.0
    jitter_dist: JitterDist = "uniform"
    reorder: bool = False
    loss: Loss = NoLoss()
    queue_packets: Annotated[int, Field(gt=0)] | None = None
    queue_bytes: Annotated[int, Field(gt=0)] | None = None
    outage: Outage | None = None
    rate_schedule: RateSchedule | None = None
    trace_ms: list[int] | None = None

    @model_validator(mode="after")
    def _trace_valid(self) -> Direction:
        t = self.trace_ms
        if t is not None and (not t or t[-1] <= 0 or any(b < a for a, b in itertools.pairwise(t))
                              or t[0] < 0):
            raise ValueError("a mahimahi trace must be non-decreasing millisecond timestamps ending above 0")
        return self

    @property
    def effective_rate_bps(self) -> float | None:
        """The mean rate of whatever shapes this direction (trace > schedule > constant rate)."""
        if self.trace_ms:
            return len(self.trace_ms) * 1500 * 8 / (self.trace_ms[-1] / 1000)
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

    @property
    def queue_limit_bytes(self) -> int | None:
        """The byte limit in force: the one given, else one bandwidth-delay product (same rule as linkem's):
        max(64 KiB, peak rate / 8 * max(2 * delay, 10 ms)); None when the rate is unlimited."""
        if self.queue_bytes is not None or self.queue_packets is not None:
            return self.queue_bytes
        rate = self.peak_rate_bps
        if rate is None:
            return None
        return max(MIN_QUEUE_BYTES, int(rate / 8 * max(2 * self.delay_s, MIN_QUEUE_RTT_S)))


class Link(_Strict):
    """Both directions plus the seed that makes loss and jitter reproducible."""

    downlink: Direction = Direction()
    uplink: Direction = Direction()
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 1

    @property
    def rtt_s(self) -> float:
        """Base round-trip time the link adds (without queueing)."""
        return self.downlink.delay_s + self.uplink.delay_s
