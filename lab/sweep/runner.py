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
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab import config, objects
from lab.adverse import run as adverse
from lab.adverse.check import unsupported as adverse_unsupported
from lab.cc import SenderControl
from lab.endpoints import get_client, sender_cc
from lab.endpoints.registry import Implementation, registry
from lab.errors import QuiclabError, UsageError
from lab.evidence import capture, sender_view
from lab.evidence.goodput import pcap_goodput
from lab.link import counters, linkem, router, shaper
from lab.link.model import Link
from lab.models import TransferResult
from lab.protocols import Protocol
from lab.results.schema import RunRecord
from lab.sweep import hostload
from lab.sweep.plan import PlannedRun
from lab.sweep.store import RunLog
from lab.transfer import run_transfer, stop_clients
from lab.workloads import run as workloads

CURL_TIMEOUT_EXIT = 28


@dataclass
class Context:
    sweep: str
    shaper: str                # requested backend: auto | netem | linkem
    cc: dict[str, dict[str, str | None]]  # implementation -> {"tcp": ..., "quic": ...} (manifest "implementations")
    timeout_for: Callable[[PlannedRun], float]
    quic_cc: dict[str, str] = field(default_factory=dict)  # client -> chosen QUIC congestion control (scenario)
    capture: tuple[str, ...] = ()  # evidence kinds to keep per run (pcap, keylog, qlog)
    folder: Path | None = None     # the sweep folder (evidence goes to <folder>/evidence/<run>/)
    sender: SenderControl = field(default_factory=SenderControl)  # the sender's congestion control per run
    # the caller itself sends other traffic across the link during runs (a lab test's probe): then the per-run
    # check that nobody else used the link looks at the link's settings only
    other_traffic: bool = False
    # the fidelity guard (lab/sweep/hostload.py): a host-bound run is run again (repeat), only flagged, or not judged
    host_guard: str = "repeat"
    host_bound_log: Callable[[RunRecord], None] = lambda _rec: None  # where flagged attempts go (not results)

    def cc_of(self, implementation: str, protocol: Protocol) -> str:
        """"unknown" if the manifest does not say; "none" if the implementation has no such transport."""
        if implementation not in self.cc:
            return "unknown"
        return self.cc[implementation].get("quic" if protocol is Protocol.H3 else "tcp") or "none"


