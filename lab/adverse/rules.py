"""nftables rules the adverse conditions add in the router, each in a table of its own named `qla_*` (never the
router's own `quiclab` table): a link blackout where netem shapes (a drop rule), and stateless address/port
rewrites for path changes. Every table is deleted when its condition ends, and `leftovers()` lists any that
remain (a run that ends with one is not sound).

Packets through linkem cross the router's prerouting hook twice (from the lab interface, then back from the TUN),
so every rewrite rule matches the interface the packet arrived on: it applies exactly once per packet.
"""

from __future__ import annotations

import contextlib

from lab import config
from lab.errors import EnvironmentProblem
from lab.link import router

PREFIX = "qla_"
LAB_NETS = "{ 10.71.1.0/24, 10.71.2.0/24 }"
#: The client's address after a `readdr` path change (an unused address on the client's network).
NEW_CLIENT_IP = "10.71.1.200"
#: `rebind` XORs the client's source port with this (an involution: the reverse rule restores it exactly).
PORT_XOR = 0x4000


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


def rewrite_script(table: str, kind: str, proto: str, server_ip: str, server_port: int) -> list[str]:
    """Stateless rewrites of the measured flow (client <-> server_ip:server_port over proto) at the router's lab
    interfaces: `rebind` changes the client's source port, `readdr` its address; replies are mapped back."""
    ifs = router.interfaces()
    client = config.CLIENT_IP
    head = [f"add table inet {table}",
            f"add chain inet {table} qla_prerouting {{ type filter hook prerouting priority -300 ; policy accept ; }}"]
    up = f"iifname \"{ifs.client_side}\" ip saddr {client} ip daddr {server_ip} {proto} dport {server_port}"
    if kind == "rebind":
        down = f"iifname \"{ifs.server_side}\" ip saddr {server_ip} ip daddr {client} {proto} sport {server_port}"
        return [*head, f"add rule inet {table} qla_prerouting {up} {proto} sport set {proto} sport xor {PORT_XOR:#x}",
                f"add rule inet {table} qla_prerouting {down} {proto} dport set {proto} dport xor {PORT_XOR:#x}"]
    if kind == "readdr":
        down = (f"iifname \"{ifs.server_side}\" ip saddr {server_ip} ip daddr {NEW_CLIENT_IP} "
                f"{proto} sport {server_port}")
        return [*head, f"add rule inet {table} qla_prerouting {up} ip saddr set {NEW_CLIENT_IP}",
                f"add rule inet {table} qla_prerouting {down} ip daddr set {client}"]
    raise ValueError(kind)


def add(script: list[str]) -> None:
    _nft(*script)
