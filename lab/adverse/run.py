"""One run's adverse conditions around its transfer: `with during(...) as adv: run_transfer(...)`.

Entering prepares what must exist before the transfer (objects, iperf3 servers, the flows' capture) and starts a
scheduler thread at the instant the client's command is about to start (time zero). Times in a spec count from
there; every actual time is recorded as an offset from zero (monotonic clock) and in UTC.

Leaving (normally, on an error, or on Ctrl-C, which the runner raises as KeyboardInterrupt) always: stops the
scheduler (an action it is in the middle of completes first), undoes every fault still in force, deletes the
router rules, stops the background flows, then verifies that the server's container runs unpaused and healthy,
the link is the run's link and no `qla_*` rule is left. It does this with Ctrl-C held, so a second Ctrl-C cannot
cut the clean-up short. A fault that cannot be undone (or verified undone) is the lab's failure (FaultFailed):
the run is not a result. A server the run's own fault paused or killed and brought back is not: once the
clean-up verified it healthy, the runner's health check sees a sound lab.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import config, objects, terminal
from lab.adverse import path as pathmod
from lab.adverse import rules
from lab.adverse.competing import Competition
from lab.adverse.faults import (
    RESTORE_AFTER_BLACKOUT_S,
    Action,
    FaultFailed,
    NftBlackout,
    Target,
    action_for,
    same_link,
)
from lab.adverse.spec import Fault, Flow, PathChange
from lab.endpoints.registry import registry
from lab.errors import QuiclabError
from lab.link import linkem
from lab.link.model import Link
from lab.protocols import Protocol
from lab.signals import deferred_interrupt

#: How long leaving waits for the scheduler's current action (a container restart is the longest).
JOIN_TIMEOUT_S = 90.0


def _utc(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat(timespec="milliseconds")


class Scheduler:
    """Runs timed actions in one thread, in order, each at zero + its time (never early; late if the one before
    took long). An action that raises stops the schedule (the lab is not sound; the error is kept)."""

    def __init__(self) -> None:
        self._events: list[tuple[float, int, str, Callable[[], None]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.zero = 0.0        # monotonic
        self.zero_unix = 0.0   # time.time() at zero
        self.errors: list[str] = []

    def at(self, t: float, name: str, fn: Callable[[], None]) -> None:
        self._events.append((t, len(self._events), name, fn))

    def start(self) -> None:
        self.zero, self.zero_unix = time.monotonic(), time.time()
        if self._events:
            self._thread = threading.Thread(target=self._run, name="quiclab-adverse", daemon=True)
            self._thread.start()

    def sleep_until(self, t: float) -> bool:
        """Wait (in the scheduler's thread) until zero + t; False if the schedule was stopped meanwhile."""
        wait = self.zero + t - time.monotonic()
        return not (wait > 0 and self._stop.wait(wait)) and not self._stop.is_set()

    def offset(self, mono: float | None = None) -> float:
        return (time.monotonic() if mono is None else mono) - self.zero

    def _run(self) -> None:
        for t, _, name, fn in sorted(self._events):
            wait = self.zero + t - time.monotonic()
            if (wait > 0 and self._stop.wait(wait)) or self._stop.is_set():
                return
            try:
                fn()
            except Exception as e:
                self.errors.append(f"{name}: {e}")
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(config.deadline(JOIN_TIMEOUT_S))
            if self._thread.is_alive():
                self.errors.append(f"an adverse action did not finish within {config.deadline(JOIN_TIMEOUT_S):g} s")


@dataclass
class FaultRun:
    fault: Fault
    action: Action
    state: str = "pending"   # pending -> applying -> active -> done | failed
    start_s: float | None = None
    end_s: float | None = None
    apply_s: float | None = None   # how long the applying call took (the fault began within it, before start_s)
    undo_s: float | None = None    # how long the undoing call took (the fault ended within it, before end_s)
    restored_s: float | None = None  # self-ending faults: when the run's state was put back
    note: str = ""

    def record(self, zero_unix: float) -> dict[str, Any]:
        doc: dict[str, Any] = {"fault": self.fault.text, "kind": self.fault.kind, "at_s": self.fault.start_s,
                               "duration_s": self.fault.duration_s, "state": self.state,
                               "start_s": _r(self.start_s), "end_s": _r(self.end_s), "apply_s": _r(self.apply_s),
                               "undo_s": _r(self.undo_s)}
        if self.start_s is not None:
            doc["start_utc"] = _utc(zero_unix + self.start_s)
        if self.end_s is not None:
            doc["end_utc"] = _utc(zero_unix + self.end_s)
        if self.restored_s is not None:
            doc["restored_s"] = _r(self.restored_s)
        if self.note:
            doc["note"] = self.note
        return doc


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class Conditions:
    """What one run does besides its transfer, and what it recorded."""

    faults: tuple[Fault, ...] = ()
    flows: Competition | None = None
    path: PathChange | None = None
    path_target: tuple[str, str, int] = ("udp", "", 443)  # proto, server address, port of the measured flow
    client_ip: str = ""  # the measured client's address (its own container's: lab/run/workload.py client_ip)
    backend: str = "linkem"
    link: Link | None = None
    client_env: dict[str, str] = field(default_factory=dict)
    scheduler: Scheduler = field(default_factory=Scheduler)
    fault_runs: list[FaultRun] = field(default_factory=list)
    path_applied_s: float | None = None
    shell: rules.NftShell | None = None  # one nft in the router for timed rule changes (path, nft blackout)
    competing_doc: dict[str, Any] | None = None
    jain_index: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.faults or self.flows or self.path)

    # --- the scheduled actions -------------------------------------------------------------------------------
    def _apply(self, fr: FaultRun) -> Callable[[], None]:
        def go() -> None:
            fr.state = "applying"
            t0 = time.monotonic()
            fr.action.apply()
            t1 = time.monotonic()
            fr.state, fr.start_s, fr.apply_s = "active", self.scheduler.offset(t1), t1 - t0
            if isinstance(fr.action, NftBlackout) and fr.action.times:  # the router's clock, before the add
                fr.start_s = fr.action.times[0] - self.scheduler.zero_unix
                fr.apply_s = fr.action.times[-1] - fr.action.times[0]
        return go

    def _end(self, fr: FaultRun) -> None:
        """A fault's scheduled end: it lasts its whole duration from when it was in force (start_s), even when
        applying it took a while; one that ends by itself is tidied up just after it did."""
        if fr.start_s is None:
            return
        due = fr.start_s + fr.fault.duration_s + (RESTORE_AFTER_BLACKOUT_S if fr.action.self_ending else 0.0)
        if self.scheduler.sleep_until(due):
            self._undo(fr)

    def _undo(self, fr: FaultRun, why: str = "") -> None:
        if fr.state not in ("active", "applying", "failed"):
            return
        t0 = time.monotonic()
        fr.action.undo()
        now = self.scheduler.offset()
        fr.undo_s = self.scheduler.offset() - self.scheduler.offset(t0)
        natural = fr.start_s + fr.fault.duration_s if fr.action.self_ending and fr.start_s is not None else None
        if natural is not None and now >= natural:  # it had ended by itself; this only put the run's state back
            fr.end_s, fr.restored_s = natural, now
        else:
            fr.end_s = now
            if why:
                fr.note = why
        fr.state = "done"

    def _path(self) -> None:
        assert self.path is not None
        proto, ip, port = self.path_target
        if self.shell is not None:  # in force between written and confirmed (a few ms): written is recorded
            written, _ = self.shell.run(rules.rewrite_script(pathmod.TABLE, self.path.kind, proto, self.client_ip,
                                                             ip, port))
            self.path_applied_s = written - self.scheduler.zero_unix
        else:
            pathmod.apply_router(self.path, proto, self.client_ip, ip, port)
            self.path_applied_s = self.scheduler.offset()

    def schedule(self) -> None:
        for fr in self.fault_runs:
            f = fr.fault
            self.scheduler.at(f.start_s, f"fault {f.text}", self._apply(fr))
            self.scheduler.at(f.end_s, f"undo {f.text}", lambda fr=fr: self._end(fr))
        if self.flows is not None:
            for i, r in enumerate(self.flows.running):
                self.scheduler.at(r.flow.start_s, f"flow {r.name}",
                                  lambda i=i, t=r.flow.start_s: self.flows.start_flow(i, t) if self.flows else None)
        if self.path is not None and not self.path.client_side:
            self.scheduler.at(self.path.at_s, f"path {self.path.text}", self._path)

    # --- leaving -----------------------------------------------------------------------------------------------
    def finish(self, interrupted: bool) -> None:
        """Undo, stop and verify (see the module docstring). Problems are collected in self.problems."""
        self.scheduler.stop()
        self.problems += self.scheduler.errors
        why = "interrupted (Ctrl-C)" if interrupted else "cut short: the transfer ended first"
        for fr in reversed(self.fault_runs):
            if fr.state == "pending":
                fr.state, fr.note = "not reached", "the transfer ended before it" if not interrupted else why
                continue
            try:
                self._undo(fr, why if fr.state != "done" else "")
            except Exception as e:  # every other undo still runs; the run is the lab's failure
                fr.state = "failed"
                self.problems.append(f"undoing {fr.fault.text}: {e}")
        if self.path is not None and not self.path.client_side:
            try:
                pathmod.undo_router()
            except Exception as e:
                self.problems.append(f"removing the path change's rules: {e}")
        if self.shell is not None:
            self.shell.close()
        if self.flows is not None:
            try:
                if not interrupted:
                    self.flows.read_cc()
                self.flows.stop()
            except Exception as e:
                self.problems.append(f"stopping the competing flows: {e}")
            if self.flows.lab_problem:
                self.problems += self.flows.problems
        self._verify()

    def _verify(self) -> None:
        if self.backend == "linkem" and self.link is not None and not any(
                fr.action.verifies_link for fr in self.fault_runs):  # (those verify it themselves)
            try:
                now = linkem.current()
            except QuiclabError as e:
                self.problems.append(f"linkem does not answer: {e}")
            else:
                if not same_link(now, self.link):
                    self.problems.append("the link changed during the run (another command set it): the run's "
                                         "conditions did not hold")
        for fr in self.fault_runs:
            if fr.state == "pending" or fr.state == "not reached":
                continue
            try:
                problem = fr.action.verify()
            except QuiclabError as e:
                problem = str(e)
            if problem:
                self.problems.append(f"after {fr.fault.text}: {problem}")
        if self.path is not None or any(isinstance(fr.action, NftBlackout) for fr in self.fault_runs):
            try:
                left = rules.leftovers()
            except QuiclabError as e:
                left = [f"(cannot list: {e})"]
            if left:
                self.problems.append(f"rules left in the router: {', '.join(left)}")

    # --- results -------------------------------------------------------------------------------------------------
    def columns(self, ok: bool, failure: str, files: list[Path] | None = None) -> dict[str, Any]:
        """What happened, as the run's columns (lab/results/schema.py: faults_actual, competing, jain_index,
        probe_rtt_ms_p50/p95, path_change); `ok` and `failure`: the run's outcome."""
        if self.empty:
            return {}
        out: dict[str, Any] = {}
        zero = self.scheduler.zero_unix
        if self.faults:
            out["faults_actual"] = json.dumps([fr.record(zero) for fr in self.fault_runs], separators=(",", ":"))
        if self.flows is not None:
            doc, self.jain_index = self.flows.summary(zero)
            out["competing"] = json.dumps(doc, separators=(",", ":"))
            out["jain_index"] = None if self.jain_index is None else round(self.jain_index, 4)
            out["probe_rtt_ms_p50"] = doc["probe"]["rtt_ms_p50"]
            out["probe_rtt_ms_p95"] = doc["probe"]["rtt_ms_p95"]
        if self.path is not None:
            proto, ip, port = self.path_target
            applied = self.path_applied_s if not self.path.client_side else None
            doc = pathmod.outcome(self.path, ok, failure, applied, files or [], self.client_ip, ip, port, zero,
                                  proto == "udp")
            out["path_change"] = json.dumps(doc, separators=(",", ":"))
        return out

