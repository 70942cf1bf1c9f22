"""The faults: how each is put in force, undone and verified undone (lab/adverse/spec.py says what they mean). Each
kind is one class (apply / undo / verify), chosen by its name from KINDS.

- pause: Docker's freezer on the server's container (`docker pause`/`unpause`). The kernel keeps
  running the container's network stack: TCP keeps sending what is already in its socket buffers; a userspace
  QUIC server stops at once.
- kill: SIGKILL to the server's container (`docker kill`), then `docker start`. A restarted container has a new
  network namespace, so its one-shot route helper (compose service `<service>-route`) runs again; the server is
  back when Docker calls it healthy.
- blackout: with linkem, the run's link with an outage window of DURATION starting when the emulator applies it
  (the emulator times it to the nanosecond: exactly DURATION in both directions); the run's link is put back
  just after. With netem, an nft drop rule in the router matching a set whose elements expire after DURATION:
  the kernel ends it (to its tick), the docker exec latency only moves its start; the table is deleted after.
- rate, delay: the run's link with that rate/delay, then the run's link again (linkem: one PUT each; netem: the
  qdiscs re-applied, which drops what they held, docs/link.md).

Undo is idempotent (pause: unpause if paused; kill: start if not running; link: the run's link; rules: delete if
there) and verified: the container running, not paused, healthy; the emulator's config equal to the run's link
(netem: the qdiscs as before); no `qla_*` table in the router.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from lab import config, docker
from lab.adverse import rules
from lab.adverse.spec import Fault, FaultKind
from lab.errors import EnvironmentProblem
from lab.link import calibrate, linkem, router, shaper
from lab.link.model import Link, Outage

#: A restarted or unpaused server must be healthy again within this (its own health check, run by docker.health).
HEALTHY_WITHIN_S = 60.0
#: A linkem blackout ends by itself inside the emulator; the run's link is put back this long after.
RESTORE_AFTER_BLACKOUT_S = 0.05
_BLACKOUT_TABLE = "qla_blackout"
_LONGEST_PERIOD_S = 86400.0


class FaultFailed(EnvironmentProblem):
    """A fault could not be put in force or undone: the lab, not the transport, failed."""


def container_state(name: str) -> tuple[str, bool, str]:
    """(status, paused, health) of a container."""
    c = docker.inspect_one(name)
    return c.status, c.paused, docker.health(c)


def wait_healthy(name: str, within_s: float = HEALTHY_WITHIN_S) -> str | None:
    """Wait until the container runs, unpaused and healthy; None, or why not."""
    deadline = time.monotonic() + config.deadline(within_s)
    state: tuple[str, bool, str] = ("?", False, "")
    while time.monotonic() < deadline:
        try:
            state = container_state(name)
        except docker.DockerError as e:
            return f"{name}: {e.reason(200)}"
        status, paused, health = state
        if status == "running" and not paused and health in ("healthy", ""):
            return None
        time.sleep(0.2)
    status, paused, health = state
    shown = f"{'paused' if paused else status}{f' ({health})' if health else ''}"
    return f"{name} is {shown} {config.deadline(within_s):g} s after the fault"


@dataclass(frozen=True)
class Target:
    """Where a run's faults act: the run's shaper backend and link, the server's container and compose service;
    `blackout_with` = "nft" forces the nft blackout on any backend."""

    backend: str
    link: Link
    container: str
    service: str
    blackout_with: str | None = None


class Action:
    """One fault of one run, put in force and undone. `apply` and `undo` return nothing; both raise FaultFailed.
    Each fault kind is one subclass, chosen by its name (KINDS)."""

    #: The fault ends by itself after its duration (the undo only tidies up): its end is `start + duration`.
    self_ending = False
    #: Its verify checks that the emulator's link is the run's again (the run's own check of it is then not needed).
    verifies_link = False

    def __init__(self, fault: Fault) -> None:
        self.fault = fault

    @classmethod
    def for_run(cls, fault: Fault, target: Target) -> Action:
        """This kind's action for one fault of a run."""
        raise NotImplementedError

    @classmethod
    def during(cls, fault: Fault, link: Link) -> Link:
        """The run's link while the fault is in force (the link itself for a fault on the server)."""
        return link

    @classmethod
    def refuses(cls, fault: Fault, link: Link) -> str:
        """Why this fault cannot be had on a point with this link ("" if it can): checked when the plan is made."""
        return ""

    def apply(self) -> None:
        raise NotImplementedError

    def undo(self) -> None:
        raise NotImplementedError

    def verify(self) -> str | None:
        """After undo: None, or what is still not as before."""
        raise NotImplementedError


