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
import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from lab import config, objects
from lab.adverse import run as adverse
from lab.endpoints import get_client, quic_window
from lab.endpoints.registry import registry
from lab.errors import EnvironmentFailure, QuiclabError, UsageError
from lab.evidence import capture
from lab.link import linkem, router, shaper
from lab.link.model import Link
from lab.models import TransferResult
from lab.plan.plan import PlannedRun
from lab.plan.support import check as check_support
from lab.protocols import Protocol
from lab.results.schema import RunRecord
from lab.results.store import RunLog
from lab.run import hostload
from lab.run import workload as workloads
from lab.run.probes import ProbeState, RunContext, probes
from lab.run.sender import SenderControl
from lab.run.transfer import run_transfer, stop_clients
from lab.signals import Stops, deferred_interrupt
from lab.workloads.spec import handles


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
    # the fidelity guard (lab/run/hostload.py): a host-bound run is run again (repeat), only flagged, or not judged
    host_guard: str = "repeat"
    host_bound_log: Callable[[RunRecord], None] = lambda _rec: None  # where flagged attempts go (not results)
    # `quiclab run`: the link in force (the user's `quiclab shape`) is the run's: read back, not applied
    link_in_force: bool = False
    probe_state: ProbeState = field(default_factory=ProbeState)  # what the probes carry from run to run

    def cc_of(self, implementation: str, protocol: Protocol) -> str:
        """"unknown" if the manifest does not say; "none" if the implementation has no such transport."""
        if implementation not in self.cc:
            return "unknown"
        return self.cc[implementation].get("quic" if protocol is Protocol.H3 else "tcp") or "none"


def identity(run: PlannedRun, ctx: Context, backend: str, link: Link | None, started: str) -> dict[str, Any]:
    """The run's identity and the link in force: the columns known before it runs (link None: not known, netem's
    qdiscs in force for `quiclab run`, which cannot be read back as a link: its columns empty)."""
    known = link is not None
    return dict(
        sweep=ctx.sweep, run_key=run.key, point=run.point.index, point_label=run.point.label,
        x_name=run.point.x_name, x=run.point.x, protocol=run.protocol.value, client=run.client, server=run.server,
        repeat=run.repeat, order=run.order, seed=run.seed, shaper=backend,
        rate_bps=link.downlink.effective_rate_bps if known else None, rtt_s=link.rtt_s if known else None,
        loss_pct=link.downlink.loss.mean * 100 if known else None, jitter_s=link.downlink.jitter_s if known else None,
        link=json.dumps(linkem.record_json(link), separators=(",", ":")) if known else "",
        size_bytes=run.point.size, cc_client=ctx.cc_of(run.client, run.protocol),
        cc_server=ctx.cc_of(run.server, run.protocol), started_at=started, timeout_s=ctx.timeout_for(run),
        workload=workloads.workload_of(run.point).label(), lab_instance=config.INSTANCE.number)


def not_run(why: str) -> dict[str, Any]:
    """The outcome of a run that did not run because it cannot (recorded as unsupported, never a failure)."""
    return dict(status="unsupported", failure=why, http_version="", bytes=0, sha256_ok=False, handshake_s=None,
                ttfb_s=None, total_s=None, goodput_bps=None, wall_s=0.0, overhead_s=None, wire_down_bytes=None,
                wire_up_bytes=None, wire_overhead=None)


def outcome(result: TransferResult, wall_s: float) -> dict[str, Any]:
    """What the transfer (or workload) measured, and its status: ok, unsupported (the implementation said so
    itself: exit code 127), timeout (the client's adapter says it timed out) or failed."""
    if result.ok:
        status, failure = "ok", ""
    elif result.unsupported:
        status, failure = "unsupported", result.failure
    else:
        status, failure = ("timeout" if result.timed_out else "failed"), result.failure
    return dict(
        status=status, failure=failure, http_version=result.http_version, bytes=result.bytes,
        sha256_ok=bool(result.sha256) and result.sha256 == result.sha256_expected, handshake_s=result.handshake_s,
        ttfb_s=result.ttfb_s, total_s=result.total_s, goodput_bps=result.goodput_bps, wall_s=wall_s,
        overhead_s=wall_s - result.total_s if result.total_s else None, client_rcvbuf_drops=result.client_rcvbuf_drops,
        size_bytes=result.size, wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None)


