"""nftables rules the adverse conditions add in the router, each in a table of its own named `qla_*` (never the
router's own `quiclab` table): a link blackout where netem shapes (a drop rule), and stateless address/port
rewrites for path changes. Every table is deleted when its condition ends, and `leftovers()` lists any that
remain (a run that ends with one is not sound).

Packets through linkem cross the router's prerouting hook twice (from the lab interface, then back from the TUN),
so every rewrite rule matches the interface the packet arrived on: it applies exactly once per packet.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.link import router

PREFIX = "qla_"
#: This lab's two networks (each lab of a host has its own: lab/instance.py), as an nft set.
LAB_NETS = f"{{ {config.INSTANCE.subnet('client')}, {config.INSTANCE.subnet('server')} }}"
#: The client's address after a `readdr` path change (an unused address on this lab's client network).
NEW_CLIENT_IP = config.INSTANCE.address("client", 200)
#: `rebind` XORs the client's source port with this (an involution: the reverse rule restores it exactly).
PORT_FLIP = 0x8000


def _nft(*script: str) -> None:
    code, err = router.try_run("nft", " ; ".join(script))
    if code != 0:
        raise EnvironmentProblem(f"nft in the router failed ({err or f'exit {code}'}) for: {' ; '.join(script)}")


def table_exists(name: str) -> bool:
    code, _ = router.try_run("nft", "list", "table", "inet", name)
    return code == 0


def delete(name: str) -> None:
    """Delete a table if it is there (idempotent)."""
    if table_exists(name):
        _nft(f"delete table inet {name}")


def leftovers() -> list[str]:
    """The `qla_*` tables in the router now."""
    out = router.run("nft", "list", "tables")
    return [line.split()[-1] for line in out.splitlines() if line.split() and line.split()[-1].startswith(PREFIX)]


def clear_all() -> None:
    with contextlib.suppress(EnvironmentProblem):
        for name in leftovers():
            delete(name)


def blackout_script(table: str, duration_s: float) -> list[str]:
    """nft commands that drop every forwarded lab packet, both directions, for `duration_s` from their commit (before
    the router's own accept): the rule matches a set of IP protocols whose elements expire then (kernel-timed)."""
    ms = max(1, round(duration_s * 1000))
    return [f"add table inet {table}",
            f"add set inet {table} on {{ type inet_proto ; flags timeout ; }}",
            f"add chain inet {table} qla_forward {{ type filter hook forward priority -10 ; policy accept ; }}",
            f"add rule inet {table} qla_forward meta l4proto @on ip saddr {LAB_NETS} ip daddr {LAB_NETS} drop",
            f"add element inet {table} on {{ tcp timeout {ms}ms, udp timeout {ms}ms, icmp timeout {ms}ms }}"]


def rewrite_script(table: str, kind: str, proto: str, client: str, server_ip: str, server_port: int) -> list[str]:
    """Stateless rewrites of the measured flow (the client's address `client` <-> server_ip:server_port over proto;
    the client may have its own container and address on the client network) at the router's lab
    interfaces, as a NAT that rebinds: `rebind` gives the client's source port a new value (bit 15 flipped: the
    client's ephemeral ports, 32768-60999, map to 0-28231, which it never uses, so the reverse rule knows exactly
    which packets to map back), `readdr` a new address. Replies to the new port or address are mapped back; replies
    to the old ones are dropped (the old binding is gone)."""
    ifs = router.interfaces()
    head = [f"add table inet {table}",
            f"add chain inet {table} qla_prerouting {{ type filter hook prerouting priority -300 ; policy accept ; }}"]
    up = f"iifname \"{ifs.client_side}\" ip saddr {client} ip daddr {server_ip} {proto} dport {server_port}"
    down = f"iifname \"{ifs.server_side}\" ip saddr {server_ip} {proto} sport {server_port}"
    if kind == "rebind":
        return [*head,
                f"add rule inet {table} qla_prerouting {up} {proto} sport >= 32768 "
                f"{proto} sport set {proto} sport xor {PORT_FLIP:#x} accept",
                f"add rule inet {table} qla_prerouting {down} ip daddr {client} {proto} dport < 32768 "
                f"{proto} dport set {proto} dport xor {PORT_FLIP:#x} accept",
                f"add rule inet {table} qla_prerouting {down} ip daddr {client} drop"]
    if kind == "readdr":
        return [*head, f"add rule inet {table} qla_prerouting {up} ip saddr set {NEW_CLIENT_IP} accept",
                f"add rule inet {table} qla_prerouting {down} ip daddr {NEW_CLIENT_IP} ip daddr set {client} accept",
                f"add rule inet {table} qla_prerouting {down} ip daddr {client} drop"]
    raise ValueError(kind)


def add(script: list[str]) -> None:
    _nft(*script)


class NftShell:
    """One `nft -i` in the router for a run's timed rule changes: a change costs a write to its stdin (well under a
    millisecond) instead of a `docker exec` (80 ms here, seconds on a loaded host). After each change a command
    that fails harmlessly (listing a table that does not exist, named uniquely) is sent; its error line echoing
    that name says nft has done everything before it. Started before the transfer, closed after the run."""

    def __init__(self) -> None:
        self._n = 0
        # Its owner closes it when the run ends; the deadline is only a backstop (docker.RUN_SCOPED_DEADLINE_S).
        self.proc = docker.Stream(docker.exec_args(config.ROUTER_CONTAINER, ["sh", "-c", "exec nft -i 2>&1"],
                                                   interactive=True),
                                  deadline_s=docker.RUN_SCOPED_DEADLINE_S, stdin=True, stdout=subprocess.PIPE)
        try:
            self._sync(time.monotonic() + config.deadline(15))
        except BaseException:  # an nft that never answered is not left running
            self.proc.close(grace_s=0)
            raise

    def _line(self, deadline: float) -> str | None:
        return self.proc.line(deadline)

    def _sync(self, deadline: float) -> list[str]:
        """Everything nft printed for the commands before the marker (their errors), once it has done them."""
        self._n += 1
        marker = f"qla_sync_{self._n}"
        try:
            self.proc.send(f"list table inet {marker}\n".encode())
        except OSError:
            raise EnvironmentProblem("the router's nft shell is gone") from None
        out: list[str] = []
        while (line := self._line(deadline)) is not None:
            if marker in line:
                if out and out[-1].startswith("Error"):
                    out.pop()  # the marker's own error
                self._line(time.monotonic() + config.deadline(1))  # its caret line
                return out
            out.append(line)
        raise EnvironmentProblem(f"nft in the router did not answer ({' '.join(out)[:200] or 'no output'})")

    def run(self, commands: list[str]) -> tuple[float, float]:
        """Apply commands (one nft transaction); (unix time written, unix time confirmed): it took effect between."""
        written = time.time()
        try:
            self.proc.send((" ; ".join(commands) + "\n").encode())
        except OSError:
            raise EnvironmentProblem("the router's nft shell is gone") from None
        errors = [line for line in self._sync(time.monotonic() + config.deadline(15)) if line.startswith("Error")]
        done = time.time()
        if errors:
            raise EnvironmentProblem(f"nft in the router: {errors[0]} for: {' ; '.join(commands)[:200]}")
        return written, done

    def close(self) -> None:
        self.proc.close(grace_s=5)
