"""Execute a sweep's plan: set the link, run one verified transfer, record it, next.

What is a result and what is not:
- a transfer that completed, failed or timed out for the transport's own reasons is a result: recorded, the
  sweep goes on (failures are never dropped; the statistics count them as censored);
- a run the lab could not carry out (Docker, a container stopped or frozen, the emulator not answering, the
  harness's output missing) is NOT a result: nothing is recorded, the run is retried while the lab is healthy,
  and otherwise the sweep stops with the lab's error (a resume runs it again);
- a run cut short by Ctrl-C (or SIGTERM) is NOT a result either: nothing is recorded, the sweep stops cleanly.
  A signal that lands while a finished run is being written lets that record complete first."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab import objects
from lab.adverse import run as adverse
from lab.adverse.check import unsupported as adverse_unsupported
from lab.endpoints import get_client
from lab.endpoints.registry import registry
from lab.errors import QuiclabError, UsageError
from lab.evidence import capture
from lab.evidence.goodput import pcap_goodput
from lab.link import linkem, router, shaper
from lab.link.model import Link
from lab.protocols import Protocol
from lab.results.schema import RunRecord
from lab.sweep.plan import PlannedRun
from lab.sweep.store import RunLog
from lab.transfer import run_transfer, stop_clients

CURL_TIMEOUT_EXIT = 28
_BYTES = re.compile(r'^quiclab_link_bytes_total\{direction="(downlink|uplink)",protocol="[a-z]+"\} (\d+)$', re.M)


@dataclass
class Context:
    sweep: str
    shaper: str                # requested backend: auto | netem | linkem
    cc: dict[str, dict[str, str | None]]  # implementation -> {"tcp": ..., "quic": ...} (manifest "implementations")
    timeout_for: Callable[[PlannedRun], float]
    quic_cc: dict[str, str] = field(default_factory=dict)  # client -> chosen QUIC congestion control (scenario)
    capture: tuple[str, ...] = ()  # evidence kinds to keep per run (pcap, keylog, qlog)
    folder: Path | None = None     # the sweep folder (evidence goes to <folder>/evidence/<run>/)

    def cc_of(self, implementation: str, protocol: Protocol) -> str:
        """"unknown" if the manifest does not say; "none" if the implementation has no such transport."""
        if implementation not in self.cc:
            return "unknown"
        return self.cc[implementation].get("quic" if protocol is Protocol.H3 else "tcp") or "none"


def wire_counters(backend: str) -> tuple[int, int] | None:
    """IP bytes delivered (downlink, uplink) so far: linkem's counters, or the router's interface counters."""
    try:
        if backend == "linkem":
            totals = {"downlink": 0, "uplink": 0}
            for direction, value in _BYTES.findall(linkem.metrics_text()):
                totals[direction] += int(value)
            return totals["downlink"], totals["uplink"]
        ifs = router.interfaces()
        out = router.run("cat", *(f"/sys/class/net/{i}/statistics/{c}" for i in (ifs.client_side, ifs.server_side)
                                  for c in ("tx_bytes", "tx_packets")))
        cb, cp, sb, sp = (int(x) for x in out.split())
        return cb - 14 * cp, sb - 14 * sp
    except (QuiclabError, ValueError):
        return None


def _record(run: PlannedRun, ctx: Context, backend: str, link: Link, started: str) -> RunRecord:
    return RunRecord(
        sweep=ctx.sweep, run_key=run.key, point=run.point.index, point_label=run.point.label,
        x_name=run.point.x_name, x=run.point.x, protocol=run.protocol.value, client=run.client, server=run.server,
        repeat=run.repeat, order=run.order, seed=run.seed, shaper=backend,
        rate_bps=link.downlink.effective_rate_bps, rtt_s=link.rtt_s, loss_pct=link.downlink.loss.mean * 100,
        jitter_s=link.downlink.jitter_s, link=json.dumps(linkem.to_json(link), separators=(",", ":")),
        size_bytes=run.point.size, status="failed", failure="", http_version="", bytes=0, sha256_ok=False,
        handshake_s=None, ttfb_s=None, total_s=None, goodput_bps=None, wall_s=0.0, overhead_s=None,
        wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None,
        cc_client=ctx.cc_of(run.client, run.protocol), cc_server=ctx.cc_of(run.server, run.protocol),
        started_at=started, timeout_s=ctx.timeout_for(run))


class EnvironmentFailure(QuiclabError):
    """The lab, not the transport, failed during a run: the run is not a result."""

    exit_code = 2


#: Attempts per run when the lab fails but is healthy again right after (a transient Docker or emulator hiccup).
ENV_ATTEMPTS = 3


def _lab_problem() -> str | None:
    from lab import lab  # (lazy: lab.lab pulls in the observability services)

    return lab.health_problem()


def execute(run: PlannedRun, ctx: Context) -> RunRecord:
    """One run -> its record. Raises EnvironmentFailure when the lab (not the transport) failed, and lets
    KeyboardInterrupt through: in both cases nothing is recorded."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    t0 = time.monotonic()
    link = run.link()
    backend = ctx.shaper
    rec = _record(run, ctx, backend, link, started)
    why = registry().unsupported(run.client, run.server, run.protocol) or adverse_unsupported(
        run.point.settings, run.client, run.protocol)
    if why:  # the registry says this combination cannot run: recorded as such, not run, not a failure
        rec.status, rec.failure = "unsupported", why
        return rec
    try:
        choice, _ = shaper.apply(link, ctx.shaper)
        rec.shaper = backend = choice.backend
        adapter = get_client(run.client)
        root = ctx.folder or Path.cwd()
        with capture.collecting(ctx.capture, root, root / "evidence" / run.key.replace("/", "_"), adapter.name,
                                adapter.container, registry().server(run.server)) as ev:
            before = wire_counters(backend)
            with adverse.during(run.point.settings, server=run.server, protocol=run.protocol, backend=backend,
                                link=link, size=run.point.size, timeout_s=ctx.timeout_for(run),
                                port=ev.server_port) as adv:
                result = run_transfer(adapter, run.server, run.protocol, run.point.size, ctx.timeout_for(run),
                                      cc=ctx.quic_cc.get(run.client), env={**ev.client_env, **adv.client_env},
                                      port=ev.server_port)
                after = wire_counters(backend)
    except UsageError:
        raise  # a bad value that slipped through validation: stop the sweep with it
    except QuiclabError as e:
        raise EnvironmentFailure(str(e)) from None
    if not result.ok and not result.unsupported:
        # A failed transfer is a result only if the lab was sound while it ran: a router stopped or a container
        # paused under the run (by anyone) makes it the lab's failure, never the transport's.
        problem = _lab_problem() or objects.changed(run.point.size)
        if problem:
            raise EnvironmentFailure(f"{result.failure} — and the lab is not sound: {problem}")
    rec.wall_s = time.monotonic() - t0
    rec.http_version, rec.bytes = result.http_version, result.bytes
    rec.sha256_ok = bool(result.sha256) and result.sha256 == result.sha256_expected
    rec.handshake_s, rec.ttfb_s, rec.total_s = result.handshake_s, result.ttfb_s, result.total_s
    rec.goodput_bps = result.goodput_bps
    rec.client_rcvbuf_drops = result.client_rcvbuf_drops
    rec.overhead_s = rec.wall_s - result.total_s if result.total_s else None
    if before and after:
        rec.wire_down_bytes, rec.wire_up_bytes = after[0] - before[0], after[1] - before[1]
        rec.wire_overhead = (rec.wire_down_bytes + rec.wire_up_bytes) / run.point.size if run.point.size else None
    rec.evidence = " ".join(ev.relative())
    rec.pcap_goodput_bps = pcap_goodput(ev, run.server, run.protocol, run.point.size) if result.ok else None
    if result.ok:
        rec.status = "ok"
    elif result.unsupported:  # the implementation said so itself (the contract's exit code 127)
        rec.status, rec.failure = "unsupported", result.failure
    else:
        rec.status = "timeout" if result.exit_code == CURL_TIMEOUT_EXIT else "failed"
        rec.failure = result.failure
    adv.fill(rec, ev.files)
    return rec


