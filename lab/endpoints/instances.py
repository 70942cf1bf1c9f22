"""Extra server processes beside a server's own: started in its container with PORT (and more) in the environment,
found again by the UDP port they listen on. The qlog instance of a run (lab/evidence/capture.py) and the
per-algorithm congestion-control instances of a sweep (lab/run/sender.py) are such processes."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from lab import agent, config, docker
from lab.errors import EnvironmentProblem

START_TIMEOUT_S = 10.0

# The UDP listener on port $1: its pid, then its command line (arguments separated by spaces); nothing if none.
_LISTENER = ('pid=$(ss -Hlunp "sport = :$1" | sed -n "s/.*pid=\\([0-9]*\\).*/\\1/p" | head -n 1); '
             '[ -n "$pid" ] && { echo "$pid"; tr "\\0" " " < "/proc/$pid/cmdline"; echo; } || true')


@dataclass(frozen=True)
class Listener:
    pid: int
    cmdline: str


def listener(container: str, port: int) -> Listener | None:
    """The process listening on UDP `port` in `container` (None when nothing listens there)."""
    try:
        out = agent.run(container, ["sh", "-c", _LISTENER, "listener", str(port)],
                        timeout_s=docker.EXEC_TIMEOUT_S).strip().splitlines()
    except docker.DockerError as e:
        raise EnvironmentProblem(f"cannot look for the listener on port {port} in {container}: "
                                 f"{e.reason(200)}") from None
    if len(out) < 2 or not out[0].strip().isdigit():
        return None
    return Listener(int(out[0]), out[1].strip())


def start(container: str, command: tuple[str, ...], port: int, env: dict[str, str], what: str) -> Listener:
    """Start `command` detached in `container` with PORT=port and `env`; wait until it listens on UDP `port`."""
    try:
        docker.exec_detached(container, command, env={"PORT": str(port), **env})
    except docker.DockerError as e:
        raise EnvironmentProblem(f"could not start {what}: {e.reason(200)}") from None
    deadline = time.monotonic() + config.deadline(START_TIMEOUT_S)
    while time.monotonic() < deadline:
        found = listener(container, port)
        if found is not None:
            return found
        time.sleep(0.05)
    raise EnvironmentProblem(f"{what} did not start listening on port {port}")


def stop(container: str, port: int) -> None:
    """Stop whatever listens on UDP `port` in `container` (SIGINT, as for a qlog instance: it closes its files)."""
    with contextlib.suppress(EnvironmentProblem):
        found = listener(container, port)
        if found is not None:
            docker.exec_in(container, ["kill", "-INT", str(found.pid)])
            deadline = time.monotonic() + config.deadline(2.0)
            while time.monotonic() < deadline and listener(container, port) is not None:
                time.sleep(0.05)
