"""The one place that talks to Docker (through python-on-whales, argument lists only)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from python_on_whales import DockerClient
from python_on_whales.exceptions import DockerException
from python_on_whales.utils import get_docker_exception_type, post_process_stream

from lab import config
from lab.errors import EnvironmentProblem

SETUP_HINT = "run `bash scripts/setup.sh` (installs and starts Docker if needed)"


@cache
def client(profiles: tuple[str, ...] = ()) -> DockerClient:
    """The lab's compose project; `profiles` also enables optional services (e.g. grafana)."""
    if shutil.which("docker") is None:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}")
    # docker-compose.yml derives every name from QUICLAB_INSTANCE as this process does (lab/instance.py); compose
    # reads it from the environment first, so it sees this lab's number (empty for the default lab, never "0").
    os.environ[config.ENV_INSTANCE] = config.INSTANCE.tag
    return DockerClient(
        compose_files=[config.COMPOSE_FILE],
        compose_project_name=config.PROJECT,
        compose_project_directory=config.ROOT,
        compose_profiles=list(profiles),
    )


def image_available(image: str, pull_timeout_s: float) -> bool:
    """True if the image is here, or a `docker pull` of it succeeds within the timeout."""
    if client().image.exists(image):
        return True
    try:
        done = subprocess.run(["docker", "pull", "-q", image], capture_output=True, timeout=pull_timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def require_engine() -> DockerClient:
    docker = client()
    try:
        docker.system.info()
    except DockerException as e:
        first = (e.stderr or str(e)).strip().splitlines()
        why = first[-1] if first else "no answer"
        raise EnvironmentProblem(f"Docker engine not reachable ({why}): {SETUP_HINT}") from None
    if not docker.compose.is_installed():
        raise EnvironmentProblem(f"Docker Compose v2 is not installed: {SETUP_HINT}")
    return docker


#: How long a command in a lab container may take unless the caller says otherwise (a frozen container must never
#: hang a sweep: every call into a container has a deadline).
EXEC_TIMEOUT_S = 30.0


class ExecTimeout(EnvironmentProblem):
    """A command in a lab container did not return in time (a frozen or overloaded container, a hung daemon)."""


def _exec_argv(container: str, command: list[str], interactive: bool = False) -> list[str]:
    return ["docker", "exec", *(["-i"] if interactive else []), container, *command]


def exec_in(container: str, command: list[str], timeout_s: float = EXEC_TIMEOUT_S) -> str:
    """Run a command in a lab container and return its stdout without the final newline.

    Raises DockerException (python-on-whales' type) when it exits non-zero, ExecTimeout when it does not return
    within `timeout_s`. The docker CLI runs in its own session, so a Ctrl-C at the terminal reaches quiclab only,
    which then stops what runs in the container itself (never half-killed by the terminal's signal)."""
    argv = _exec_argv(container, command)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ExecTimeout(f"`docker exec {container} {' '.join(command[:2])}` did not return within {timeout_s:g} s: "
                          f"is the container frozen (`docker ps`, `quiclab status`)?") from None
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    if done.returncode != 0:
        raise get_docker_exception_type(done.stderr)(argv, done.returncode, done.stdout, done.stderr)
    return post_process_stream(done.stdout)


def run_once(image: str, command: list[str], *, network: str, cap_add: tuple[str, ...] = (),
             security_opt: tuple[str, ...] = (), timeout_s: float = EXEC_TIMEOUT_S) -> str:
    """A short-lived helper container (`docker run --rm`), e.g. one that shares an endpoint's network namespace
    (`network="container:NAME"`) just long enough to set one thing there; returns its stdout. It is named, so a
    helper that does not return in time is removed, never left behind. Errors as exec_in."""
    name = f"{config.PROJECT}-helper-{uuid.uuid4().hex[:10]}"
    argv = ["docker", "run", "--rm", "--name", name, "--label", f"{config.PROJECT}.helper=1", "--network", network,
            *(f"--cap-add={c}" for c in cap_add), *(f"--security-opt={o}" for o in security_opt),
            "--entrypoint", command[0], image, *command[1:]]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=EXEC_TIMEOUT_S, check=False)
        raise ExecTimeout(f"helper container {name} ({' '.join(command[:2])}) did not finish within {timeout_s:g} s"
                          ) from None
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    if done.returncode != 0:
        raise get_docker_exception_type(done.stderr)(argv, done.returncode, done.stdout, done.stderr)
    return post_process_stream(done.stdout)


#: How long the lab's own run of a container's health check may take (Docker's timeout for it is 3-5 s).
OWN_CHECK_TIMEOUT_S = 5.0
_passed_own_check: set[tuple[str, str]] = set()