def wire_counters(backend: str) -> counters.Snapshot | None:
    """The link's counters so far: linkem's (bytes, packets, drops by cause), or the router's interface counters
    (IP bytes and packets delivered per direction)."""
    try:
        if backend == "linkem":
            return counters.parse_linkem(linkem.metrics_text())
        ifs = router.interfaces()
        out = router.run("cat", *(f"/sys/class/net/{i}/statistics/{c}" for i in (ifs.client_side, ifs.server_side)
                                  for c in ("tx_bytes", "tx_packets")))
        cb, cp, sb, sp = (int(x) for x in out.split())
        return counters.Snapshot(counters.Counters(cb - 14 * cp, cp), counters.Counters(sb - 14 * sp, sp))
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
        started_at=started, timeout_s=ctx.timeout_for(run), workload=workloads.workload_of(run.point).label(),
        lab_instance=config.INSTANCE.number)


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
    server = registry().server(run.server)
    plan = sender_cc.resolve(server, run.protocol, run.point.settings.get("cc"))
    why = registry().unsupported(run.client, run.server, run.protocol) or plan.reason or adverse_unsupported(
        run.point.settings, run.client, run.protocol)
    if why:  # the registry says this combination cannot run: recorded as such, not run, not a failure
        rec.status, rec.failure = "unsupported", why
        return rec
    try:
        # before the link and the transfer: never in the timed part (a qlog instance, if any, takes the algorithm)
        sender = ctx.sender.prepare(server, plan, instance=not (server.qlog and "qlog" in ctx.capture))
        if sender.unsupported:
            rec.status, rec.failure = "unsupported", sender.unsupported
            return rec
        choice, applied = shaper.apply(link, ctx.shaper)
        rec.shaper = backend = choice.backend
        adapter = get_client(run.client)
        root = ctx.folder or Path.cwd()
        w = workloads.workload_of(run.point)  # the one dispatch: bulk -> run_transfer, others -> lab/workloads
        with capture.collecting(workloads.capture_kinds(w, ctx.capture), root,
                                root / "evidence" / run.key.replace("/", "_"), adapter.name,
                                adapter.container, server, sender.server_env) as ev:
            port = ev.server_port or sender.port
            before = wire_counters(backend)
            # faults, competing flows and path changes around the transfer (lab/adverse; nothing when none)
            with adverse.during(run.point.settings, server=run.server, protocol=run.protocol, backend=backend,
                                link=link, size=run.point.size, timeout_s=ctx.timeout_for(run), port=port) as adv:
                env = {**ev.client_env, **adv.client_env}
                if workloads.handles(adapter, w):
                    result: TransferResult = workloads.run_workload(
                        adapter, run.server, run.protocol, w, run.point.size, ctx.timeout_for(run),
                        cc=ctx.quic_cc.get(run.client), env=env, port=port)
                else:
                    result = run_transfer(adapter, run.server, run.protocol, run.point.size, ctx.timeout_for(run),
                                          cc=ctx.quic_cc.get(run.client), env=env, port=port)
                after = wire_counters(backend)
            rec.cc_sender, rec.cc_sender_source = ctx.sender.read_back(server, sender, port)
            # what the run moves toward the client: every object, twice for resume/0rtt (two connections)
            moved = w.total_bytes(run.point.size) * (2 if w.sessions else 1)
            # competing flows are other traffic on the link by design: then only the link itself is checked
            disturbed(backend, applied, before, after, run.protocol, moved,
                      others_expected=adv.flows is not None or ctx.other_traffic)
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
    rec.cc_server = rec.cc_sender or rec.cc_server  # what was in force for this run, not at the sweep's start
    delta = after - before if before and after else None
    if delta:
        rec.wire_down_bytes, rec.wire_up_bytes = delta.down.bytes, delta.up.bytes
        rec.wire_overhead = (rec.wire_down_bytes + rec.wire_up_bytes) / run.point.size if run.point.size else None
        loss_columns(rec, delta)
    rec.pcap_goodput_bps = pcap_goodput(ev, run.server, run.protocol, run.point.size, port) if result.ok else None
    if ev.files:
        sender_response(rec, ev, server, run.protocol, port or server.port or 443, run.point.size, delta)
    rec.evidence = " ".join(ev.relative())
    if result.ok:
        rec.status = "ok"
    elif result.unsupported:  # the implementation said so itself (the contract's exit code 127)
        rec.status, rec.failure = "unsupported", result.failure
    else:
        rec.status = "timeout" if result.exit_code == CURL_TIMEOUT_EXIT else "failed"
        rec.failure = result.failure
    try:
        workloads.annotate(rec, result, w, ev, ctx.folder)
    except QuiclabError as e:
        raise EnvironmentFailure(str(e)) from None
    adv.fill(rec, ev.files)
    return rec


def warm_up(runs: list[PlannedRun], ctx: Context) -> None:
    """What the first run would otherwise pay inside its own wall time, done once before the runs: the agents of
    the client and server containers the runs use (lab/agent.py) and the router facts the shaper keeps (its
    interfaces, the path in force, the lab path's calibration). Best effort: a lab problem shows in the first run,
    which handles it as it handles any (retried, or the sweep stops; never a result)."""
    from lab import agent
    from lab.link import calibrate

    containers: set[str] = set()
    for run in runs:
        with contextlib.suppress(QuiclabError, KeyError):
            containers.add(get_client(run.client).container)
            containers.add(registry().server(run.server).container)
    with contextlib.suppress(QuiclabError):
        for container in sorted(containers):
            agent.warm(container)
        if ctx.shaper == "linkem":  # the resolved backend (the manifest's); netem needs none of these
            router.interfaces()
            router.path()
            calibrate.path_delays("linkem")


#: Packets of another IP protocol crossing the link during a run beyond which another command was using it. Not
#: zero: the previous run's QUIC connection may still send a few closing packets into a TCP run (12 seen).
FOREIGN_PACKETS = 50


def reorders(link: Link) -> bool:
    """Whether the link lets packets overtake each other toward the client (jitter that reorders, netem reorder)."""
    d = link.downlink
    return (d.reorder and d.jitter_s > 0) or d.reorder_prob > 0


