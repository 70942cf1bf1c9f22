"""Bring the lab up and down, and say what state it is in."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from python_on_whales.exceptions import DockerException

from lab import config, docker, hostnet
from lab.errors import EnvironmentProblem

LAB_CONTAINERS = (config.ROUTER_CONTAINER, config.SERVER_CONTAINER, config.CLIENT_CONTAINER,
                  config.PROMETHEUS_CONTAINER)
REQUIRED_FOR_RUNS = (config.ROUTER_CONTAINER, config.SERVER_CONTAINER, config.CLIENT_CONTAINER)
PROJECT_LABEL = f"com.docker.compose.project={config.PROJECT}"
#: One-shot services that route each lab network through the router and exit 0.
ONE_SHOTS = ("client-route", "server-route")
UP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class ContainerState:
    name: str
    state: str  # running, exited, missing, ...
    health: str  # healthy, unhealthy, starting, "" (no healthcheck)

    @property
    def ready(self) -> bool:
        return self.state == "running" and self.health in ("healthy", "")


def states(names: tuple[str, ...] = LAB_CONTAINERS) -> list[ContainerState]:
    d = docker.require_engine()
    found = {c.name: c for c in d.container.list(all=True, filters=[("label", PROJECT_LABEL)])}
    result = []
    for name in names:
        c = found.get(name)
        if c is None:
            result.append(ContainerState(name, "missing", ""))
        else:
            health = c.state.health.status if c.state.health else ""
            result.append(ContainerState(name, c.state.status or "?", health or ""))
    return result


def require_up() -> None:
    bad = [s for s in states(REQUIRED_FOR_RUNS) if not s.ready]
    if bad:
        which = ", ".join(f"{s.name} is {s.state if s.state != 'running' else s.health}" for s in bad)
        raise EnvironmentProblem(f"the lab is not up ({which}): run `quiclab up` (or `bash scripts/setup.sh`)")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_ports() -> None:
    port = config.prometheus_port()
    prom = states((config.PROMETHEUS_CONTAINER,))[0]
    if prom.state != "running" and not _port_free(port):
        raise EnvironmentProblem(
            f"port 127.0.0.1:{port} (Prometheus) is in use by another program: stop it, or set "
            f"{config.ENV_PROMETHEUS_PORT} to a free port")


def build() -> None:
    d = docker.require_engine()
    try:
        d.compose.build(quiet=False)
    except DockerException as e:
        raise EnvironmentProblem(f"building the images failed (exit {e.return_code}): see the output above") from None


def up(*, build_images: bool = False) -> None:
    d = docker.require_engine()
    check_ports()
    try:
        # Not `--wait`: compose counts the one-shot route helpers' normal exit as a failure.
        d.compose.up(detach=True, build=build_images, quiet=False)
    except DockerException as e:
        raise EnvironmentProblem(
            f"the lab did not come up (exit {e.return_code}): see `docker compose logs` "
            f"or `quiclab status`") from None
    hostnet.ensure_bridge_rules()
    wait_ready()


def wait_ready(timeout_s: float = UP_TIMEOUT_S) -> None:
    """Wait until every lab container is healthy and the route helpers exited 0."""
    d = docker.client()
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [f"{s.name} is {s.health or s.state}" for s in states() if not s.ready]
        for service in ONE_SHOTS:
            found = d.container.list(all=True, filters=[("name", f"{config.PROJECT}-{service}-1")])
            if not found or found[0].state.status != "exited":
                pending.append(f"{service} has not finished")
            elif found[0].state.exit_code != 0:
                raise EnvironmentProblem(f"{service} failed (exit {found[0].state.exit_code}): "
                                         f"see `docker compose logs {service}`")
        if not pending:
            return
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"the lab did not become ready in {timeout_s:.0f} s "
                                     f"({'; '.join(pending)}): see `docker compose logs`")
        time.sleep(0.5)


def down() -> None:
    d = docker.require_engine()
    try:
        d.compose.down(volumes=True, remove_orphans=True, timeout=5)
    except DockerException as e:
        raise EnvironmentProblem(f"`docker compose down` failed (exit {e.return_code})") from None


def leftovers() -> list[str]:
    """Containers, networks and volumes of the lab that still exist (empty after a clean `down`)."""
    d = docker.require_engine()
    left = [f"container {c.name}" for c in d.container.list(all=True, filters=[("label", PROJECT_LABEL)])]
    left += [f"network {n.name}" for n in d.network.list(filters=[("label", PROJECT_LABEL)])]
    left += [f"volume {v.name}" for v in d.volume.list(filters=[("label", PROJECT_LABEL)])]
    return left
