"""One lab's part of a sweep: its facts (the manifest's Environment section), its runner context, the warm-up, the
run loop with a callback for each record, set-aside attempt, retry and run start, and its close. A sweep on one lab
uses it in-process (lab/run/sweep.py); a parallel sweep's every worker uses it in its own process
(lab/run/parallel.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import terminal
from lab.errors import QuiclabError
from lab.link import calibrate, linkem, napi, shaper
from lab.link.model import Link
from lab.plan.plan import PlannedRun, points, timeout_for
from lab.plan.scenario import Scenario
from lab.results.folder import Environment
from lab.results.schema import RunRecord
from lab.run import environment, runner, startup_cache


def resolve_shaper(s: Scenario) -> shaper.Choice:
    """One backend for the whole sweep (never netem at some points and linkem at others): `auto` picks netem only
    if it can emulate every point's link."""
    links = [p.link for p in points(s)] or [Link()]
    choices = [shaper.choose(s.shaper, link) for link in links]
    linkem_needed = [c for c in choices if c.backend == "linkem"]
    if linkem_needed and len(linkem_needed) < len(choices):
        return shaper.Choice("linkem", f"{linkem_needed[0].reason} at some points: linkem for every point, so the "
                                       "sweep has one emulator")
    return choices[0]


def measure(s: Scenario) -> Environment:
    """What a sweep's manifest records about the lab it runs on (this process's lab): versions, congestion control,
    the one shaper of the sweep and its self-check, the forwarding, the calibration of the lab's own path."""
    with terminal.status("recording versions and checking the shaper"):
        choice = resolve_shaper(s)
        terminal.info(f"shaper: {choice.backend} ({choice.reason})")
        # how the router's kernel forwards what linkem writes (QUICLAB_LINKEM_NAPI), put in force and read back
        forwarding = napi.apply_setting().mode if choice.backend == "linkem" else "kernel (netem)"
        pts = points(s)
        first = pts[0].link if pts else None
        impls = [*s.clients, *s.servers]

        def measured() -> dict[str, Any]:
            return {"versions": environment.versions(),
                    "congestion_control": environment.congestion_control(),
                    "implementations": environment.implementations(impls, s.client_quic_cc),
                    "self_check": environment.self_check(first, choice.backend) if first else {}}

        parts = {"implementations": impls, "quic_cc": s.client_quic_cc, "backend": choice.backend,
                 "link": linkem.to_json(first) if first else None, "forwarding": forwarding}
        facts, provenance = startup_cache.cached(parts, measured)
        if provenance["reused"]:
            terminal.info(f"versions and shaper self-check: unchanged lab, reusing those measured at "
                          f"{provenance['measured_at']}")
        return Environment(**facts, startup_cache=provenance,
                           base_path=calibrate.manifest_facts(),  # what the link subtracts for the lab's own path
                           shaper=choice.backend, shaper_reason=choice.reason, link_forwarding=forwarding,
                           images=environment.images(impls))  # read now, never from the startup cache


def cc_by_implementation(facts: Environment | Mapping[str, Any]) -> dict[str, dict[str, str | None]]:
    """Congestion control per implementation, from the manifest's environment (older manifests: curl and nginx
    only)."""
    doc = facts.model_dump(exclude_unset=True) if isinstance(facts, Environment) else facts
    impls = doc.get("implementations")
    if impls:
        return {name: dict(d.get("cc", {})) for name, d in impls.items()}
    cc = doc.get("congestion_control") or {}
    return {"curl": {"tcp": cc.get("tcp client"), "quic": cc.get("quic client")},
            "nginx": {"tcp": cc.get("tcp server"), "quic": cc.get("quic server")}}


@dataclass
class Callbacks:
    """What a lab session tells its driver: a finished run (the record, to be written to runs.csv), an attempt the
    fidelity guard set aside, a run about to start, a run run again (and why)."""

    record: Callable[[RunRecord], None]
    aside: Callable[[RunRecord], None] = lambda _rec: None
    start: Callable[[PlannedRun], None] = lambda _run: None
    retry: Callable[[str, str], None] = lambda _label, _why: None  # (run_label, why)


def run_label(run: PlannedRun) -> str:
    return f"{run.point.label} {run.protocol.value} {run.client}→{run.server} #{run.repeat + 1}"


class _Record:
    """runner.run_all's log: the record goes to the driver's callback (inside the run loop's held signals)."""

    def __init__(self, record: Callable[[RunRecord], None]) -> None:
        self.append = record


class LabSession:
    """This process's lab for one sweep: `open` with its facts, `run` groups of runs, `close` once."""

    def __init__(self, s: Scenario, folder: Path, facts: Environment, host_guard: str, calls: Callbacks) -> None:
        self.facts = facts
        self.calls = calls
        self.ctx = runner.Context(sweep=s.name, shaper=facts.shaper or s.shaper, cc=cc_by_implementation(facts),
                                  timeout_for=lambda r: timeout_for(s, r.point), quic_cc=dict(s.client_quic_cc),
                                  capture=tuple(s.capture), folder=folder, host_guard=host_guard,
                                  host_bound_log=calls.aside)

    def warm_up(self, runs: list[PlannedRun]) -> None:
        runner.warm_up(runs, self.ctx)

    def run(self, runs: list[PlannedRun]) -> runner.Finish:
        """The runs in order (runner.run_all: only finished runs are recorded; a lab failure retried or the end)."""
        return runner.run_all(runs, self.ctx, _Record(self.calls.record), lambda _rec: None, self.calls.start,
                              lambda run, why: self.calls.retry(run_label(run), why))

    def close(self, complete: bool) -> None:
        """Per-algorithm server instances stopped, server namespaces back to native; the link left unimpaired (after
        Ctrl-C or a failure also no transfer left running)."""
        self.ctx.sender.close()
        close_lab(complete)


def close_lab(complete: bool) -> None:
    """The lab after a sweep's part on it (also where no session was opened: Ctrl-C while its facts were measured):
    unimpaired; after Ctrl-C or a failure also no transfer left running."""
    if complete:
        with contextlib.suppress(QuiclabError):
            shaper.apply(Link())
    else:
        runner.stop_everything()