PAUSE_TRIES = 5


class Pause(Action):
    """pause: Docker's freezer on the server's container, then unpaused."""

    def __init__(self, fault: Fault, container: str) -> None:
        super().__init__(fault)
        self.container = container

    @classmethod
    def for_run(cls, fault: Fault, target: Target) -> Action:
        return cls(fault, target.container)

    def apply(self) -> None:
        # The cgroup freezer can refuse while a task is in an uninterruptible state ("unable to freeze"): tried
        # again for up to PAUSE_TRIES x 0.1 s; the fault's recorded start is when the pause took.
        for attempt in range(PAUSE_TRIES):
            try:
                docker.pause(self.container)
                return
            except docker.DockerError as e:
                why = e.reason()
                if "unable to freeze" not in why or attempt == PAUSE_TRIES - 1:
                    raise FaultFailed(f"could not pause {self.container}: {why[:200]}") from None
                time.sleep(0.1)

    def undo(self) -> None:
        try:
            if container_state(self.container)[1]:
                docker.unpause(self.container)
        except docker.DockerError as e:
            raise FaultFailed(f"could not unpause {self.container}: {e.reason(200)}") from None

    def verify(self) -> str | None:
        return wait_healthy(self.container)


class Kill(Action):
    """kill: SIGKILL to the server's container, then started again with its route helper."""

    def __init__(self, fault: Fault, container: str, service: str) -> None:
        super().__init__(fault)
        self.container = container
        self.route_helper = f"{config.PROJECT}-{service}-route-1"

    @classmethod
    def for_run(cls, fault: Fault, target: Target) -> Action:
        return cls(fault, target.container, target.service)

    def apply(self) -> None:
        try:
            docker.kill(self.container)
        except docker.DockerError as e:
            raise FaultFailed(f"could not kill {self.container}: {e.reason(200)}") from None

    def undo(self) -> None:
        try:
            status, paused, _ = container_state(self.container)
            if paused:
                docker.unpause(self.container)
            if status == "running":
                return
            docker.start(self.container)
            # the new network namespace needs its route through the router (and offloads off) again
            code, out, err = docker.start_attached(self.route_helper, timeout_s=60)
            if code != 0:
                raise FaultFailed(f"{self.route_helper} failed after restarting {self.container}: "
                                  f"{(err or out).strip()[:200]}")
        except docker.DockerError as e:
            raise FaultFailed(f"could not start {self.container} again: {e.reason(200)}") from None
        except docker.ExecTimeout:
            raise FaultFailed(f"{self.route_helper} did not finish within 60 s") from None

    def verify(self) -> str | None:
        return wait_healthy(self.container)


def same_link(a: Link, b: Link) -> bool:
    return json.dumps(linkem.to_json(a), sort_keys=True) == json.dumps(linkem.to_json(b), sort_keys=True)


class LinkFault(Action):
    """A fault on the link: the run's link as it is during the fault (`during`), then the run's link again. linkem:
    one PUT each (the calibrated path delay kept in force, as shaper.apply sets it); netem: the qdiscs re-applied."""

    def __init__(self, fault: Fault, link: Link, backend: str = "linkem") -> None:
        super().__init__(fault)
        self.link = link
        self.backend = backend
        self.verifies_link = backend == "linkem"
        self.before = ""  # netem: the qdiscs in force before the fault

    @classmethod
    def for_run(cls, fault: Fault, target: Target) -> Action:
        return cls(fault, target.link, target.backend)

    def _put(self, link: Link) -> None:
        if self.backend == "linkem":
            linkem.apply(link, calibrate.path_delays("linkem"))
        else:
            shaper.apply(link, "netem")

    def apply(self) -> None:
        if self.backend != "linkem":
            self.before = str(shaper.in_force()[1])
        self._put(self.during(self.fault, self.link))

    def undo(self) -> None:
        self._put(self.link)

    def verify(self) -> str | None:
        if self.backend == "linkem":
            now = linkem.current()
            if not same_link(now, self.link):
                return (f"linkem's link is not the run's after {self.fault.text}: "
                        f"{json.dumps(linkem.to_json(now))[:200]}")
            return None
        now = str(shaper.in_force()[1])
        if self.before and now != self.before:
            return f"netem's qdiscs differ from the run's after {self.fault.text}"
        return None


