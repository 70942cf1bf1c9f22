"""The sender's congestion control as a run dimension: which values exist and what a server can do with one.

For a download the server is the sender, so `cc` (scenario key, `quiclab run --sender-cc`) is the *server's*
algorithm. Sans-IO: lab/run/sender.py puts a resolved plan in force and reads it back.

- TCP: the kernel's, per network namespace: a server whose registry entry says `sender_cc.tcp = "netns"` (all of
  them: the kernel's TCP in the server's own container) runs any algorithm the kernel has.
- QUIC: the stack's. A server with per-algorithm instances (`sender_cc.quic`) runs each option on its own port; a
  server whose QUIC congestion control is fixed (nginx, Caddy) runs only its own: any other value is
  "unsupported" (recorded, never run, never silently replaced by the server's own).
- "native" (alias "default") is the server's own: for TCP the kernel's default (what a fresh network namespace
  gets), for QUIC the main server process (the registry's `quic_cc`). No `cc` at all: nothing is set (a sweep
  that does not ask leaves the lab as it is), and what is in force is read back and recorded all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lab.endpoints.registry import Implementation
from lab.errors import UsageError
from lab.protocols import Protocol

ALGORITHMS = ("reno", "cubic", "bbr")
NATIVE = "native"
VALUES = (*ALGORITHMS, NATIVE)
_ALIASES = {"default": NATIVE, "newreno": "reno"}


def parse_cc(text: str, what: str = "cc") -> str:
    """A sender congestion control value: reno, cubic, bbr or native (aliases: default, newreno)."""
    value = str(text).strip().lower()
    value = _ALIASES.get(value, value)
    if value not in VALUES:
        raise UsageError(f"invalid {what} {text!r}: allowed are {', '.join(VALUES)} (native = the server's own; "
                         "aliases: default = native, newreno = reno)")
    return value


Kind = Literal["netns", "instance", "own", "unsupported"]


@dataclass(frozen=True)
class SenderPlan:
    """How one run gets its sender's congestion control.

    kind "netns": set `algorithm` in the server's network namespace (NATIVE: the kernel's default);
    "instance": fetch from the server's per-algorithm instance on `port`;
    "own": the server as it is (nothing is set; what is in force is read back);
    "unsupported": cannot be had (`reason`): the run is recorded as unsupported and not run."""

    kind: Kind
    transport: Literal["tcp", "quic"]
    algorithm: str = NATIVE
    port: int | None = None
    reason: str = ""


def resolve(server: Implementation, protocol: Protocol, cc: str | None) -> SenderPlan:
    """The plan for a download from `server` over `protocol` with the sender at `cc`. None: nothing is set, the
    server runs as it is (what is in force is read back and recorded)."""
    if protocol is Protocol.H3:
        want = parse_cc(cc) if cc is not None else NATIVE
        if want == NATIVE:
            return SenderPlan("own", "quic")
        inst = server.sender_cc.quic
        if inst is not None and want in inst.ports:
            return SenderPlan("instance", "quic", want, inst.ports[want])
        qcc = server.quic_cc
        if qcc is not None and qcc.settable:
            have = ", ".join(inst.ports) if inst is not None else "none"
            return SenderPlan("unsupported", "quic", want, reason=f"{server.name} has no QUIC instance with "
                                                                  f"cc={want} (sender_cc.quic: {have})")
        own = qcc.describe() if qcc is not None else "none"
        return SenderPlan("unsupported", "quic", want, reason=f"{server.name}'s QUIC congestion control is fixed "
                                                              f"({own}): cc={want} cannot be set (cc=native runs "
                                                              "its own)")
    if cc is None:
        return SenderPlan("own", "tcp")
    want = parse_cc(cc)
    if server.sender_cc.tcp == "netns":
        return SenderPlan("netns", "tcp", want)
    if want == NATIVE:
        return SenderPlan("own", "tcp")
    return SenderPlan("unsupported", "tcp", want, reason=f"{server.name}'s TCP congestion control is fixed: "
                                                         f"cc={want} cannot be set (cc=native runs its own)")


# runs.csv cc_sender_source values (lab/run/sender.py reads the algorithm back and says how it knows)
SOURCE_NETNS = "netns sysctl (read back after the run)"
SOURCE_CMDLINE = "process command line (--cc of the listener the client used)"
SOURCE_DEFAULT = "server default (its listener has no --cc; registry quic_cc.default)"
SOURCE_CLAIM = "registry claim (fixed in the stack; not observable)"
#: the sources that observe the algorithm in force (not a default or a claim taken on trust)
OBSERVED_SOURCES = (SOURCE_NETNS, SOURCE_CMDLINE)


def claims_reno(cc_sender: str) -> bool:
    """Whether a recorded sender congestion control says Reno/NewReno (the registry's claim or a set value)."""
    first = cc_sender.strip().lower().split(" ", 1)[0] if cc_sender.strip() else ""
    return first in ("reno", "newreno")
