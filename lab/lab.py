"""Bring the lab up and down, and say what state it is in."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dotenv import set_key

from lab import config, docker, hostnet, optional, terminal
from lab.endpoints.registry import Registry, registry
from lab.errors import EnvironmentProblem, QuiclabError
from lab.link import napi
from lab.observe import services


def implementation_containers(reg: Registry | None = None) -> tuple[str, ...]:
    """The containers of every registered implementation (servers first), in this lab: the registry is the one list
    of them (lab/endpoints/implementations.toml)."""
    return (reg or registry()).containers()


def route_helpers(reg: Registry | None = None) -> tuple[str, ...]:
    """The one-shot helper of each implementation container that routes its network through the router."""
    return tuple(f"{config.INSTANCE.service(c)}-route" for c in implementation_containers(reg))


#: The containers that run as long as the lab: the host firewall allowance, the router, the implementations'
#: (from the registry) and the observability stack.
LAB_CONTAINERS = (config.HOSTNET_CONTAINER, config.ROUTER_CONTAINER, *implementation_containers(),
                  config.PROMETHEUS_CONTAINER, config.PUSHGATEWAY_CONTAINER)
#: What a transfer needs. Not `hostnet`: its rules are what matters, and a lab started by an older compose file (or
#: on a host without br_netfilter) has them from `quiclab up` or needs none; the client's healthcheck fetches through
#: the router, so a client that is healthy has passed them.
REQUIRED_FOR_RUNS = (config.ROUTER_CONTAINER, *implementation_containers())
PROJECT_LABEL = f"com.docker.compose.project={config.PROJECT}"
#: One-shot services that exit 0: the lab PKI, and the helpers that route each lab network through the router.
ONE_SHOTS = ("pki", *route_helpers())
UP_TIMEOUT_S = 180.0
GRAFANA_PULL_TIMEOUT_S = 20.0
GRAFANA_START_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class ContainerState:
    name: str
    state: str  # running, exited, missing, ...
    health: str  # healthy, unhealthy, starting, "" (no healthcheck)

    @property
    def ready(self) -> bool:
        return self.state == "running" and self.health in ("healthy", "")


def engine() -> None:
    """The Docker engine answers, after every setting was checked: nothing touches the lab with a bad value in
    force."""
    config.check_all()
    docker.require_engine()


def states(names: tuple[str, ...] = LAB_CONTAINERS) -> list[ContainerState]:
    engine()
    try:  # a container removed between the listing and its inspection (another `up` recreating it) is an answer
        found = {c.name: c for c in docker.labelled(PROJECT_LABEL)}
        result = []
        for name in names:
            c = found.get(name)
            if c is None:
                result.append(ContainerState(name, "missing", ""))
            else:
                result.append(ContainerState(name, c.status, docker.health(c)))
    except docker.DockerError as e:
        raise EnvironmentProblem(f"the lab's containers changed while being inspected (being recreated?): "
                                 f"{e.reason(200)}") from None
    return result


def _skipped_parts(parts: tuple[str, ...] | None) -> list[optional.Part]:
    """The optional parts not wanted: unavailable ones, and those outside `parts` (None: every available part built
    by default; an on-demand part is wanted only where asked for, since `ensure_available` starts it on first use)."""
    return [p for name, p in optional.parts().items()
            if optional.unavailable(name) or (parts is not None and name not in parts)
            or (parts is None and name in optional.ON_DEMAND)]


def wanted(names: tuple[str, ...], parts: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """`names` without the containers of optional parts (lab/optional.py) that are unavailable or not asked for."""
    skip = {c for p in _skipped_parts(parts) for c in p.containers}
    return tuple(n for n in names if n not in skip)


def require_up(parts: tuple[str, ...] | None = None) -> None:
    """The lab is up: every required container and those of the optional `parts` (None: every available part)."""
    engine()  # every setting checked before anything asks Docker
    bad = [s for s in states(wanted(REQUIRED_FOR_RUNS, parts)) if not s.ready]
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


def check_ports(grafana: bool = False) -> None:
    checks = [("Prometheus", config.PROMETHEUS_CONTAINER, config.prometheus_port(), config.ENV_PROMETHEUS_PORT),
              ("Pushgateway", config.PUSHGATEWAY_CONTAINER, config.pushgateway_port(), config.ENV_PUSHGATEWAY_PORT)]
    if grafana:
        checks.append(("Grafana", config.GRAFANA_CONTAINER, config.grafana_port(), config.ENV_GRAFANA_PORT))
    for what, container, port, env in checks:
        if states((container,))[0].state != "running" and not _port_free(port):
            raise EnvironmentProblem(
                f"port 127.0.0.1:{port} ({what}) is in use by another program: stop it, or set {env} to a free port")


def grafana_wanted() -> bool:
    """Start Grafana if its image is here or can be pulled; otherwise say so in one line."""
    if not config.grafana_enabled():
        terminal.info(f"Grafana: off ({config.ENV_GRAFANA}); Prometheus: {config.prometheus_url()}")
        return False
    image = config.grafana_image()
    if docker.image_available(image, GRAFANA_PULL_TIMEOUT_S):
        ensure_grafana_password()
        return True
    terminal.info(f"Grafana: image {image} not available (no registry reachable); the lab runs without it — "
                  f"Prometheus: {config.prometheus_url()}")
    return False


def ensure_grafana_password() -> None:
    """A generated Grafana admin password in .env (git-ignored; compose reads it). Never admin/admin."""
    if config.setting(config.ENV_GRAFANA_ADMIN_PASSWORD, ""):
        return
    set_key(config.ENV_FILE, config.ENV_GRAFANA_ADMIN_PASSWORD, secrets.token_urlsafe(24), quote_mode="never")
    config.ENV_FILE.chmod(0o600)


def build(parts: tuple[str, ...] | None = None) -> None:
    """Build the lab's images: the required ones (a failure stops here), then each optional part (lab/optional.py;
    `parts`: these, on-demand ones included; None: those built by default), whose failure is one line and a lab
    without it."""
    engine()
    terminal.info("building the lab's images (docker compose build; cached layers are reused)")
    try:  # the required services by name: COMPOSE_PROFILES in .env must not pull an optional part in here
        docker.compose_build_services(optional.required_built())
    except docker.DockerError as e:
        raise EnvironmentProblem(f"building the images failed (exit {e.return_code}): see the output above") from None
    for name in (optional.PARTS if parts is None else parts):
        build_optional(optional.parts()[name])
    optional.forget()
    optional.write_profiles()


def build_optional(part: optional.Part) -> bool:
    """Build one optional part; on failure say why in one line and keep the reason for the runs that ask for it."""
    terminal.info(f"building the optional part '{part.name}' ({part.what})")
    started = time.monotonic()
    code, output = docker.compose_build(part.built, (part.name,), terminal.raw)
    if code == 0:
        optional.record_success(part.name)
        optional.forget()
        terminal.info(f"optional part '{part.name}' built in {time.monotonic() - started:.0f} s")
        return True
    why = optional.build_failure_line(output, code)
    optional.record_failure(part.name, why)
    optional.forget()
    kept = not optional.unavailable(part.name)
    terminal.warning(f"optional part '{part.name}' ({part.what}) could not be built: {why}; "
                     + ("its existing image is kept" if kept else "the lab runs without it"))
    return False


def up(*, build_images: bool = False, only: tuple[str, ...] | None = None) -> None:
    """Bring the lab up: every available optional part, or only those in `only` (a parallel sweep's extra labs
    start just the parts its plan uses)."""
    engine()
    if build_images:
        build()
    grafana = grafana_wanted()
    parts = optional.available_profiles(only)
    profiles = (*parts, *((config.GRAFANA_PROFILE,) if grafana else ()))
    check_ports(grafana)
    napi.check_setting()
    for part in (optional.PARTS if only is None else only):
        if part not in parts:
            terminal.warning(f"without the optional part '{part}' ({optional.ALL[part]}): "
                             f"{optional.unavailable(part)}")
    terminal.info("starting the lab's containers (docker compose up)")
    # the profiles in force are exactly these (an empty --profile list would let .env's COMPOSE_PROFILES decide)
    os.environ[optional.ENV_PROFILES] = ",".join(profiles)
    try:
        # Not `--wait`: compose counts the one-shot route helpers' normal exit as a failure.
        docker.compose_up(profiles)
    except docker.DockerError as e:
        raise EnvironmentProblem(
            f"the lab did not come up (exit {e.return_code}): see `docker compose logs` "
            f"or `quiclab status`") from None
    hostnet.ensure_bridge_rules()  # the `hostnet` service adds them too; this also covers an older compose file
    wait_ready(poll=lambda: pending(parts))
    terminal.info(napi.apply_setting().line())
    if grafana:
        with terminal.status(f"waiting for Grafana at {config.grafana_url()}"):
            grafana_up = services.wait_up(services.GRAFANA, GRAFANA_START_TIMEOUT_S)
        if not grafana_up:
            terminal.warning(f"Grafana did not answer at {config.grafana_url()} within {GRAFANA_START_TIMEOUT_S:.0f} "
                             f"s: see `docker logs {config.GRAFANA_CONTAINER}`; everything else works")


def ensure_available(clients: Iterable[str] = (), servers: Iterable[str] = ()) -> None:
    """Every implementation asked for is usable in this lab (after `require_up`): an on-demand optional part
    (lab/optional.py) is built on first use (cached afterwards) and its containers are started here; an
    implementation of a part that is unavailable (not built and not buildable) is refused in one line (exit 2)."""
    reg = registry()
    impls = [*(reg.client(n) for n in clients), *(reg.server(n) for n in servers)]
    for name in optional.needed(i.container for i in impls):
        if name not in optional.ON_DEMAND:
            continue
        part = optional.parts()[name]
        if optional.unavailable(name):
            users = ", ".join(i.name for i in impls if optional.part_of(i.container) == name)
            terminal.info(f"the optional part '{name}' is built on first use, now (for {users})")
            build_optional(part)
        if optional.unavailable(name):
            break  # refused below, with the reason
        if any(not s.ready for s in states(part.containers)):
            terminal.info(f"starting the optional part '{name}' ({part.what}) in this lab")
            try:
                docker.compose_up_services(part.services, (name,))
            except docker.DockerError as e:
                raise EnvironmentProblem(f"the optional part '{name}' did not start (exit {e.return_code}): see "
                                         f"`docker compose logs`") from None
            wait_ready(poll=lambda name=name: pending((name,)))  # type: ignore[misc]
    for impl in impls:
        optional.require(impl.name, impl.container)


def pending(parts: tuple[str, ...] | None = None) -> list[str]:
    """What the lab still waits for ("quiclab-router is starting", "client-route has not finished"); raises if a
    one-shot helper failed. `parts`: the optional parts started (None: every available one)."""
    waits = [f"{s.name} is {s.health or s.state}" for s in states(wanted(LAB_CONTAINERS, parts)) if not s.ready]
    skip = {s for p in _skipped_parts(parts) for s in p.one_shots}
    for service in (s for s in ONE_SHOTS if s not in skip):
        found = docker.one_shot_state(PROJECT_LABEL, service)
        if found is None or found[0] != "exited":
            waits.append(f"{service} has not finished")
        elif found[1] != 0:
            raise EnvironmentProblem(f"{service} failed (exit {found[1]}): "
                                     f"see `docker compose logs {service}`")
    return waits


def wait_ready(timeout_s: float = UP_TIMEOUT_S, poll: Callable[[], list[str]] = pending,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
               interval_s: float = 0.5) -> None:
    """Wait until every lab container is healthy and the route helpers exited 0, showing what is still awaited
    (a spinner on a terminal, a line every few seconds off one)."""
    timeout_s = config.deadline(timeout_s)
    deadline = clock() + timeout_s
    with terminal.waiting("waiting for the lab to become ready", clock=clock) as update:
        while True:
            waits = poll()
            if not waits:
                break
            if clock() > deadline:
                raise EnvironmentProblem(f"the lab did not become ready in {timeout_s:.0f} s "
                                         f"({'; '.join(waits)}): see `docker compose logs`")
            update("; ".join(waits))
            sleep(interval_s)
    terminal.info("every container is ready")


def down() -> None:
    engine()
    failed: docker.DockerError | None = None
    try:
        docker.compose_down((*optional.ALL, config.GRAFANA_PROFILE))  # every optional part goes too
    except docker.DockerError as e:
        # e.g. Docker 20.10's "network ... has active endpoints": an endpoint of a removed container that the
        # daemon has not released yet (seen on CI after a container was killed). What is left goes below.
        failed = e
    sweep_leftovers()
    hostnet.remove_bridge_rules()  # the `hostnet` service removed them when it stopped, unless it was killed
    if failed is not None:
        left = leftovers()
        if left:
            raise EnvironmentProblem(f"`docker compose down` failed (exit {failed.return_code}) and left "
                                     f"{', '.join(left)}: {_last_line(failed.stderr)}") from None


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def sweep_leftovers() -> None:
    """Remove what compose no longer knows about but is still labelled as this project's: volumes and networks
    of another version of the compose file (an older checkout's lab), containers of a removed service, and
    endpoints the daemon kept on a lab network after their container was removed (`docker network disconnect
    -f`, the daemon's own remedy for a stale endpoint)."""
    docker.remove_labelled(PROJECT_LABEL)


def leftovers() -> list[str]:
    """Containers, networks, volumes and host firewall rules of the lab that still exist (empty after a clean
    `down`)."""
    engine()
    left = docker.labelled_resources(PROJECT_LABEL)
    left += [f"host firewall rule `{r}`" for r in hostnet.lab_rules()]
    return left


def health_problem(names: tuple[str, ...] = REQUIRED_FOR_RUNS) -> str | None:
    """Why the lab cannot measure right now (Docker unreachable, a container not running/healthy/paused, linkem
    not answering), or None. Asked after a run failed, to tell a transport's failure (a result) from the lab's
    (never a result)."""
    try:
        bad = [s for s in states(wanted(names)) if not s.ready]
    except QuiclabError as e:
        return str(e)
    if bad:
        return "; ".join(f"{s.name} is {s.state if s.state != 'running' else s.health}" for s in bad)
    from lab.link import linkem  # the emulator in the router must answer its control API

    try:
        linkem.current()
    except QuiclabError as e:
        return f"linkem does not answer: {e}"
    return None
