"""Whether a planned run can run at all: asked once per run, before anything is set up (lab/run/runner.py).

A run the lab cannot carry out by design (the registry says the client or server lacks the protocol, the sender's
congestion control cannot be set, the client cannot move itself for a path change, the client cannot fix its QUIC
window, the client does not run the workload) is recorded as "unsupported" with the reason: never run, never a
failure. What only shows when the run is tried (an algorithm the server's kernel lacks, a client exiting 127) is
the run's own outcome."""

from __future__ import annotations

from dataclasses import dataclass

from lab.endpoints import get_client, quic_window, sender_cc
from lab.endpoints.base import ClientAdapter
from lab.endpoints.registry import registry
from lab.endpoints.sender_cc import SenderPlan
from lab.plan.checks import unsupported as adverse_unsupported
from lab.plan.plan import PlannedRun
from lab.protocols import Protocol
from lab.workloads.spec import Workload, handles


@dataclass(frozen=True)
class Support:
    """Whether a run can run: `reason` is "" when it can; `sender` is how it gets its sender's congestion control
    (resolved once per run, here; None when the registry already says the run cannot run)."""

    reason: str
    sender: SenderPlan | None


def check(run: PlannedRun) -> Support:
    reg = registry()
    why = reg.unsupported(run.client, run.server, run.protocol)
    if why:
        return Support(why, None)
    settings = run.point.settings
    plan = sender_cc.resolve(reg.server(run.server), run.protocol, settings.cc)
    return Support(plan.reason or adverse_unsupported(settings.path, run.client, run.protocol, run.server)
                   or quic_window.unsupported(settings.quic_window, run.client, run.protocol, settings.workload.kind)
                   or workload_unsupported(get_client(run.client), settings.workload, run.protocol), plan)


def why_unsupported(run: PlannedRun) -> str:
    """The reason this run cannot run here, or ""."""
    return check(run).reason


def workload_unsupported(adapter: ClientAdapter, w: Workload, protocol: Protocol) -> str:
    """Why this client cannot run this workload over this protocol ("" if it can): the registry's workload kinds
    of the client, then the adapter's own word."""
    if not handles(adapter, w):
        return ""
    kind = "page" if w.kind == "bulk" else w.kind
    if kind not in registry().client(adapter.name).workloads:
        return f"{adapter.name} does not run {kind} workloads"
    return str(getattr(adapter, "workload_unsupported", lambda *_: "")(w, protocol) or "")