def build(*, faults: tuple[Fault, ...] = (), competing: tuple[Flow, ...] = (), path: PathChange | None = None,
          server: str, protocol: Protocol, backend: str, link: Link, timeout_s: float, port: int | None = None,
          blackout_with: str | None = None, client_ip: str) -> Conditions:
    """The run's conditions (its faults, competing flows and path change: parsed in the plan, lab/plan/settings.py)."""
    flows, change = competing, path
    impl = registry().server(server)
    assert impl.address is not None and impl.service is not None
    target_port = port or impl.port or 443
    c = Conditions(faults=faults, path=change,
                   path_target=("udp" if protocol is Protocol.H3 else "tcp", impl.address, target_port),
                   client_ip=client_ip, backend=backend, link=link)
    target = Target(backend, link, impl.container, impl.service, blackout_with)
    c.fault_runs = [FaultRun(f, action_for(f, target)) for f in faults]
    if flows:
        c.flows = Competition(flows, (impl.address, target_port), server, timeout_s)
    if change is not None:
        c.client_env = pathmod.client_env(change)
    return c


@contextlib.contextmanager
def during(*, faults: tuple[Fault, ...] = (), competing: tuple[Flow, ...] = (), path: PathChange | None = None,
           server: str, protocol: Protocol, backend: str, link: Link, size: int, timeout_s: float,
           port: int | None = None, blackout_with: str | None = None, client_ip: str) -> Iterator[Conditions]:
    """The run's adverse conditions around the block (which runs the transfer and nothing else)."""
    c = build(faults=faults, competing=competing, path=path, server=server, protocol=protocol, backend=backend,
              link=link, timeout_s=timeout_s, port=port, blackout_with=blackout_with, client_ip=client_ip)
    if c.empty:
        yield c
        return
    interrupted = False
    try:
        objects.ensure(size)  # made before time zero (the transfer makes it otherwise)
        router_rules = (c.path is not None and not c.path.client_side) or any(
            isinstance(fr.action, NftBlackout) for fr in c.fault_runs)
        if router_rules:
            rules.clear_all()  # leftovers of a process that was killed outright
            c.shell = rules.NftShell()
            for fr in c.fault_runs:
                if isinstance(fr.action, NftBlackout):
                    fr.action.shell = c.shell
        if c.flows is not None:
            c.flows.prepare()
        c.schedule()
        if c.flows is not None:
            c.flows.start_probe()
        c.scheduler.start()
        yield c
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        with deferred_interrupt():
            c.finish(interrupted)
        if c.problems:
            if interrupted:
                for p in c.problems:
                    terminal.warning(f"adverse conditions: {p}")
            else:
                raise FaultFailed("; ".join(c.problems))