def disturbed(backend: str, applied: Link, before: counters.Snapshot | None, after: counters.Snapshot | None,
              protocol: Protocol, size: int, others_expected: bool = False) -> None:
    """Raise (the lab's failure: not a result) if another command changed the link or sent traffic over it
    during the run: packets of another IP protocol, or more packets toward the client than twice the object's
    (in 1200-byte packets, retransmissions included, plus 200; not on a link that reorders, where a sender's
    spurious retransmissions alone exceed it: nginx's QUIC sent 3.7 times the object's packets through 10 ms of
    reordering jitter). Every measuring command should hold the lab lock; not all do."""
    if backend != "linkem":
        return
    now = linkem.current()
    if now != applied:
        raise EnvironmentFailure("the link was changed during the run by another command (not a result)")
    if before and after and not others_expected:
        delta = after - before
        foreign = delta.foreign("udp" if protocol is Protocol.H3 else "tcp")
        if (delta.down.received or 0) > 2 * size / 1200 + 200 and not reorders(applied):
            foreign = max(foreign, (delta.down.received or 0) - int(2 * size / 1200 + 200))
        if foreign > FOREIGN_PACKETS:
            raise EnvironmentFailure(f"{foreign} packets of other traffic crossed the link during the run: another "
                                     "command was using the lab (not a result)")


def loss_columns(rec: RunRecord, delta: counters.Snapshot) -> None:
    """The link's per-direction counts over the run into the record (unknown with netem: left empty)."""
    rec.link_down_sent_pkts, rec.link_up_sent_pkts = delta.down.received, delta.up.received
    rec.link_down_loss_drops, rec.link_up_loss_drops = delta.down.loss_drops, delta.up.loss_drops
    rec.link_down_queue_drops, rec.link_up_queue_drops = delta.down.queue_drops, delta.up.queue_drops
    if delta.down.host_drops is not None or delta.up.host_drops is not None:
        rec.link_host_drops = (delta.down.host_drops or 0) + (delta.up.host_drops or 0)


def sender_response(rec: RunRecord, ev: capture.Evidence, server: Implementation, protocol: Protocol, port: int,
                    size: int, link: counters.Snapshot | None) -> None:
    """From the run's evidence: the sender's data and retransmitted bytes, and its loss-response figure."""
    response = sender_view.analyse(ev, server, protocol, port, size)
    if response is None:
        return
    rec.sender_data_pkts, rec.sender_data_bytes = response.data_packets, response.data_bytes
    rec.sender_retx_bytes, rec.loss_response_source = response.retx_bytes, response.source
    title = f"{rec.run_key}: {protocol.label} {rec.client}→{rec.server}, sender cc {rec.cc_sender or '?'}, " \
            f"{rec.point_label}"
    ev.files.append(sender_view.figure(response, link, title, ev.folder / sender_view.FIGURE))


def _judge_host(rec: RunRecord, load: hostload.Load | None, ctx: Context) -> str:
    """The fidelity guard's columns and verdict for a finished run (nothing for one that did not run): why the
    host was the bottleneck, or ""."""
    if rec.status == "unsupported" or ctx.host_guard == "off":
        return ""
    if load is not None:
        rec.cpu_busy, rec.cpu_steal = round(load.busy, 4), round(load.steal, 4)
    rec.host_bound = hostload.verdict(load, rec.total_s or rec.wall_s, rec.link_host_drops)
    return rec.host_bound


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
                    load_before = hostload.sample()
                    rec = execute(run, ctx)
                    host_bound = _judge_host(rec, hostload.between(load_before, hostload.sample()), ctx)
                except KeyboardInterrupt:
                    return Finish("interrupted")
                except EnvironmentFailure as e:
                    if stops.count != seen:
                        return Finish("interrupted")
                    if attempt < ENV_ATTEMPTS and _lab_problem() is None:
                        on_retry(run, f"the lab failed ({e}); it is healthy again")
                        continue
                    return Finish("environment", str(e))
                if stops.count != seen:  # cut short, and the interrupt was swallowed on the way: not a result
                    return Finish("interrupted")
                if host_bound and ctx.host_guard == "repeat" and attempt < hostload.HOST_ATTEMPTS:
                    ctx.host_bound_log(rec)  # kept aside, never a result
                    on_retry(run, f"the host was the bottleneck ({rec.host_bound})")
                    continue
                break
            try:
                with deferred_interrupt():
                    log.append(rec)
                    on_done(rec)
            except KeyboardInterrupt:
                return Finish("interrupted")
    return Finish("complete")
