"""The one place that talks to Docker (through python-on-whales or the docker CLI, argument lists only).

No other module of the lab imports python-on-whales or starts a `docker` process (tests/unit/test_docker_boundary.py
holds every module to it). What they need is here: one-shot calls (`exec_in`, `inspect_one`, `pause`, `copy_from`,
...) and `Stream`, a docker process the caller talks to while it runs (a `docker exec -i` shell, a tcpdump whose
output is read later). Docker's failures reach the rest of the lab as one type, `DockerError` (an
EnvironmentProblem: a command exited non-zero; python-on-whales' DockerException is translated here), and
`ExecTimeout` (no answer in time)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

from python_on_whales import DockerClient
from python_on_whales.exceptions import DockerException
from python_on_whales.utils import post_process_stream

from lab import config
from lab.errors import EnvironmentProblem
from lab.lines import LineReader

SETUP_HINT = "run `bash scripts/setup.sh` (installs and starts Docker if needed)"
#: The program every docker process runs (tests put a stand-in in its place: tests/unit/test_docker_stream.py).
PROGRAM = "docker"


class DockerError(EnvironmentProblem):
    """A docker command, or a command in a lab container, exited non-zero. Carries what python-on-whales'
    DockerException carried (`docker_command`, `return_code`, `stdout`, `stderr`: text or None) and the same
    message; `reason()` says what went wrong, the one way every message quotes it."""

    def __init__(self, command: Sequence[str], return_code: int, stdout: bytes | str | None = None,
                 stderr: bytes | str | None = None) -> None:
        self.docker_command = list(command)
        self.return_code = return_code
        self.stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        self.stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
        text = (f"The command executed was `{' '.join(self.docker_command)}`.\n"
                f"It returned with code {return_code}\n")
        text += (f"The content of stdout is '{self.stdout}'\n" if self.stdout is not None
                 else "The content of stdout can be found above the stacktrace (it wasn't captured).\n")
        text += (f"The content of stderr is '{self.stderr}'\n" if self.stderr is not None
                 else "The content of stderr can be found above the stacktrace (it wasn't captured).")
        super().__init__(text)

    def reason(self, limit: int = 300) -> str:
        """What went wrong, on one line of at most `limit` characters: the command's stderr, else its exit code."""
        return " ".join((self.stderr or "").split())[:limit] or f"exit code {self.return_code}"

    @classmethod
    def of(cls, e: DockerException) -> DockerError:
        return cls(e.docker_command, e.return_code, e.stdout, e.stderr)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """python-on-whales' DockerException (any subclass) as DockerError: the only place it is caught."""
    try:
        yield
    except DockerException as e:
        raise DockerError.of(e) from None


def _not_installed() -> EnvironmentProblem:
    return EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}")


#: How often Docker runs each container's health check on a real host, and how long one may take
#: (docker-compose.yml, x-health).
HEALTH_INTERVAL_S = 30.0
HEALTH_TIMEOUT_S = 5.0
ENV_HEALTH_INTERVAL = "QUICLAB_HEALTH_INTERVAL"
ENV_HEALTH_TIMEOUT = "QUICLAB_HEALTH_TIMEOUT"


def compose_environment() -> None:
    """What docker-compose.yml reads from this process's environment: the lab's number (every name derives from
    QUICLAB_INSTANCE as this process's do, lab/instance.py; empty for the default lab, never "0") and the timing
    of Docker's health checks, scaled as every deadline of the lab's own machinery is (config.deadline): each check
    is a `docker exec` (~75-250 ms on this host), QUICLAB_SLOW times slower under emulation. So a check may take
    that much longer (in the TCG VM, on the images' own 3 s, Docker called the guest's router unhealthy, most
    likely timed out, and a sweep refused to start), and runs that many times as seldom, keeping the share of the
    CPU it has on a real host."""
    os.environ[config.ENV_INSTANCE] = config.INSTANCE.tag
    os.environ[ENV_HEALTH_INTERVAL] = f"{config.deadline(HEALTH_INTERVAL_S):.0f}s"
    os.environ[ENV_HEALTH_TIMEOUT] = f"{config.deadline(HEALTH_TIMEOUT_S):.0f}s"


@cache
def client(profiles: tuple[str, ...] = ()) -> DockerClient:
    """The lab's compose project; `profiles` also enables optional services (e.g. grafana). For this module and
    the tests only: the lab's other modules call the functions here, which raise DockerError, never
    python-on-whales' own exceptions."""
    if shutil.which("docker") is None:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}")
    compose_environment()
    return DockerClient(
        compose_files=[config.COMPOSE_FILE],
        compose_project_name=config.PROJECT,
        compose_project_directory=config.ROOT,
        compose_profiles=list(profiles),
    )


