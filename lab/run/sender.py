"""The sender's congestion control put in force per run, and read back (lab/endpoints/sender_cc.py says what a
server can do with a value).

- TCP: `net.ipv4.tcp_congestion_control` in the server's own network namespace (per namespace since Linux 4.15;
  a connection takes the value in force when it is made). Servers hold no privileges: a short-lived helper
  (the router image) joins the server's network namespace with NET_ADMIN and a writable /proc/sys just long
  enough to run `sysctl -w`, and only when the value must change (~0.6 s here, outside the timed transfer: it
  shows in the run's `overhead_s`). The value is read in the server's container before a run that sets it and
  after every run; a value that changed under the run makes it the lab's failure, never a result. "native" is
  what a fresh network namespace gets (the host's default), measured once per process.
- QUIC: a server with per-algorithm instances (registry `sender_cc.quic`) runs one extra process per algorithm,
  on its own port, started on first use and kept until `close()` (the end of the sweep). The algorithm is read
  back from the command line of the process that listens on the port the client used.
At the end (`close()`), instances stop and every namespace changed is set back to native.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lab import agent, docker
from lab.endpoints import instances
from lab.endpoints.registry import Implementation
from lab.endpoints.sender_cc import (  # runs.csv cc_sender_source values
    NATIVE,
    SOURCE_CLAIM,
    SOURCE_CMDLINE,
    SOURCE_DEFAULT,
    SOURCE_NETNS,
    SenderPlan,
)
from lab.errors import EnvironmentProblem
from lab.link import router

SYSCTL = "net.ipv4.tcp_congestion_control"
_PROC = "/proc/sys/net/ipv4/tcp_congestion_control"
_AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
HELPER_TIMEOUT_S = 30.0
_CC_FLAG = re.compile(r"(?:^|\s)--cc[= ](\S+)")



@dataclass(frozen=True)
class Prepared:
    """A plan put in force: where the client fetches from, what the server's qlog instance needs, what to expect."""

    plan: SenderPlan
    port: int | None = None  # the per-algorithm instance's port (None: the server's own)
    server_env: dict[str, str] = field(default_factory=dict)  # for a qlog instance started for this run
    expected: str = ""  # TCP: the algorithm that must be in force
    unsupported: str = ""  # the kernel cannot do it: the run is recorded as unsupported


def _read(container: str, path: str) -> str:
    """A per-run read in an endpoint container (lab.agent: the agent where the image has one)."""
    try:
        return agent.run(container, ["cat", path], timeout_s=docker.EXEC_TIMEOUT_S).strip()
    except docker.DockerError as e:
        raise EnvironmentProblem(f"cannot read {path} in {container}: {e.reason(200)}") from None


