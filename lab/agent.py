"""How the lab runs a command in an endpoint container for a measurement: `run(container, argv, timeout_s)`.

Every transfer, page load or other per-run command in a client (or server) container goes through here, so the
way it gets there (today `docker exec` per command) can change without touching the adapters. The contract:
returns the command's stdout (without the final newline); raises python-on-whales' DockerException with the exit
code and stderr when the command exits non-zero, lab.docker.ExecTimeout when it does not return in time."""

from __future__ import annotations

from lab import docker


def run(container: str, argv: list[str], timeout_s: float) -> str:
    return docker.exec_in(container, argv, timeout_s=timeout_s)
