"""Commands to the router container (its control script, images/router/router.sh)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from lab import agent, config, docker
from lab.errors import EnvironmentProblem


@dataclass(frozen=True)
class Interfaces:
    client_side: str  # egress toward the client: the downlink is shaped here
    server_side: str  # egress toward the server: the uplink is shaped here


def _run(args: tuple[str, ...]) -> str:
    """One command in the router, through its agent (lab/agent.py: one long-lived `docker exec` carries every
    command of a process, ~8 ms each where a `docker exec` costs ~90 on a 2-core host, much more under emulation)."""
    return agent.run(config.ROUTER_CONTAINER, list(args), timeout_s=docker.EXEC_TIMEOUT_S)


def run(*args: str) -> str:
    try:
        return _run(args)
    except docker.DockerError as e:
        raise EnvironmentProblem(f"router command {' '.join(args[:3])} failed: "
                                 f"{e.reason()}") from None


def try_run(*args: str) -> tuple[int, str]:
    """Run and return (exit code, stderr) instead of raising; a router that cannot be reached at all (not running,
    its agent lost) is exit code 1 with the reason. A command that does not answer in time still raises
    (docker.ExecTimeout): a frozen router is the lab's failure, not a command's answer."""
    try:
        _run(args)
        return 0, ""
    except docker.DockerError as e:
        return e.return_code, (e.stderr or "").strip()
    except docker.ExecTimeout:
        raise
    except EnvironmentProblem as e:
        return 1, str(e)


@cache
def image() -> str:
    """The router's image: the one-shot helpers that act in an endpoint's network namespace run it (iproute2,
    ethtool, sysctl are in it)."""
    found = docker.inspect_one(config.ROUTER_CONTAINER).config_image
    if not found:
        raise EnvironmentProblem("cannot tell the router's image (for a one-shot helper)")
    return found


@cache
def interfaces() -> Interfaces:
    fields = dict(kv.split("=", 1) for kv in run("quiclab-router", "ifaces").split())
    return Interfaces(client_side=fields["client"], server_side=fields["server"])


@cache
def has_netem() -> bool:
    code, _ = try_run("quiclab-router", "netem-probe")
    return code == 0


_path: dict[str, str] = {}  # which path is in force, as far as this process set or saw it


def path(fresh: bool = False) -> str:
    if fresh or "now" not in _path:
        _path["now"] = run("quiclab-router", "path").strip()
    return _path["now"]


def set_path(which: str) -> None:
    run("quiclab-router", "path", which)
    _path["now"] = which


def run_script(script: str, failed: str, path_after: str | None = None) -> None:
    """Run a bash script in the router in one exec (e.g. netem.apply_script()); on failure raise EnvironmentProblem
    `failed: <its stderr>`. `path_after`: the path the script puts in force, remembered as set_path does."""
    code, err = try_run("bash", "-c", script)
    if code != 0:
        raise EnvironmentProblem(f"{failed}: {' '.join(err.split()) or f'exit code {code}'}")
    if path_after is not None:
        _path["now"] = path_after


def start_identity() -> str:
    """Identifies the router container's current start: its init process's start time (clock ticks since the host
    booted) and the host's boot id; changes whenever the router (re)starts."""
    stat = run("cat", "/proc/1/stat", "/proc/sys/kernel/random/boot_id").strip().splitlines()
    fields = stat[0].rpartition(")")[2].split()
    return f"{stat[-1].strip()}:{fields[19]}"
