"""Whether a planned run can run at all: asked once per run, before anything is set up (lab/sweep/runner.py).

A run the lab cannot carry out by design (the registry says the client or server lacks the protocol, the sender's
congestion control cannot be set, the client cannot move itself for a path change, the client does not run the
workload) is recorded as "unsupported" with the reason: never run, never a failure. What only shows when the run
is tried (an algorithm the server's kernel lacks, a client exiting 127) is the run's own outcome."""

from __future__ import annotations

from lab.adverse.check import unsupported as adverse_unsupported
from lab.endpoints import get_client, sender_cc
from lab.endpoints.registry import registry
from lab.sweep.plan import PlannedRun
from lab.workloads import run as workloads


def why_unsupported(run: PlannedRun) -> str:
    """The reason this run cannot run here, or ""."""
    reg = registry()
    why = reg.unsupported(run.client, run.server, run.protocol)
    if why:
        return why
    plan = sender_cc.resolve(reg.server(run.server), run.protocol, run.point.settings.get("cc"))
    return (plan.reason or adverse_unsupported(run.point.settings, run.client, run.protocol)
            or workloads.unsupported(get_client(run.client), workloads.workload_of(run.point), run.protocol))