#: Attempts per run when the lab fails but is healthy again right after (a transient Docker or emulator hiccup).
ENV_ATTEMPTS = 3


def _lab_problem(run: PlannedRun) -> str | None:
    """Why the lab could not measure `run` right now, or None: the router (and its emulator) and the run's own
    client and server containers. Not every container of the lab: a parallel sweep's extra labs start only the
    optional parts their plan uses (a missing browser container made a timed-out curl run the lab's failure)."""
    from lab import lab  # (lazy: lab.lab pulls in the observability services)

    names = (config.ROUTER_CONTAINER, get_client(run.client).container, registry().server(run.server).container)
    return lab.health_problem(names)


def execute(run: PlannedRun, ctx: Context) -> RunRecord:
    """One run -> its record: plan check, probes before, transfer, probes after, the record built once. Raises
    EnvironmentFailure when the lab (not the transport) failed, and lets KeyboardInterrupt through: in both cases
    nothing is recorded."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    t0 = time.monotonic()
    link = run.link()
    planned: Link | None = None if ctx.link_in_force else link  # (the link columns of a run that does not run)
    support = check_support(run)
    if support.reason:  # this combination cannot run: recorded as such, not run, not a failure
        return RunRecord(**identity(run, ctx, ctx.shaper, planned, started), **not_run(support.reason))
    server = registry().server(run.server)
    try:
        plan = support.sender
        assert plan is not None  # (a run that can run has its sender's plan)
        # before the link and the transfer: never in the timed part (a qlog instance, if any, takes the algorithm)
        sender = ctx.sender.prepare(server, plan, instance=not (server.qlog and "qlog" in ctx.capture))
        if sender.unsupported:
            return RunRecord(**identity(run, ctx, ctx.shaper, planned, started), **not_run(sender.unsupported))
        applied_unix: float | None = None
        if ctx.link_in_force:
            backend, in_force = shaper.in_force()
            applied = in_force if isinstance(in_force, Link) else None
        else:
            choice, applied = shaper.apply(link, ctx.shaper)
            applied_unix = time.time()  # (linkem answers once applied: its trace started just before this)
            backend = choice.backend
        rc = RunContext(run=run, server=server, workload=workloads.workload_of(run.point), backend=backend,
                        applied=applied or link, applied_unix=applied_unix, started_at=started, folder=ctx.folder,
                        cc_claim=ctx.cc_of(run.server, run.protocol), senders=ctx.sender, sender=sender,
                        other_traffic=ctx.other_traffic, state=ctx.probe_state)
        result, columns = _run_with_probes(rc, ctx)
        measured = outcome(result, time.monotonic() - t0)
        return RunRecord(**columns({**identity(run, ctx, backend, applied if ctx.link_in_force else link, started),
                                    **measured}))
    except UsageError:
        raise  # a bad value that slipped through validation: stop the sweep with it
    except QuiclabError as e:
        raise EnvironmentFailure(str(e)) from None


Columns = Callable[[dict[str, Any]], dict[str, Any]]


def _restart_trace(rc: RunContext, ctx: Context) -> None:
    """A recorded trace (mahimahi's) plays from when linkem is given the link. The probes set up before the transfer
    take a time that differs by protocol (the sender's socket watch runs for TCP only: ~0.85 s against ~0.2 s), so a
    trace put in force before them would meet TCP and HTTP/3 at different moments of the recording. Given again
    here, right before the transfer, every run starts at the trace's beginning; its `applied_unix` moves with it.
    Nothing else is reset: linkem keeps its counters across a reconfiguration, and its random streams restart from
    the run's seed as they did a moment ago."""
    link = rc.run.link()
    if rc.applied_unix is None or not (link.downlink.trace_ms or link.uplink.trace_ms):
        return
    shaper.apply(link, ctx.shaper)
    rc.applied_unix = time.time()


def _run_with_probes(rc: RunContext, ctx: Context) -> tuple[TransferResult, Columns]:
    """The transfer with the probes around it: its result, and what adds the probes' columns to the identity and
    outcome (each probe in turn, seeing the columns so far; the evidence's files last)."""
    run, w = rc.run, rc.workload
    adapter = get_client(run.client)
    root = ctx.folder or Path.cwd()
    each = probes()
    timeout = ctx.timeout_for(run)
    try:
        with capture.collecting(workloads.capture_kinds(w, ctx.capture), root,
                                root / "evidence" / run.key.replace("/", "_"), adapter.name, adapter.container,
                                rc.server, rc.sender.server_env) as ev:
            rc.ev, rc.port = ev, ev.server_port or rc.sender.port
            # faults, competing flows and path changes around the transfer (lab/adverse; nothing when none)
            settings = run.point.settings
            with adverse.during(faults=settings.faults, competing=settings.competing, path=settings.path,
                                server=run.server, protocol=run.protocol, backend=rc.backend, link=rc.applied,
                                size=run.point.size, timeout_s=timeout, port=rc.port,
                                client_ip=workloads.client_ip(run.client)) as adv:
                rc.adv = adv
                env = {**ev.client_env, **adv.client_env,
                       **quic_window.client_env(settings.quic_window, run.protocol)}
                for p in each:
                    p.before(rc)
                _restart_trace(rc, ctx)
                if handles(adapter, w):  # the one dispatch: bulk -> run_transfer, others -> lab/workloads
                    result: TransferResult = workloads.run_workload(
                        adapter, run.server, run.protocol, w, run.point.size, timeout, cc=ctx.quic_cc.get(run.client),
                        env=env, port=rc.port)
                else:
                    result = run_transfer(adapter, run.server, run.protocol, run.point.size, timeout,
                                          cc=ctx.quic_cc.get(run.client), env=env, port=rc.port)
                rc.result = result
                for p in each:
                    p.after(rc)
            for p in each:
                p.settled(rc)
    finally:  # whatever happened: nothing a probe started is left running
        for p in each:
            p.close()
    if not result.ok and not result.unsupported:
        # A failed transfer is a result only if the lab was sound while it ran: a router stopped or a container
        # paused under the run (by anyone) makes it the lab's failure, never the transport's.
        problem = _lab_problem(run) or objects.changed(run.point.size)
        if problem:
            raise EnvironmentFailure(f"{result.failure} — and the lab is not sound: {problem}")

    def columns(so_far: dict[str, Any]) -> dict[str, Any]:
        for p in each:
            so_far.update(p.columns(rc, MappingProxyType(so_far)))
        return {**so_far, "evidence": " ".join(ev.relative())}

    return result, columns


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


def _judge_host(rec: RunRecord, load: hostload.Load | None, ctx: Context) -> tuple[RunRecord, str]:
    """The run's record with the fidelity guard's columns (nothing for one that did not run: the host's load during
    the run and why the host was the bottleneck), and that reason ("": it was not)."""
    if rec.status == "unsupported" or ctx.host_guard == "off":
        return rec, ""
    busy = {} if load is None else {"cpu_busy": round(load.busy, 4), "cpu_steal": round(load.steal, 4)}
    why = hostload.verdict(load, rec.total_s or rec.wall_s, rec.link_host_drops)
    return dataclasses.replace(rec, **busy, host_bound=why), why


def one_attempt(run: PlannedRun, ctx: Context) -> tuple[RunRecord, str]:
    """One attempt at a run (execute) judged by the fidelity guard: its record, and why the host was the bottleneck
    ("": it was not). A sweep's run loop and `quiclab run` both run a run so."""
    load_before = hostload.sample()
    rec = execute(run, ctx)
    return _judge_host(rec, hostload.between(load_before, hostload.sample()), ctx)


def stop_everything() -> None:
    """After Ctrl-C or a lab failure in a sweep: no transfer left running, the link back to unimpaired."""
    stop_clients()
    with contextlib.suppress(QuiclabError):
        shaper.apply(Link())


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
                    rec, host_bound = one_attempt(run, ctx)
                except KeyboardInterrupt:
                    return Finish("interrupted")
                except EnvironmentFailure as e:
                    if stops.count != seen:
                        return Finish("interrupted")
                    if attempt < ENV_ATTEMPTS and _lab_problem(run) is None:
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