class Rate(LinkFault):
    """rate=R: the link's rate (both directions) is R, or a share of the link's own rate."""

    @classmethod
    def during(cls, fault: Fault, link: Link) -> Link:
        dirs = {}
        for name in ("downlink", "uplink"):
            d = getattr(link, name)
            rate = fault.rate_bps
            if rate is None:
                assert fault.rate_fraction is not None and d.effective_rate_bps
                rate = max(1, round(d.effective_rate_bps * fault.rate_fraction))
            dirs[name] = d.model_copy(update={"rate_bps": rate, "rate_schedule": None, "trace_ms": None})
        return link.model_copy(update=dirs)

    @classmethod
    def refuses(cls, fault: Fault, link: Link) -> str:
        if fault.rate_fraction is not None and not (link.downlink.effective_rate_bps
                                                    and link.uplink.effective_rate_bps):
            return ("is a share of the link's rate, but the link has no rate in both directions (give an absolute "
                    "rate, e.g. rate=1mbit)")
        return ""


class Delay(LinkFault):
    """delay=D: the one-way delay (both directions) is D, or the link's plus D."""

    @classmethod
    def during(cls, fault: Fault, link: Link) -> Link:
        dirs = {}
        for name in ("downlink", "uplink"):
            d = getattr(link, name)
            delay = fault.delay_s if fault.delay_s is not None else d.delay_s + (fault.delay_add_s or 0.0)
            dirs[name] = d.model_copy(update={"delay_s": min(delay, 60.0)})
        return link.model_copy(update=dirs)


class Blackout(LinkFault):
    """blackout with linkem: the run's link with an outage window of DURATION from when the emulator applies it (it
    ends by itself); where netem shapes (or when asked), an nft rule in the router (NftBlackout)."""

    self_ending = True

    @classmethod
    def for_run(cls, fault: Fault, target: Target) -> Action:
        if target.backend == "netem" or target.blackout_with == "nft":
            return NftBlackout(fault)
        return cls(fault, target.link, target.backend)

    @classmethod
    def during(cls, fault: Fault, link: Link) -> Link:
        update = {"outage": Outage(period_s=_LONGEST_PERIOD_S, down_s=fault.duration_s, offset_s=0.0)}
        return link.model_copy(update={"downlink": link.downlink.model_copy(update=update),
                                       "uplink": link.uplink.model_copy(update=update)})

    @classmethod
    def refuses(cls, fault: Fault, link: Link) -> str:
        return "cannot be combined with the link's own `outage`" if link.downlink.outage or link.uplink.outage else ""


class NftBlackout(Action):
    """blackout where netem shapes (or wherever asked): an nft drop rule matching a set whose elements expire after
    DURATION (the kernel times the end, to its tick: 4 ms at HZ=250; no process has to wake up on time)."""

    self_ending = True

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault)
        self.times: list[float] = []  # unix time before the add was written, and when nft confirmed it
        self.shell: rules.NftShell | None = None  # the run's nft shell in the router, if it has one

    def apply(self) -> None:
        script = rules.blackout_script(_BLACKOUT_TABLE, self.fault.duration_s)
        if self.shell is not None:
            try:
                self.times = list(self.shell.run(script))
            except EnvironmentProblem as e:
                raise FaultFailed(f"the blackout rule could not be added in the router: {e}") from None
            return
        add = " ; ".join(script)
        try:
            out = router.run("bash", "-c", 'a=$EPOCHREALTIME; nft "$1" || exit 1; echo "$a $EPOCHREALTIME"', "qla", add)
        except EnvironmentProblem as e:
            raise FaultFailed(f"the blackout rule could not be added in the router: {e}") from None
        self.times = [float(x) for x in out.split()]

    def undo(self) -> None:
        rules.delete(_BLACKOUT_TABLE)

    def verify(self) -> str | None:
        return f"the router still has table {_BLACKOUT_TABLE}" if rules.table_exists(_BLACKOUT_TABLE) else None


#: Every fault kind's class, by its name (lab/adverse/spec.py KINDS parses them).
KINDS: dict[FaultKind, type[Action]] = {"pause": Pause, "kill": Kill, "blackout": Blackout, "rate": Rate,
                                        "delay": Delay}


def faulty_link(fault: Fault, link: Link) -> Link:
    """The run's link as it is during a fault."""
    return KINDS[fault.kind].during(fault, link)


def action_for(fault: Fault, target: Target) -> Action:
    """The action for one fault of a run: its kind's class."""
    return KINDS[fault.kind].for_run(fault, target)
