"""Path changes during a transfer, and what the capture says about them.

- rebind, readdr: the router rewrites the measured flow statelessly from the given time (lab/adverse/rules.py):
  the server sees the client's packets come from a new port (rebind) or address (readdr) and answers there; the
  router maps the answers back, so the client itself notices nothing (a NAT rebinding). QUIC validates the new
  path (PATH_CHALLENGE/PATH_RESPONSE) and goes on; a TCP connection breaks (the server knows no connection for
  the new 4-tuple and resets it).
- migrate, migrate-nat: gtlsclient moves to a new local port itself (--change-local-addr, its time counted from
  the handshake; with --nat-rebinding it does not validate the path itself, the server does).

With `--capture pcap,keylog` the decrypted capture is read with tshark in the router: PATH_CHALLENGE (frame type
0x1a) and PATH_RESPONSE (0x1b) per side, and the time the client's packets first came from a new port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab import config
from lab.adverse import rules
from lab.adverse.spec import PathChange
from lab.errors import EnvironmentProblem
from lab.evidence import tshark
from lab.evidence.pcap import PcapError, read_pcap

TABLE = "qla_path"
#: Addresses on this lab's client network start so (each lab of a host has its own: lab/instance.py).
CLIENT_NET = config.INSTANCE.subnet("client").rsplit(".", 1)[0] + "."
PATH_CHALLENGE, PATH_RESPONSE = 0x1A, 0x1B


def client_env(change: PathChange) -> dict[str, str]:
    """What the client wrapper (images/client/ngtcp2-fetch.sh) needs for a client-side path change."""
    if not change.client_side:
        return {}
    env = {"CHANGE_LOCAL_ADDR": f"{round(change.at_s * 1000)}ms"}
    if change.kind == "migrate-nat":
        env["NAT_REBINDING"] = "1"
    return env


def apply_router(change: PathChange, proto: str, client: str, server_ip: str, server_port: int) -> None:
    rules.add(rules.rewrite_script(TABLE, change.kind, proto, client, server_ip, server_port))


def undo_router() -> None:
    rules.delete(TABLE)


def port_change_s(pcap: Path, server_ip: str, server_port: int, zero_unix: float) -> float | None:
    """When the client's packets toward the server first came from a second source port or address (client-side
    capture), seconds from the transfer's start; None if they never changed."""
    try:
        packets = read_pcap(pcap.read_bytes())
    except (OSError, PcapError):
        return None
    first: tuple[str, int] | None = None
    for p in packets:
        if p.dst != server_ip or p.dport != server_port:
            continue
        here = (p.src, p.sport)
        if first is None:
            first = here
        elif here != first:
            return round(p.time - zero_unix, 4)
    return None


def flow_began_s(pcap: Path, client: str, server_ip: str, server_port: int, zero_unix: float) -> float | None:
    """The measured flow's first packet from the client's address `client` (client-side capture), seconds from the
    transfer's start."""
    try:
        packets = read_pcap(pcap.read_bytes())
    except (OSError, PcapError):
        return None
    for p in packets:
        if p.dst == server_ip and p.dport == server_port and p.src == client:
            return round(p.time - zero_unix, 4)
    return None


def new_path_seen_s(pcap: Path, change: PathChange, server_ip: str, server_port: int,
                    zero_unix: float) -> float | None:
    """When the server's side first saw the client's packets on the new path (router kinds), or None."""
    try:
        packets = read_pcap(pcap.read_bytes())
    except (OSError, PcapError):
        return None
    for p in packets:
        if p.dst != server_ip or p.dport != server_port:
            continue
        moved = p.src == rules.NEW_CLIENT_IP if change.kind == "readdr" else p.sport < 32768
        if moved:
            return round(p.time - zero_unix, 4)
    return None


def decrypted_fields(pcap: Path, keys: Path, display_filter: str, *fields: str) -> str | None:
    """tshark (in the router) over a capture decrypted with its TLS key log: the `fields` of every packet matching
    `display_filter`, tab-separated, one line each (several values of a field joined by commas); None when tshark
    could not read it (no router, no tshark)."""
    try:
        return tshark.run(pcap, keys, ["-Y", display_filter, "-T", "fields", *(a for f in fields for a in ("-e", f)),
                                       "-E", "aggregator=,"])
    except EnvironmentProblem:  # DockerError, ExecTimeout, ...
        return None


def path_frames(pcap: Path, keys: Path) -> dict[str, int] | None:
    """PATH_CHALLENGE / PATH_RESPONSE frames in a decrypted capture, by sender: {"client_challenge": n, ...}; None
    when tshark could not read it."""
    out = decrypted_fields(pcap, keys, "quic.frame_type == 0x1a || quic.frame_type == 0x1b", "ip.src",
                           "quic.frame_type")
    if out is None:
        return None
    counts = {"client_challenge": 0, "client_response": 0, "server_challenge": 0, "server_response": 0}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        who = "client" if parts[0].startswith(CLIENT_NET) else "server"
        for t in parts[1].split(","):
            try:
                v = int(t, 0)
            except ValueError:
                continue
            if v == PATH_CHALLENGE:
                counts[f"{who}_challenge"] += 1
            elif v == PATH_RESPONSE:
                counts[f"{who}_response"] += 1
    return counts


def outcome(change: PathChange, ok: bool, failure: str, applied_s: float | None, files: list[Path],
            client: str, server_ip: str, server_port: int, zero_unix: float, quic: bool) -> dict[str, Any]:
    """The `path_change` column: what was done, when, whether the transfer survived, and the capture's view."""
    doc: dict[str, Any] = {"kind": change.kind, "at_s": change.at_s, "applied_s": applied_s,
                           "outcome": "survived" if ok else "broken"}
    if not ok:
        doc["reason"] = failure
    by_name = {f.name: f for f in files}
    client_pcap, server_pcap, keys = (by_name.get("client-side.pcap"), by_name.get("server-side.pcap"),
                                      by_name.get("keys.log"))
    if client_pcap is not None:
        began = doc["flow_began_s"] = flow_began_s(client_pcap, client, server_ip, server_port, zero_unix)
        if not change.client_side and applied_s is not None and began is not None and began >= applied_s:
            doc["outcome"] = "not exercised"  # the connection began on the new path: nothing changed under it
            doc["note"] = "the transfer's first packet came after the change was applied (a slow start-up)"
    if change.client_side and client_pcap is not None:
        doc["client_port_changed_s"] = port_change_s(client_pcap, server_ip, server_port, zero_unix)
    if not change.client_side and server_pcap is not None:
        doc["server_saw_new_path_s"] = new_path_seen_s(server_pcap, change, server_ip, server_port, zero_unix)
    if quic and keys is not None:
        if server_pcap is not None:
            doc["path_frames_server_side"] = path_frames(server_pcap, keys)
        if client_pcap is not None:
            doc["path_frames_client_side"] = path_frames(client_pcap, keys)
    elif quic:
        doc["path_frames"] = "not captured (run with --capture pcap,keylog)"
    return doc