class SenderControl:
    """Per sweep (or `quiclab run`): puts each run's sender congestion control in force; `close()` at the end."""

    def __init__(self) -> None:
        self._native: str | None = None
        self._image: str | None = None
        self._available: dict[str, tuple[str, ...]] = {}
        self._changed: set[str] = set()  # containers whose namespace this object set
        self._instances: dict[tuple[str, int], str] = {}  # (container, port) -> algorithm, started here
        # what each namespace was read (or set) to last: a run's read-back is the next run's "before" (one read per
        # run); forgotten whenever a read-back disagrees, so the next run reads again
        self._known: dict[str, str] = {}

    # --- TCP --------------------------------------------------------------------------------------------------
    def native_tcp(self) -> str:
        """The kernel's default for a new network namespace (the host's), measured once."""
        if self._native is None:
            try:
                self._native = docker.run_once(self._helper_image(), ["cat", _PROC], network="none",
                                               timeout_s=HELPER_TIMEOUT_S).strip()
            except docker.DockerError as e:
                raise EnvironmentProblem(f"cannot read the kernel's default TCP congestion control in a new network "
                                         f"namespace: {e.reason(200)}") from None
        return self._native

    def _helper_image(self) -> str:
        if self._image is None:
            self._image = router.image()
        return self._image

    @staticmethod
    def read_tcp(container: str) -> str:
        return _read(container, _PROC)

    def _available_in(self, container: str) -> tuple[str, ...]:
        if container not in self._available:
            self._available[container] = tuple(_read(container, _AVAILABLE).split())
        return self._available[container]

    def set_tcp(self, container: str, algorithm: str) -> None:
        """Set the algorithm in the container's network namespace with the short-lived helper (no container left)."""
        try:
            docker.run_once(self._helper_image(), ["sysctl", "-q", "-w", f"{SYSCTL}={algorithm}"],
                            network=f"container:{container}", cap_add=("NET_ADMIN",),
                            security_opt=("systempaths=unconfined",), timeout_s=HELPER_TIMEOUT_S)
        except docker.DockerError as e:
            raise EnvironmentProblem(f"could not set {SYSCTL}={algorithm} in {container}'s network namespace: "
                                     f"{e.reason(200)}") from None
        self._changed.add(container)
        self._known[container] = algorithm

    # --- per run ----------------------------------------------------------------------------------------------
    def prepare(self, server: Implementation, plan: SenderPlan, instance: bool = True) -> Prepared:
        """Put the plan in force before the run (not timed). An algorithm the kernel lacks is `unsupported`.
        instance=False: the run fetches from a per-run instance (the qlog one) started with `server_env` instead."""
        if plan.kind == "netns":
            target = self.native_tcp() if plan.algorithm == NATIVE else plan.algorithm
            current = self._known.get(server.container) or self.read_tcp(server.container)
            if current != target:
                available = self._available_in(server.container)
                if target not in available:
                    # tcp_available lists the loaded algorithms; one may still load on demand: try it
                    try:
                        self.set_tcp(server.container, target)
                    except EnvironmentProblem:
                        return Prepared(plan, unsupported=f"the kernel has no TCP {target} "
                                                          f"(available: {', '.join(available)})")
                else:
                    self.set_tcp(server.container, target)
            return Prepared(plan, expected=target)
        if plan.kind == "instance" and not instance:
            return Prepared(plan, server_env={"CC": plan.algorithm})
        if plan.kind == "instance":
            assert plan.port is not None and server.sender_cc.quic is not None
            key = (server.container, plan.port)
            if self._instances.get(key) != plan.algorithm:  # started here before: the read-back checks it is alive
                instances.stop(*key)  # a leftover (an earlier sweep killed hard) is replaced, never trusted
                instances.start(server.container, server.sender_cc.quic.command, plan.port, {"CC": plan.algorithm},
                                f"{server.name}'s cc={plan.algorithm} instance")
                self._instances[key] = plan.algorithm
            return Prepared(plan, port=plan.port, server_env={"CC": plan.algorithm})
        return Prepared(plan)  # as it is: read back after the run

    def read_back(self, server: Implementation, prepared: Prepared, port: int | None) -> tuple[str, str]:
        """(algorithm in force, how it is known) after the run, from the server itself where it can be read.
        `port` is where the client fetched from (None: the server's own port)."""
        plan = prepared.plan
        if plan.transport == "tcp":
            if server.sender_cc.tcp != "netns":
                return "", ""  # a TCP stack the lab cannot read
            now = self.read_tcp(server.container)
            self._known[server.container] = now
            if prepared.expected and now != prepared.expected:
                self._known.pop(server.container, None)
                raise EnvironmentProblem(f"{server.name}'s TCP congestion control changed under the run: "
                                         f"{prepared.expected} was set, {now} is in force now")
            return now, SOURCE_NETNS
        qcc = server.quic_cc
        if qcc is None:
            return "", ""
        if not qcc.settable:
            return qcc.describe(), SOURCE_CLAIM
        found = instances.listener(server.container, port or server.port or 443)
        if found is None or (plan.kind == "instance" and f"--cc={plan.algorithm}" not in found.cmdline):
            self._instances.pop((server.container, port or 0), None)  # started again by the next run
            raise EnvironmentProblem(f"after the run, {server.name}'s process on port {port or server.port} is gone or "
                                     f"runs another congestion control than {plan.algorithm}")
        m = _CC_FLAG.search(found.cmdline)
        if m:
            return m.group(1), SOURCE_CMDLINE
        return qcc.describe(), SOURCE_DEFAULT

    def close(self) -> None:
        """Stop the instances started here and set every changed namespace back to native."""
        for container, port in list(self._instances):
            instances.stop(container, port)
        self._instances.clear()
        for container in sorted(self._changed):
            try:
                if self.read_tcp(container) != self.native_tcp():
                    self.set_tcp(container, self.native_tcp())
            except EnvironmentProblem:  # DockerError, ExecTimeout, ...
                pass  # the lab is going away or broken: nothing more to restore
        self._changed.clear()

    def __enter__(self) -> SenderControl:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
