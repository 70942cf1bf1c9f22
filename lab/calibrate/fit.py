"""The lab search's pure ends (`quiclab calibrate --search`): where it starts (the first estimates as a Candidate),
what it puts in force (a candidate as the same link the scenario file describes), what it writes (the fitted
estimate, fit.json with every candidate tried) and what it prints (each sender's relative errors)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.calibrate import trace
from lab.calibrate.estimate import Estimate
from lab.calibrate.scenario_file import Table, link_tables
from lab.calibrate.search import (
    MAX_RTT_S,
    MIN_RTT_S,
    Candidate,
    Fit,
    Limits,
    Observed,
    Result,
    Tried,
    loss_ladder,
    relative_errors,
)
from lab.calibrate.senders import Sender
from lab.calibrate.trace import scaled
from lab.errors import UsageError
from lab.link.model import Direction

FILE = "fit.json"


def start(e: Estimate, where: str) -> Candidate:
    """The first estimates as the search's start (without a rate no search). The queue not estimated starts at the
    lab's default (one BDP, at least 64 KiB). With a downlink rate trace the candidate's rate is the trace's mean:
    the search scales the trace (`fitted`); an uplink trace stays as estimated. Within the evidence's limits
    (`search_range`)."""
    if not e.down_rate_bps:
        raise UsageError(f"{where}: no downlink rate estimate to start the lab search from")
    queue = e.down_queue_bytes or Direction(rate_bps=round(e.down_rate_bps)).queue_limit_bytes_for(e.rtt_s)
    return Candidate(rate_bps=e.down_rate_bps, rtt_s=e.rtt_s, queue_bytes=int(queue or 1500),
                     loss=min(e.down_loss or 0.0, search_range(e)[1].max_loss), trace=bool(e.down_trace_ms))


def shapes(e: Estimate, first: Candidate) -> list[Candidate]:
    """The start with the downlink's other shape, when the estimate kept both (--rate auto, a long enough download):
    a constant rate (the median after start-up) for a rate trace, or the download's delivery rate as a trace (at
    its own mean) for a constant rate, without random loss: a varying rate overflows the queue, which is what the
    other shape may explain instead of random loss (at the start's loss, the evidence's upper bound, the TMobile
    link's trace-shaped start gave cubic 1.6 Mbit/s for the path's 14.7). None for a recorded trace or a shape the
    user asked for."""
    if not e.down_delivery_ms or not e.down_median_bps:
        return []
    if first.trace:
        return [replace(first, rate_bps=e.down_median_bps, trace=False, loss=0.0)]
    return [replace(first, rate_bps=trace.mean_rate(e.down_delivery_ms), trace=True, loss=0.0)]


#: How far below the lowest RTT without load a link's RTT setting may be: that sample met an empty queue, so it
#: waited beyond its base only for the link's next delivery (the lab's, and a rate trace's, 1 ms steps) each way.
RTT_SLACK_S = 0.002


def search_range(e: Estimate) -> tuple[list[float] | None, Limits]:
    """The search's first losses and its limits. Losses: from the retransmissions' bounds (estimate.loss_bounds)
    when the input times them (search.loss_ladder; at most the upper bound), else the search's own grid and the
    lab's limit. RTT: at most the estimate's setting, which the lowest RTT in the user's files gave (with jitter,
    base + 2 x jitter: the lab's jitter reaches down to that base), and when that was a sample without load at
    least the setting less RTT_SLACK_S (a base from samples under load may hold a queue: no lower bound)."""
    max_rtt = min(MAX_RTT_S, max(MIN_RTT_S, e.rtt_s))  # within the lab's own limits (a loopback path's is below)
    min_rtt = max(MIN_RTT_S, max_rtt - RTT_SLACK_S) if e.base_idle else MIN_RTT_S
    rtt = Limits(max_rtt_s=max_rtt, min_rtt_s=min_rtt)
    if e.down_loss_max is None or e.down_loss_steady is None:
        return None, rtt
    return loss_ladder(e.down_loss_steady, e.down_loss_max), replace(rtt, max_loss=e.down_loss_max)


def _down_base(e: Estimate, c: Candidate) -> list[int] | None:
    """The trace a candidate's downlink is a scale of (None: a constant rate), by its shape (`fitted`)."""
    if c.trace is False:
        return None
    return e.down_trace_ms or (e.down_delivery_ms if c.trace else None)