def health(c: Inspected) -> str:
    """A container's health as the lab counts it: Docker's status ("" without a health check), except that a
    running container Docker still calls "starting" is "healthy" once its own health check, run here now, passes.
    The lab's health checks run every 30 s (docker-compose.yml): each is a `docker exec`, ~75 ms of CPU on a 2-core
    host, and eleven containers checked every second took a third of the machine from the measurements. So Docker
    calls a fresh container "starting" for up to 30 s, and whoever waits for it (`quiclab up`, a restarted server)
    runs the same check itself meanwhile. A pass is remembered per container start, for later commands too."""
    status = c.health
    if status != "starting" or c.status != "running" or c.paused:
        return status
    key = (c.id, c.started_at)
    marker = _pass_marker(key)
    if key in _passed_own_check or marker.exists():
        return "healthy"
    test = list(c.healthcheck)
    if not test or test[0] == "NONE":
        return status
    command = ["/bin/sh", "-c", test[1]] if test[0] == "CMD-SHELL" else test[1:] if test[0] == "CMD" else test
    try:
        exec_in(c.name, command, timeout_s=OWN_CHECK_TIMEOUT_S)
    except (DockerException, EnvironmentProblem):
        return status
    _passed_own_check.add(key)
    with contextlib.suppress(OSError):  # for the next quiclab command too (`quiclab up`, then `quiclab run`)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return "healthy"


def _pass_marker(key: tuple[str, str]) -> Path:
    """Where a passed own check of one container start is remembered across quiclab commands."""
    return config.cache_dir() / "health" / f"{key[0]}-{hashlib.sha256(key[1].encode()).hexdigest()[:16]}"


def image_tags(reference: str) -> frozenset[str]:
    """The `repository:tag` of every local image matching `reference` (e.g. "quiclab/*"), in one call."""
    try:
        done = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", reference],
                              capture_output=True, text=True, timeout=EXEC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem("`docker image ls` did not return within "
                                 f"{EXEC_TIMEOUT_S:g} s: is the Docker engine overloaded?") from None
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"`docker image ls` failed: {' '.join(done.stderr.split())[:200]}")
    return frozenset(done.stdout.split())


#: An image build may take long (apt downloads, a Rust build), but not forever.
BUILD_TIMEOUT_S = 1800.0


def compose_build(services: tuple[str, ...], profiles: tuple[str, ...], echo: Callable[[str], None]
                  ) -> tuple[int, str]:
    """`docker compose build SERVICES` with the given profiles, its output passed line by line to `echo` (progress
    of a long build) and kept; returns (exit code, output). Killed at BUILD_TIMEOUT_S (exit code -9)."""
    os.environ[config.ENV_INSTANCE] = config.INSTANCE.tag
    argv = ["docker", "compose", "-f", str(config.COMPOSE_FILE), "--project-directory", str(config.ROOT),
            "-p", config.PROJECT, *(a for p in profiles for a in ("--profile", p)), "--progress", "plain",
            "build", *services]
    kept: list[str] = []
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    deadline = threading.Timer(BUILD_TIMEOUT_S, proc.kill)
    deadline.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            kept.append(line)
            echo(line.rstrip("\n"))
        code = proc.wait()
    finally:
        deadline.cancel()
        if proc.poll() is None:  # interrupted while building: never leave a build behind
            proc.kill()
            proc.wait()
    return code, "".join(kept[-400:])


def container_names(prefix: str) -> list[str]:
    """The names of every container on this host (running or not) that start with `prefix`, in one call."""
    try:
        done = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^{prefix}"],
                              capture_output=True, text=True, timeout=EXEC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"`docker ps` did not return within {EXEC_TIMEOUT_S:g} s") from None
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"`docker ps` failed: {' '.join(done.stderr.split())[:200]}")
    return [n for n in done.stdout.split() if n.startswith(prefix)]


@dataclass(frozen=True)
class Inspected:
    """What the lab reads of a container, from one `docker inspect` (python-on-whales' Container objects inspect
    again on attribute access after a moment: a process apiece)."""

    id: str
    name: str
    image: str
    status: str  # running, exited, ...
    paused: bool
    health: str  # Docker's health status: healthy, unhealthy, starting, "" (no health check)
    started_at: str
    healthcheck: tuple[str, ...]  # the health check's test (CMD, CMD-SHELL, NONE, ...), () without one

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Inspected:
        state = doc.get("State") or {}
        test = ((doc.get("Config") or {}).get("Healthcheck") or {}).get("Test") or []
        return cls(id=doc.get("Id", ""), name=str(doc.get("Name", "")).lstrip("/"), image=doc.get("Image", ""),
                   status=state.get("Status") or "?", paused=bool(state.get("Paused")),
                   health=(state.get("Health") or {}).get("Status") or "", started_at=state.get("StartedAt") or "",
                   healthcheck=tuple(test))


def _docker_text(argv: list[str]) -> str:
    try:
        done = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=EXEC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"`docker {argv[0]}` did not return within {EXEC_TIMEOUT_S:g} s: is the Docker "
                                 "engine overloaded?") from None
    except FileNotFoundError:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}") from None
    if done.returncode != 0:
        raise get_docker_exception_type(done.stderr)(["docker", *argv], done.returncode, done.stdout, done.stderr)
    return done.stdout


def labelled(label: str, *, running_only: bool = False) -> list[Inspected]:
    """The containers carrying `label` (e.g. a compose project's), all inspected in one `docker inspect`."""
    ids = _docker_text(["ps", "-q", *([] if running_only else ["-a"]), "--filter", f"label={label}"]).split()
    if not ids:
        return []
    return [Inspected.of(doc) for doc in json.loads(_docker_text(["inspect", *ids]))]


def inspect_one(name: str) -> Inspected:
    return Inspected.of(json.loads(_docker_text(["inspect", name]))[0])
