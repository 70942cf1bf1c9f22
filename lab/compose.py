"""docker-compose.yml read as data: the one list of the lab's services and of the fixed address each container has
on the lab's networks (lab/optional.py reads its parts from it; lab/run/workload.py a client's address)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from lab import config

# The compose file's networks by the names lab/instance.py gives them.
NETWORKS = {"client": "clientnet", "server": "servernet", "mgmt": "mgmt"}


@cache
def services(path: Path = config.COMPOSE_FILE) -> dict[str, dict[str, Any]]:
    return (yaml.safe_load(path.read_text()) or {}).get("services", {})


def address(container: str, network: str, path: Path = config.COMPOSE_FILE) -> str | None:
    """This lab's address of one of its containers on `network` ("client", "server", "mgmt"): the host number of
    the service's `ipv4_address` in this lab's subnet (lab/instance.py); None if the service has none there."""
    service = services(path).get(config.INSTANCE.service(container)) or {}
    networks = service.get("networks")
    fixed = networks.get(NETWORKS[network]) if isinstance(networks, dict) else None
    ip = fixed.get("ipv4_address") if isinstance(fixed, dict) else None
    if not isinstance(ip, str):
        return None
    return config.INSTANCE.address(network, int(ip.rsplit(".", 1)[1]))