def image_available(image: str, pull_timeout_s: float) -> bool:
    """True if the image is here, or a `docker pull` of it succeeds within the timeout."""
    with _translated():
        if client().image.exists(image):
            return True
    try:
        done = subprocess.run([PROGRAM, "pull", "-q", image], capture_output=True, timeout=pull_timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def require_engine() -> None:
    """The Docker engine answers and Compose v2 is installed; EnvironmentProblem (one line) otherwise."""
    docker = client()
    try:
        docker.system.info()
    except DockerException as e:
        first = (e.stderr or str(e)).strip().splitlines()
        why = first[-1] if first else "no answer"
        raise EnvironmentProblem(f"Docker engine not reachable ({why}): {SETUP_HINT}") from None
    with _translated():
        installed = docker.compose.is_installed()
    if not installed:
        raise EnvironmentProblem(f"Docker Compose v2 is not installed: {SETUP_HINT}")


def server_version() -> str:
    """The Docker engine's version ("" if it does not say)."""
    with _translated():
        return client().version().server.version or ""


#: How long a command in a lab container may take unless the caller says otherwise (a frozen container must never
#: hang a sweep: every call into a container has a deadline). Every deadline here, the caller's too, is a real host's:
#: it is scaled once, where it is enforced, by config.deadline (QUICLAB_SLOW times longer under emulation).
EXEC_TIMEOUT_S = 30.0


class ExecTimeout(EnvironmentProblem):
    """A command in a lab container did not return in time (a frozen or overloaded container, a hung daemon)."""


def exec_args(container: str, command: Sequence[str], *, interactive: bool = False,
              env: dict[str, str] | None = None) -> list[str]:
    """The arguments of `docker exec` (after the program) running `command` in `container`: `-i` keeps its stdin
    open (a shell the caller writes to), `env` sets variables for it (`-e K=V`)."""
    return ["exec", *(["-i"] if interactive else []), *(a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")),
            container, *command]


def _exec_argv(container: str, command: list[str], interactive: bool = False) -> list[str]:
    return [PROGRAM, *exec_args(container, command, interactive=interactive)]


def exec_in(container: str, command: list[str], timeout_s: float = EXEC_TIMEOUT_S) -> str:
    """Run a command in a lab container and return its stdout without the final newline.

    Raises DockerError when it exits non-zero, ExecTimeout when it does not return
    within `timeout_s`. The docker CLI runs in its own session, so a Ctrl-C at the terminal reaches quiclab only,
    which then stops what runs in the container itself (never half-killed by the terminal's signal)."""
    argv = _exec_argv(container, command)
    timeout_s = config.deadline(timeout_s)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ExecTimeout(f"`docker exec {container} {' '.join(command[:2])}` did not return within {timeout_s:g} s: "
                          f"is the container frozen (`docker ps`, `quiclab status`)?") from None
    except FileNotFoundError:
        raise _not_installed() from None
    if done.returncode != 0:
        raise DockerError(argv, done.returncode, done.stdout, done.stderr)
    return post_process_stream(done.stdout)


def run_once(image: str, command: list[str], *, network: str, cap_add: tuple[str, ...] = (),
             security_opt: tuple[str, ...] = (), timeout_s: float = EXEC_TIMEOUT_S) -> str:
    """A short-lived helper container (`docker run --rm`), e.g. one that shares an endpoint's network namespace
    (`network="container:NAME"`) just long enough to set one thing there; returns its stdout. It is named, so a
    helper that does not return in time is removed, never left behind. Errors as exec_in."""
    name = f"{config.PROJECT}-helper-{uuid.uuid4().hex[:10]}"
    argv = [PROGRAM, "run", "--rm", "--name", name, "--label", f"{config.PROJECT}.helper=1", "--network", network,
            *(f"--cap-add={c}" for c in cap_add), *(f"--security-opt={o}" for o in security_opt),
            "--entrypoint", command[0], image, *command[1:]]
    timeout_s = config.deadline(timeout_s)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        subprocess.run([PROGRAM, "rm", "-f", name], capture_output=True, timeout=config.deadline(EXEC_TIMEOUT_S),
                       check=False)
        raise ExecTimeout(f"helper container {name} ({' '.join(command[:2])}) did not finish within {timeout_s:g} s"
                          ) from None
    except FileNotFoundError:
        raise _not_installed() from None
    if done.returncode != 0:
        raise DockerError(argv, done.returncode, done.stdout, done.stderr)
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
    except EnvironmentProblem:  # DockerError, ExecTimeout
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
        done = subprocess.run([PROGRAM, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", reference],
                              capture_output=True, text=True, timeout=config.deadline(EXEC_TIMEOUT_S), check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem("`docker image ls` did not return within "
                                 f"{config.deadline(EXEC_TIMEOUT_S):g} s: is the Docker engine overloaded?") from None
    except FileNotFoundError:
        raise _not_installed() from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"`docker image ls` failed: {' '.join(done.stderr.split())[:200]}")
    return frozenset(done.stdout.split())


#: An image build may take long (apt downloads, a Rust build), but not forever.
BUILD_TIMEOUT_S = 1800.0


def compose_build(services: tuple[str, ...], profiles: tuple[str, ...], echo: Callable[[str], None]
                  ) -> tuple[int, str]:
    """`docker compose build SERVICES` with the given profiles, its output passed line by line to `echo` (progress
    of a long build) and kept; returns (exit code, output). Killed at BUILD_TIMEOUT_S (exit code -9)."""
    compose_environment()
    argv = [PROGRAM, "compose", "-f", str(config.COMPOSE_FILE), "--project-directory", str(config.ROOT),
            "-p", config.PROJECT, *(a for p in profiles for a in ("--profile", p)), "--progress", "plain",
            "build", *services]
    kept: list[str] = []
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise _not_installed() from None
    deadline = threading.Timer(config.deadline(BUILD_TIMEOUT_S), proc.kill)
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
        done = subprocess.run([PROGRAM, "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^{prefix}"],
                              capture_output=True, text=True, timeout=config.deadline(EXEC_TIMEOUT_S), check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"`docker ps` did not return within {config.deadline(EXEC_TIMEOUT_S):g} s") from None
    except FileNotFoundError:
        raise _not_installed() from None
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
    pid: int = 0  # its main process on the host (0 when it is not running)
    config_image: str = ""  # the image as the container was created from it (a name, where `image` is an id)

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Inspected:
        state = doc.get("State") or {}
        test = ((doc.get("Config") or {}).get("Healthcheck") or {}).get("Test") or []
        return cls(id=doc.get("Id", ""), name=str(doc.get("Name", "")).lstrip("/"), image=doc.get("Image", ""),
                   status=state.get("Status") or "?", paused=bool(state.get("Paused")),
                   health=(state.get("Health") or {}).get("Status") or "", started_at=state.get("StartedAt") or "",
                   healthcheck=tuple(test), pid=int(state.get("Pid") or 0),
                   config_image=(doc.get("Config") or {}).get("Image") or "")


def _docker_text(argv: list[str]) -> str:
    timeout_s = config.deadline(EXEC_TIMEOUT_S)
    try:
        done = subprocess.run([PROGRAM, *argv], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"`docker {argv[0]}` did not return within {timeout_s:g} s: is the Docker "
                                 "engine overloaded?") from None
    except FileNotFoundError:
        raise _not_installed() from None
    if done.returncode != 0:
        raise DockerError([PROGRAM, *argv], done.returncode, done.stdout, done.stderr)
    return done.stdout


def labelled(label: str, *, running_only: bool = False) -> list[Inspected]:
    """The containers carrying `label` (e.g. a compose project's), all inspected in one `docker inspect`."""
    ids = _docker_text(["ps", "-q", *([] if running_only else ["-a"]), "--filter", f"label={label}"]).split()
    if not ids:
        return []
    return [Inspected.of(doc) for doc in json.loads(_docker_text(["inspect", *ids]))]


def inspect_one(name: str) -> Inspected:
    return Inspected.of(json.loads(_docker_text(["inspect", name]))[0])


# --- one-shot calls through python-on-whales (its exceptions translated to DockerError) ----------------------------

def pause(container: str) -> None:
    with _translated():
        client().container.pause(container)


def unpause(container: str) -> None:
    with _translated():
        client().container.unpause(container)


def kill(container: str) -> None:
    with _translated():
        client().container.kill(container)


def start(container: str) -> None:
    with _translated():
        client().container.start(container)


def exec_detached(container: str, command: Sequence[str], env: dict[str, str] | None = None) -> None:
    """Start a command in a container and return at once (`docker exec -d`); the caller stops it (by name)."""
    with _translated():
        client().container.execute(container, list(command), detach=True, envs=env or {})


def copy_from(container: str, src: str, dest: Path) -> None:
    """`docker cp CONTAINER:SRC DEST` (a file or a directory)."""
    with _translated():
        client().container.copy((container, src), dest)


def copy_to(src: Path | str, container: str, dest: str) -> None:
    """`docker cp SRC CONTAINER:DEST`."""
    with _translated():
        client().container.copy(str(src), (container, dest))


def start_attached(container: str, timeout_s: float) -> tuple[int, str, str]:
    """Start a stopped (one-shot) container attached, wait for it to exit: (exit code, stdout, stderr). Raises
    ExecTimeout when it does not exit within `timeout_s` (the docker CLI is killed; the helper may still run)."""
    argv = [PROGRAM, "start", "-a", container]
    timeout_s = config.deadline(timeout_s)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ExecTimeout(f"{container} did not finish within {timeout_s:g} s") from None
    except FileNotFoundError:
        raise _not_installed() from None
    return done.returncode, done.stdout, done.stderr


# --- the lab's compose project -------------------------------------------------------------------------------------

def compose_build_services(services: Sequence[str]) -> None:
    """`docker compose build SERVICES` (output to the terminal); DockerError when it fails."""
    with _translated():
        client().compose.build(list(services), quiet=False)


def compose_up(profiles: tuple[str, ...]) -> None:
    """`docker compose up -d` with these profiles; DockerError when it fails."""
    with _translated():
        client(profiles).compose.up(detach=True, quiet=False)


def compose_up_services(services: Sequence[str], profiles: tuple[str, ...]) -> None:
    """`docker compose up -d SERVICES` (and what they depend on) with these profiles; DockerError when it fails."""
    with _translated():
        client(profiles).compose.up(list(services), detach=True, quiet=False)


def compose_down(profiles: tuple[str, ...]) -> None:
    """`docker compose down -v --remove-orphans -t 5` with these profiles; DockerError when it fails."""
    with _translated():
        client(profiles).compose.down(volumes=True, remove_orphans=True, timeout=5)


def one_shot_state(project_label: str, service: str) -> tuple[str | None, int | None] | None:
    """(status, exit code) of a compose service's container (a one-shot helper), None if it has none."""
    with _translated():
        found = client().container.list(all=True, filters=[("label", project_label),
                                                           ("label", f"com.docker.compose.service={service}")])
        if not found:
            return None
        return found[0].state.status, found[0].state.exit_code


#: How often a lab network that still has endpoints is tried again (after force-disconnecting them).
NETWORK_REMOVE_TRIES = 5


def remove_labelled(label: str, *, network_tries: int = NETWORK_REMOVE_TRIES) -> None:
    """Remove every container, network and volume carrying `label`, best effort (what cannot be removed stays;
    `labelled_resources` tells). A network that still has endpoints after its containers went (a stale endpoint
    the daemon kept) is force-disconnected from them (`docker network disconnect -f`, the daemon's own remedy)
    and tried again."""
    d = client()
    with contextlib.suppress(DockerException):
        gone = d.container.list(all=True, filters=[("label", label)])
        if gone:
            d.container.remove(gone, force=True, volumes=True)
    with contextlib.suppress(DockerException):
        for net in d.network.list(filters=[("label", label)]):
            _remove_network(d, net.name, network_tries)
    with contextlib.suppress(DockerException):
        vols = d.volume.list(filters=[("label", label)])
        if vols:
            d.volume.remove(vols)


def _remove_network(d: DockerClient, name: str, tries: int) -> None:
    for attempt in range(tries):
        try:
            d.network.remove(name)
            return
        except DockerException:
            if attempt == tries - 1:
                raise
        with contextlib.suppress(DockerException):
            for key, endpoint in d.network.inspect(name).containers.items():
                with contextlib.suppress(DockerException):
                    d.network.disconnect(name, endpoint.name or key, force=True)
        time.sleep(0.5 * (attempt + 1))


def labelled_resources(label: str) -> list[str]:
    """"container NAME", "network NAME", "volume NAME" of everything carrying `label`."""
    d = client()
    with _translated():
        left = [f"container {c.name}" for c in d.container.list(all=True, filters=[("label", label)])]
        left += [f"network {n.name}" for n in d.network.list(filters=[("label", label)])]
        left += [f"volume {v.name}" for v in d.volume.list(filters=[("label", label)])]
    return left


# --- a docker process the caller streams through --------------------------------------------------------------------

#: The deadline of a process that lives for one run (a capture, a competing flow, the run's nft shell): a backstop
#: for one its owner lost track of, never a limit on a measurement. A run's transfer timeout is at most an hour
#: (scenario `timeout` <= 3600 s, derived ones capped there) and its owner stops the process when the run ends, so
#: no legitimate run comes near a day.
RUN_SCOPED_DEADLINE_S = 86400.0


class Stream:
    """One docker process the caller talks to while it runs: `docker ARGS` (e.g. `exec_args(...)`, or
    `["start", "-a", NAME]`), with stdin/stdout/stderr as the caller needs them, in its own session (a Ctrl-C at
    the terminal reaches quiclab only, which then stops what runs in the container itself).

    `deadline_s` is the process's whole life: when it passes, the process is killed wherever its owner is (a read
    of its output then ends). None only where the caller puts a deadline on every exchange itself (the client
    agent). Leaving the `with` block, `close()` or `finish()` ends it: stdin closed, a grace period to exit, then
    killed and waited for; never left behind. Killing it ends the docker CLI, not what runs in the container: the
    owner stops that itself (by name), as it always did.

    `deadline_s` and the grace periods are a real host's, scaled here by config.deadline; a deadline passed to `line`
    is the caller's to scale.

    Start failures raise EnvironmentProblem; what the process says is the caller's to judge (`line`, `finish`)."""

    def __init__(self, args: Sequence[str], *, deadline_s: float | None, stdin: bool = False,
                 stdout: int | IO[Any] | None = subprocess.DEVNULL, stderr: int | IO[Any] | None = subprocess.DEVNULL,
                 text: bool = False, program: str | None = None) -> None:
        self.argv = [program or PROGRAM, *args]
        self.timed_out = False
        self._text = text
        self._readers: dict[str, LineReader] = {}
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE if stdin else None, stdout=stdout,
                                         stderr=stderr, text=text, start_new_session=True)
        except FileNotFoundError:
            raise _not_installed() from None
        self._timer: threading.Timer | None = None
        if deadline_s is not None:
            self._timer = threading.Timer(config.deadline(deadline_s), self._expire)
            self._timer.daemon = True  # never keeps quiclab from exiting
            self._timer.start()

    def _expire(self) -> None:
        if self.proc.poll() is None:
            self.timed_out = True
            self.kill()

    def kill(self) -> None:
        """SIGKILL to its process group (its own session: the docker CLI and anything it started), not waited for."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            with contextlib.suppress(OSError):
                self.proc.kill()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stdin(self) -> IO[Any]:
        assert self.proc.stdin is not None, "started without stdin=True"
        return self.proc.stdin

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def poll(self) -> int | None:
        return self.proc.poll()

    def send(self, data: bytes) -> None:
        """Write to its stdin and flush; OSError when the process is gone (or its stdin was closed)."""
        try:
            self.stdin.write(data)
            self.stdin.flush()
        except ValueError:  # written after close()
            raise BrokenPipeError(f"the stdin of `{' '.join(self.argv[:3])}` is closed") from None

    def line(self, deadline: float, which: str = "stdout") -> str | None:
        """The next line of its stdout (or "stderr") without the newline; None if it ended or the deadline
        (time.monotonic) passed first."""
        reader = self._readers.get(which)
        if reader is None:
            stream = self.proc.stdout if which == "stdout" else self.proc.stderr
            assert stream is not None, f"started without a pipe for {which}"
            reader = self._readers[which] = LineReader(stream)
        return reader.read_line(deadline)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _rest(self, which: str, more: Any) -> Any:
        """What `line` had read ahead of `which`, then `more` (its output read at the end)."""
        reader = self._readers.get(which)
        early = reader.rest() if reader is not None else b""
        if not early:
            return more
        if isinstance(more, str) or (more is None and self._text):
            return early.decode(errors="replace") + (more or "")
        return early + (more or b"")

    def finish(self, grace_s: float) -> tuple[Any, Any]:
        """Wait up to `grace_s` for it to exit (after its owner told it to stop), else kill it; its remaining
        (stdout, stderr) where piped (None where not)."""
        self._cancel()
        try:
            out, err = self.proc.communicate(timeout=config.deadline(grace_s))
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
        return self._rest("stdout", out), self._rest("stderr", err)

    def close(self, grace_s: float = 5.0) -> None:
        """Close its stdin (a shell or agent reading it exits), wait up to `grace_s`, then kill; waited for."""
        self._cancel()
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=config.deadline(grace_s))
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
