"""Lab tests of an optional part of the lab (lab/optional.py) skip, naming the part and why, where it could not be
built; on a machine with every part built (this project's CI) they run."""

from __future__ import annotations

import pytest

from lab import lab, optional
from lab.endpoints.registry import registry
from lab.errors import UsageError


def require_part(part: str) -> None:
    why = optional.unavailable(part)
    if why:
        pytest.skip(f"the optional part '{part}' ({optional.ALL[part]}) is unavailable here: {why}")


def started(clients: list[str], servers: list[str]) -> None:
    """The parts of these implementations built (on first use) and started in this lab, or a skip naming why."""
    reg = registry()
    parts = optional.needed([reg.client(c).container for c in clients] + [reg.server(s).container for s in servers])
    try:
        lab.ensure_available(clients, servers)
    except UsageError:  # unavailable: the reason is the part's recorded one, reported by require_part
        for part in parts:
            require_part(part)
        raise
    for part in parts:
        require_part(part)