def stop_everything() -> None:
    """After Ctrl-C or a lab failure in a sweep: no transfer left running, the link back to unimpaired."""
    stop_clients()
    with contextlib.suppress(QuiclabError):
        shaper.apply(Link())


@contextlib.contextmanager
def held_signals() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT, unless ignored) and SIGTERM until the block is done; yields the list of those that
    arrived meanwhile. Outside the main thread (where signals cannot be handled) the block just runs."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, lambda signum, _frame: caught.append(signum))
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C until the block is done, then raise it: a record is never half written or written without
    being counted."""
    with held_signals() as caught:
        yield
    if caught:
        raise KeyboardInterrupt


class Stops:
    """Counts stop signals (SIGINT unless it is ignored, as under nohup; SIGTERM) while a sweep runs. Each one
    raises KeyboardInterrupt like Python's own handler, and the count tells the runner afterwards that a run was
    cut short even where something on the way swallowed the exception."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, _signum: int, _frame: object) -> None:
        self.count += 1
        raise KeyboardInterrupt

    def __enter__(self) -> Stops:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                current = signal.getsignal(sig)
                if current is not signal.SIG_IGN:
                    self._previous[sig] = current
                    signal.signal(sig, self._handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


Outcome = Literal["complete", "interrupted", "environment"]


@dataclass
class Finish:
    outcome: Outcome
    error: str = ""  # the lab's failure (outcome "environment")


def run_all(runs: list[PlannedRun], ctx: Context, log: RunLog, on_done: Callable[[RunRecord], None],
            on_start: Callable[[PlannedRun], None] = lambda _run: None,
            on_retry: Callable[[PlannedRun, str], None] = lambda _run, _why: None) -> Finish:
    """Run every planned run in order. Only finished runs are recorded (see the module's docstring); a lab failure
    is retried up to ENV_ATTEMPTS times while the lab is healthy again, otherwise it ends the sweep."""
    with Stops() as stops:
        for run in runs:
            on_start(run)
            attempt = 0
            while True:
                attempt += 1
                seen = stops.count
                try:
                    rec = execute(run, ctx)
                except KeyboardInterrupt:
                    return Finish("interrupted")
                except EnvironmentFailure as e:
                    if stops.count != seen:
                        return Finish("interrupted")
                    if attempt < ENV_ATTEMPTS and _lab_problem() is None:
                        on_retry(run, str(e))
                        continue
                    return Finish("environment", str(e))
                if stops.count != seen:  # cut short, and the interrupt was swallowed on the way: not a result
                    return Finish("interrupted")
                break
            try:
                with deferred_interrupt():
                    log.append(rec)
                    on_done(rec)
            except KeyboardInterrupt:
                return Finish("interrupted")
    return Finish("complete")
