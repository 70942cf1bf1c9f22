"""How the router's kernel forwards what linkem writes: inside linkem's write, or in threaded NAPI (the default as
root).

The router's linkem attaches to its TUN devices with `IFF_NAPI` (images/router/router.sh, linkem `--napi on`).
With `QUICLAB_LINKEM_NAPI=off` (and `auto`, the default, where quiclab is not root) that NAPI runs in the softirq
of linkem's own write: every packet linkem writes is forwarded by the kernel inside that system call, in linkem's
thread, as through a TUN without NAPI; on a 2-core host that caps unshaped forwarding at ~0.5 of the kernel's own
(docs/benchmarks.md). With `QUICLAB_LINKEM_NAPI=on` (and `auto` as root), `quiclab up` makes the devices' NAPI
threaded: a written packet is queued to a kernel thread of the device (`napi/tun-down-N`, `napi/tun-up-N`) which
forwards it, and linkem's write returns at once.

Making a device's NAPI threaded means writing `/sys/class/net/NAME/threaded` in the router's network namespace.
The router container is unprivileged and its `/sys` is read-only, and a privileged helper container is refused on
some hosts; so it is a host step, as root: `nsenter` into the router's network namespace, a private mount
namespace (`unshare -m`), a sysfs mounted there (the router's namespace's sysfs: it shares the router's read-only
superblock, hence a remount read-write for the write and back read-only after it). Nothing else of the host or
the router changes, and the router keeps no privilege. Read back through the router after every change; a router
restart (its TUNs are new) is put right by the next `quiclab up` or sweep.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from lab import config, docker
from lab.errors import EnvironmentProblem, UsageError
from lab.link import router

#: The router's TUN devices (images/router/router.sh TUN_DOWN, TUN_UP).
TUNS = ("tun-down", "tun-up")

#: What `State.mode` says.
IN_WRITE = "in-write"       # forwarded inside linkem's write (NAPI in that write's softirq, or no NAPI)
THREADED = "threaded-napi"  # forwarded in the devices' own NAPI kernel threads

IFF_NAPI = 0x0010  # linux/if_tun.h, as /sys/class/net/NAME/tun_flags shows it

HOST_STEP_TIMEOUT_S = 10.0

_changes = 0  # how often this process changed the forwarding (set_threaded)


def changes() -> int:
    """How often this process changed the router's forwarding: what the lab path's calibration cache checks."""
    return _changes


@dataclass(frozen=True)
class State:
    attached: bool                 # linkem attached to every TUN with IFF_NAPI (tun_flags)
    threaded: tuple[bool, ...]     # per TUN (TUNS order): /sys/class/net/NAME/threaded

    @property
    def mode(self) -> str:
        return THREADED if self.attached and all(self.threaded) else IN_WRITE

    def line(self) -> str:
        """One line for `quiclab shape --show`, `quiclab up` and the bench."""
        if self.mode == THREADED:
            return (f"forwarding: threaded NAPI on {', '.join(TUNS)} ({setting_said()}: the kernel "
                    f"forwards what linkem writes in the devices' own threads)")
        if any(self.threaded):
            which = ", ".join(f"{t} {'threaded' if on else 'not threaded'}"
                              for t, on in zip(TUNS, self.threaded, strict=True))
            return f"forwarding: in linkem's writes, partly threaded ({which}): `quiclab up` puts the setting right"
        return f"forwarding: in linkem's writes ({setting_said()}; docs/link.md \"Forwarding\")"


def parse_state(text: str) -> State:
    """`cat` of every TUN's tun_flags then every TUN's threaded (TUNS order): "0x1011 0x1011 0 0"."""
    fields = text.split()
    n = len(TUNS)
    if len(fields) != 2 * n:
        raise EnvironmentProblem(f"router: expected the tun_flags and threaded of {', '.join(TUNS)}, got {text!r}")
    try:
        flags = [int(f, 16) for f in fields[:n]]
    except ValueError:
        raise EnvironmentProblem(f"router: unreadable tun_flags {fields[:n]}") from None
    return State(attached=all(f & IFF_NAPI for f in flags), threaded=tuple(x != "0" for x in fields[n:]))


def state() -> State:
    """Read back through the router: each TUN's flags (IFF_NAPI) and `threaded` file."""
    return parse_state(router.run("cat", *(f"/sys/class/net/{t}/tun_flags" for t in TUNS),
                                  *(f"/sys/class/net/{t}/threaded" for t in TUNS)))


