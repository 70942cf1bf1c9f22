"""The search over candidate links (Pantheon's calibration): run the measured senders through candidate links and
keep the one whose throughput and delay come closest to what the same senders got on the real path.

This module is the search only; measuring a candidate is the caller's: `measure(candidates)` runs every measured
sender over each candidate link (in the lab: a sweep of those senders on that link, parallel labs for a batch) and
returns, per candidate, each sender's throughput and p50 RTT under load, or None for a candidate that could not be
measured (kept among the tried ones with an infinite error, never chosen: a failure is censored, not dropped).

- Objective, per sender: |throughput / real - 1| + |p50 RTT / real - 1|; a candidate's error is the mean over the
  senders (each sender weighs the same, however fast). A sender the candidate's result lacks counts as infinite.
- Search: a pattern search in log space over the downlink's rate, the RTT, the queue and the random loss, from the
  first estimates: each round measures the 2 x 4 neighbours (each parameter times and divided by e^step) as one
  batch, moves to the best one if it lowers the error, else halves the step; it stops when the step is below
  `min_step` or the budget of measured candidates is spent. Parameters stay within the lab's limits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

MIN_RATE_BPS = 10_000.0
MAX_RATE_BPS = 10e9
MIN_RTT_S = 0.0001
MAX_RTT_S = 10.0
MIN_QUEUE_BYTES = 1500
MAX_QUEUE_BYTES = 1 << 30
MAX_LOSS = 0.5
LOSS_FLOOR = 1e-5  # loss 0 is searched as this (log space); a result below it is written as 0
PARAMS = ("rate_bps", "rtt_s", "queue_bytes", "loss")


@dataclass(frozen=True)
class Candidate:
    """A link the search tries: what differs between candidates (the rest of the link stays as estimated)."""

    rate_bps: float
    rtt_s: float
    queue_bytes: int
    loss: float = 0.0

    def link(self) -> dict[str, str]:
        """The candidate as scenario [link] settings (lab/link/spec.py keys; rate, queue and loss on the downlink)."""
        return {"rtt": f"{self.rtt_s * 1000:.4f}ms", "rate": f"{self.rate_bps / 1e6:.6f}mbit",
                "queue": f"{self.queue_bytes}B", "loss": f"{self.loss * 100:.5f}%"}


@dataclass(frozen=True)
class Observed:
    throughput_bps: float
    p50_rtt_s: float


Result = Mapping[str, Observed]
#: Measures each candidate with every sender; a batch so that the caller can spread it over parallel labs.
Measure = Callable[[Sequence[Candidate]], Sequence[Result | None]]


@dataclass(frozen=True)
class Tried:
    candidate: Candidate
    result: Result | None
    error: float
    per_sender: dict[str, float]


@dataclass
class Fit:
    best: Tried
    tried: list[Tried] = field(default_factory=list)
    rounds: int = 0
    stopped: str = ""


def sender_error(real: Observed, got: Observed) -> float:
    if real.throughput_bps <= 0 or real.p50_rtt_s <= 0:
        raise ValueError("the real path's throughput and RTT must be above 0")
    return abs(got.throughput_bps / real.throughput_bps - 1) + abs(got.p50_rtt_s / real.p50_rtt_s - 1)


def error(real: Result, got: Result | None) -> tuple[float, dict[str, float]]:
    """(the candidate's error, each sender's)."""
    if not real:
        raise ValueError("no senders to compare")
    per = {s: (sender_error(r, got[s]) if got is not None and s in got else math.inf) for s, r in real.items()}
    return sum(per.values()) / len(per), per


def _vector(c: Candidate) -> list[float]:
    return [math.log(c.rate_bps), math.log(c.rtt_s), math.log(c.queue_bytes), math.log(max(c.loss, LOSS_FLOOR))]


def _candidate(x: Sequence[float]) -> Candidate:
    loss = math.exp(x[3])
    return Candidate(rate_bps=min(MAX_RATE_BPS, max(MIN_RATE_BPS, math.exp(x[0]))),
                     rtt_s=min(MAX_RTT_S, max(MIN_RTT_S, math.exp(x[1]))),
                     queue_bytes=min(MAX_QUEUE_BYTES, max(MIN_QUEUE_BYTES, round(math.exp(x[2])))),
                     loss=0.0 if loss <= LOSS_FLOOR * 1.0001 else min(MAX_LOSS, loss))


def _key(c: Candidate) -> tuple[float, ...]:
    return (round(c.rate_bps, -2), round(c.rtt_s, 6), float(c.queue_bytes), round(c.loss, 7))


def search(real: Result, start: Candidate, measure: Measure, budget: int = 40, step: float = 0.5,
           min_step: float = 0.02, progress: Callable[[Fit], None] | None = None) -> Fit:
    """The candidate link nearest to the real path (see the module's docstring); every candidate measured is kept
    in `tried`, in the order measured."""
    if budget < 1:
        raise ValueError("budget must be at least 1")
    seen: dict[tuple[float, ...], Tried] = {}

    def run(batch: Sequence[Candidate]) -> list[Tried]:
        fresh = [c for c in dict.fromkeys(batch) if _key(c) not in seen][: budget - len(fit.tried)]
        results = list(measure(fresh)) if fresh else []
        if len(results) != len(fresh):
            raise ValueError(f"measure returned {len(results)} results for {len(fresh)} candidates")
        for c, r in zip(fresh, results, strict=True):
            e, per = error(real, r)
            seen[_key(c)] = t = Tried(c, r, e, per)
            fit.tried.append(t)
        return [seen[_key(c)] for c in batch if _key(c) in seen]

    start = _candidate(_vector(start))
    first = Tried(start, None, math.inf, {})
    fit = Fit(best=first)
    fit.best = run([start])[0]
    x = _vector(fit.best.candidate)
    while True:
        if step < min_step:
            fit.stopped = f"converged (step below {min_step:g})"
            break
        if len(fit.tried) >= budget:
            fit.stopped = f"budget of {budget} candidates spent"
            break
        neighbours = [_candidate([v + d * step if i == k else v for i, v in enumerate(x)])
                      for k in range(len(x)) for d in (1, -1)]
        tried = run(neighbours)
        fit.rounds += 1
        better = min(tried, key=lambda t: t.error, default=None)
        if better is not None and better.error < fit.best.error:
            fit.best = better
            x = _vector(better.candidate)
        else:
            step /= 2
        if progress is not None:
            progress(fit)
    return fit