def fitted(e: Estimate, c: Candidate) -> Estimate:
    """The estimate with a candidate's rate, RTT, queue and random loss (jitter and uplink as estimated); a downlink
    rate trace scaled to the candidate's rate as its mean (the same pattern). The candidate's shape (`trace`): None
    the estimate's, True its trace (or the download's delivery rate as one), False a constant rate."""
    base = _down_base(e, c)
    down = base
    if base and c.rate_bps != (mean := trace.mean_rate(base)):
        down = scaled(base, c.rate_bps / mean)
    return e.model_copy(update={"rtt_s": c.rtt_s, "down_rate_bps": c.rate_bps, "down_queue_bytes": c.queue_bytes,
                                "down_loss": c.loss or None, "down_trace_ms": down or None})


def candidate_tables(e: Estimate, c: Candidate, folder: Path | None = None) -> tuple[Table, Table, Table]:
    """What the lab puts in force for a candidate: the link the scenario file would hold had it been chosen. A link
    with rate traces needs `folder`, where they are written (one file per candidate's downlink trace)."""
    f = fitted(e, c)
    traces: dict[str, Path] = {}
    for way, ms in (("down", f.down_trace_ms), ("up", f.up_trace_ms)):
        if not ms:
            continue
        if folder is None:
            raise ValueError("a candidate with a rate trace needs a folder for its trace files")
        folder.mkdir(parents=True, exist_ok=True)
        name = f"candidate-{round(c.rate_bps)}.down.trace" if way == "down" else "uplink.up.trace"
        traces[way] = folder / name
        if not traces[way].is_file():
            trace.write(traces[way], ms)
    return link_tables(f, traces)


def _observed(o: Observed) -> dict[str, float]:
    out = {"throughput_bps": o.throughput_bps, "p50_rtt_s": o.p50_rtt_s}
    if o.retransmit_rate is not None:
        out["retransmit_rate"] = o.retransmit_rate
    if o.retransmits is not None and o.segments is not None:
        out["retransmits"], out["segments"] = o.retransmits, o.segments
    return out


def _tried(t: Tried) -> dict[str, Any]:
    return {"candidate": {"rate_bps": t.candidate.rate_bps, "rtt_s": t.candidate.rtt_s,
                          "queue_bytes": t.candidate.queue_bytes, "loss": t.candidate.loss,
                          "trace": t.candidate.trace},
            "error": None if math.isinf(t.error) else t.error,
            "result": None if t.result is None else {s: _observed(o) for s, o in t.result.items()}}


def fit_doc(fit: Fit, real: Result, senders: dict[str, Sender], start_at: Candidate) -> dict[str, Any]:
    """fit.json: the real path's senders, the start, the fit (best, why it stopped) and every candidate tried, in
    the order measured (failed ones with error null)."""
    return {"senders": {k: {"cc": s.cc, "direction": s.direction, "seconds": s.seconds} for k, s in senders.items()},
            "real": {s: _observed(o) for s, o in real.items()},
            "start": _tried(Tried(start_at, None, math.inf, {}))["candidate"],
            "best": _tried(fit.best), "rounds": fit.rounds, "stopped": fit.stopped,
            "tried": [_tried(t) for t in fit.tried]}


def error_rows(real: Result, best: Tried) -> list[list[str]]:
    """Per sender: real and fitted throughput and p50 RTT, and their relative errors."""
    rows = []
    for name, r in real.items():
        got = best.result.get(name) if best.result is not None else None
        if got is None:
            rows.append([name, f"{r.throughput_bps / 1e6:.3f}", "-", "-", f"{r.p50_rtt_s * 1000:.1f}", "-", "-"])
            continue
        dt, dr = relative_errors(r, got)
        rows.append([name, f"{r.throughput_bps / 1e6:.3f}", f"{got.throughput_bps / 1e6:.3f}", f"{dt:+.1%}",
                     f"{r.p50_rtt_s * 1000:.1f}", f"{got.p50_rtt_s * 1000:.1f}", f"{dr:+.1%}"])
    return rows


ERROR_COLUMNS = ["sender", "real Mbit/s", "fitted Mbit/s", "error", "real p50 RTT ms", "fitted p50 RTT ms", "error"]


def describe(c: Candidate, e: Estimate | None = None) -> str:
    """A candidate in words; with its estimate, a downlink rate trace says so (the rate is that trace scaled to
    this mean) and jitter is named when there is some."""
    shape = None if e is None else _down_base(e, c)  # scaling keeps the period: no need to scale it here
    if shape:
        rate = f"rate trace ({shape[-1] / 1000:g} s) scaled to mean {c.rate_bps / 1e6:.3f} Mbit/s"
    else:
        rate = f"rate {c.rate_bps / 1e6:.3f} Mbit/s"
    jitter = f", jitter {e.jitter_s * 1000:.2f} ms" if e is not None and e.jitter_s else ""
    return f"{rate}, RTT {c.rtt_s * 1000:.2f} ms{jitter}, queue {c.queue_bytes} B, loss {c.loss:.4%}"