def mode() -> str:
    return state().mode


def wanted() -> bool:
    """Whether the router's TUN NAPI should be threaded: QUICLAB_LINKEM_NAPI on/off, or auto (the default): on
    where this process can make the host step (root, util-linux), off otherwise."""
    setting = config.linkem_napi()
    return host_step_problem() is None if setting is None else setting


def setting_said() -> str:
    """The setting as `up` and the manifests say it: "QUICLAB_LINKEM_NAPI=on", "...=auto: root here", ..."""
    setting = config.linkem_napi()
    if setting is not None:
        return f"{config.ENV_LINKEM_NAPI}={'on' if setting else 'off'}"
    problem = host_step_problem()
    return f"{config.ENV_LINKEM_NAPI}=auto: " + ("root here" if problem is None else f"off, {problem}")


def host_step_problem() -> str | None:
    """Why this process cannot run the host step, or None."""
    if os.geteuid() != 0:
        return "it needs root on the host (nsenter into the router's network namespace)"
    missing = [t for t in ("nsenter", "unshare", "mount") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed on the host (util-linux)"
    return None


def host_script(on: bool) -> str:
    """The shell run in the router's network namespace and a private mount namespace (see the module's text)."""
    value = "1" if on else "0"
    writes = "; ".join(f'echo {value} > "$d/class/net/{t}/threaded"' for t in TUNS)
    restore = 'mount -o remount,ro "$d" 2>/dev/null || true; umount "$d" 2>/dev/null || true; rmdir "$d" || true'
    return (f"set -e; d=$(mktemp -d); trap '{restore}' EXIT; "
            f'mount -t sysfs sysfs "$d"; mount -o remount,rw "$d"; {writes}')


def check_setting() -> None:
    """Before `quiclab up` starts anything: QUICLAB_LINKEM_NAPI=on needs the host step, so this process must be
    able to run it."""
    problem = host_step_problem() if config.linkem_napi() is True else None
    if problem:
        raise UsageError(f"{config.ENV_LINKEM_NAPI}=on: making the router's TUN NAPI threaded is a host step and "
                         f"{problem}; run quiclab as root, or set {config.ENV_LINKEM_NAPI}=off")


def set_threaded(on: bool) -> State:
    """Make the router's TUN NAPI threaded (on) or not, from the host; read back. Raises UsageError when this
    process cannot (not root), EnvironmentProblem when the router cannot (no IFF_NAPI: an older router image) or
    the read-back differs."""
    if on and not state().attached:
        raise EnvironmentProblem("the router's linkem attached without NAPI (an older router image): "
                                 "`quiclab build` and `quiclab up`")
    problem = host_step_problem()
    if problem:
        raise UsageError(f"changing the router's TUN NAPI is a host step and {problem}")
    pid = docker.inspect_one(config.ROUTER_CONTAINER).pid
    if not pid:
        raise EnvironmentProblem(f"{config.ROUTER_CONTAINER} is not running: `quiclab up`")
    try:
        done = subprocess.run(["nsenter", "-t", str(pid), "-n", "unshare", "-m", "--propagation", "private",
                               "sh", "-c", host_script(on)],
                              capture_output=True, text=True, timeout=config.deadline(HOST_STEP_TIMEOUT_S), check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"writing the router's NAPI state did not finish in {HOST_STEP_TIMEOUT_S:g} s") \
            from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"writing the router's NAPI state failed (exit {done.returncode}): "
                                 f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}")
    now = state()
    if now.threaded != tuple(on for _ in TUNS):
        raise EnvironmentProblem(f"the router's NAPI state did not change as written: {now.line()}")
    global _changes
    _changes += 1  # the lab's own path is another now: the calibration (lab/link/calibrate.py) measures it again
    return now


def apply_setting() -> State:
    """Put QUICLAB_LINKEM_NAPI in force on the running router and read it back: threaded when on, not when off
    (a router restart, or a benchmark stopped mid-way, may have left it otherwise)."""
    want = wanted()
    now = state()
    if all(t == want for t in now.threaded):
        return now
    if want and not now.attached:
        raise EnvironmentProblem(f"{config.ENV_LINKEM_NAPI}=on but the router's linkem attached without NAPI (an "
                                 f"older router image): `quiclab build` and `quiclab up`")
    problem = host_step_problem()
    if problem:
        raise UsageError(f"{setting_said()} but {now.line()}; putting it right is a host step and {problem}: run "
                         f"`quiclab up` as root")
    return set_threaded(want)
