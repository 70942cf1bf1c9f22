"""A scenario's whole validation: its fields (lab/plan/scenario.py), then the checks that need its points (links,
timeouts, clients) of its adverse conditions; every problem one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.adverse.faults import KINDS
from lab.adverse.spec import PathChange
from lab.endpoints.registry import registry
from lab.errors import UsageError
from lab.plan import matrix
from lab.plan.plan import points, timeout_for
from lab.plan.scenario import Scenario, read, validate_fields, warn_deprecated
from lab.protocols import Protocol


def migrating_clients() -> frozenset[str]:
    """Clients that can move to a new path themselves: the registry's `migrates = true` (gtlsclient's
    --change-local-addr)."""
    return registry().migrating()


def check_scenario(s: Scenario, where: str) -> None:
    if not (s.faults or s.competing or s.path or {"faults", "competing", "path"} & set(s.sweep)):
        return
    for p in points(s):
        faults, path = p.settings.faults, p.settings.path
        timeout = timeout_for(s, p)
        at = f"{where}: point {p.label!r}"
        for f in faults:
            if f.end_s > timeout:
                raise UsageError(f"{at}: fault {f.text!r} ends at {f.end_s:g} s, after the run's timeout of "
                                 f"{timeout:g} s (a fault must end within the run's timeout, the only bound known "
                                 f"before the run; raise `timeout`)")
            why = KINDS[f.kind].refuses(f, p.link)
            if why:
                raise UsageError(f"{at}: fault {f.text!r} {why}")
        if path is not None:
            if path.at_s > timeout:
                raise UsageError(f"{at}: path change {path.text!r} at {path.at_s:g} s is after the run's timeout "
                                 f"of {timeout:g} s")
            migrating = migrating_clients()
            clients = {registry().canonical(c) for c in s.clients}
            if path.client_side and not (migrating & clients and Protocol.H3.value in s.protocols):
                raise UsageError(f"{at}: path {path.text!r} is done by the client itself: it needs client "
                                 f"{', '.join(sorted(migrating)) or '(none registered)'} and protocol h3 in the "
                                 "scenario")


def unsupported(path: PathChange | None, client: str, protocol: Protocol, server: str | None = None) -> str | None:
    """Why this run cannot have its path change (recorded as unsupported, not run), or None."""
    if path is None or not path.client_side:
        return None
    migrating = migrating_clients()
    if registry().canonical(client) not in migrating or protocol is not Protocol.H3:
        return (f"path {path.text}: the client moves itself, which only "
                f"{', '.join(sorted(migrating)) or '(no registered client)'} over h3 can (use rebind or readdr for "
                "every client)")
    refuses = registry().server(server).refuses_migration if server else ""
    if refuses:
        return (f"path {path.text}: the client moves itself, which {registry().canonical(server or '')} refuses: "
                f"{refuses}")
    return None


def validate(data: dict[str, Any], where: str) -> Scenario:
    """Check everything that can be checked without the lab (see validate_fields), then the points' checks. A
    stack matrix's clients, servers and TCP pairs come from the registry first (lab/plan/matrix.py)."""
    if isinstance(data, dict) and data.get("matrix"):
        data = matrix.complete(data, registry())
    s = validate_fields(data, where)
    check_scenario(s, where)  # (needs a valid scenario: its points)
    warn_deprecated(data, where)
    return s


def load(path: Path) -> Scenario:
    """A scenario file, validated."""
    return validate(read(path), str(path))
