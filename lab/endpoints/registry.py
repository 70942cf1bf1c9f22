"""The implementation registry (implementations.toml): which clients and servers exist, what each can do, where it
runs, how to ask its version and what congestion control its QUIC stack uses. Loaded once and validated; a
malformed entry is a UsageError of one line naming the entry and the field."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lab.errors import UsageError, validation_line
from lab.instance import Instance
from lab.protocols import Protocol
from lab.workloads.spec import KINDS

REGISTRY_FILE = Path(__file__).with_name("implementations.toml")
Role = Literal["client", "server"]

#: The contract's exit code for "this implementation cannot do the requested combination" (as quic-interop-runner).
UNSUPPORTED_EXIT = 127


class QuicCC(BaseModel):
    """A fixed congestion controller, or a choice of them with a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fixed: str | None = Field(default=None, min_length=1)
    options: tuple[str, ...] = ()
    default: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> QuicCC:
        if (self.fixed is None) == (not self.options):
            raise ValueError("give either fixed = \"...\" or options = [...] with a default")
        if self.options and self.default not in self.options:
            raise ValueError(f"default must be one of the options {list(self.options)}, got {self.default!r}")
        if self.fixed is not None and self.default is not None:
            raise ValueError("a fixed congestion control takes no default")
        return self

    @property
    def settable(self) -> bool:
        return bool(self.options)

    def describe(self, chosen: str | None = None) -> str:
        """What a run records: the fixed string, or the chosen (else default) option."""
        if self.fixed is not None:
            return self.fixed
        return chosen or self.default or ""


class QlogInstance(BaseModel):
    """How a server writes qlog for one run: `command`, started in its container with PORT and QLOGDIR set, serves
    the same objects on `port` and writes one qlog per connection into QLOGDIR (stopped after the run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] = Field(min_length=1)
    port: int = Field(ge=1, le=65535)


class CCInstances(BaseModel):
    """A server whose QUIC congestion control is chosen at start-up: one extra process per algorithm, started on
    demand by a sweep (`command` in the server's container with PORT and CC set), listening on `ports[algorithm]`,
    kept running for the sweep and stopped at its end (lab/run/sender.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] = Field(min_length=1)
    ports: dict[str, int] = Field(min_length=1)


class SenderCC(BaseModel):
    """How the lab sets a server's congestion control as the sender of a download (docs/implementations.md).

    tcp: "netns" — the kernel's TCP in the server's own network namespace (`net.ipv4.tcp_congestion_control`, set by
    a short-lived privileged helper; the server keeps no privileges); "fixed" — it cannot be set.
    quic: per-algorithm instances (CCInstances); without them only the server's own (quic_cc) runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tcp: Literal["netns", "fixed"] = "netns"
    quic: CCInstances | None = None


class Implementation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")  # e.g. nginx-sid (a TOML table name: quote it)
    role: Role
    aliases: tuple[str, ...] = ()  # older names it is accepted under (records use `name`)
    description: str = ""
    protocols: frozenset[Protocol] = Field(min_length=1)
    container: str = Field(min_length=1)
    version: str = Field(min_length=1)
    quic_cc: QuicCC | None = None
    # clients
    adapter: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    processes: tuple[str, ...] = ()
    migrates: bool = False  # clients: it can move its own connection to a new local address (scenario `path`)
    writes_qlog: bool = False  # clients: it writes qlog into the directory QLOGDIR names (--capture qlog)
    quic_window: bool = False  # clients: it can fix its QUIC flow-control window (scenario `quic_window`)
    # servers
    service: str | None = None
    address: str | None = Field(default=None, pattern=r"^\d{1,3}(\.\d{1,3}){3}$")
    host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]+$")
    port: int | None = Field(default=None, ge=1, le=65535)
    qlog: QlogInstance | None = None
    # servers: why a client may not move its connection to this server itself (e.g. it sends the transport
    # parameter disable_active_migration); "" when it may. A client-side path change (`path = "migrate@..."`) with
    # such a server is unsupported, with this reason
    refuses_migration: str = ""
    # clients: the workload kinds they can run (lab/workloads/spec.py); bulk only unless the registry says more
    workloads: tuple[str, ...] = ("bulk",)
    sender_cc: SenderCC = SenderCC()  # servers: how a run sets the sender's congestion control (default: TCP netns)
    # servers: its rank as the server of a scenario's competing QUIC download (lab/adverse/competing.py): the lowest
    # that is not the measured server serves it (so the flows differ by address); None: never
    competing_quic: int | None = Field(default=None, ge=1)
    # clients and servers: a TCP baseline of the stack matrix (`quiclab matrix`, lab/plan/matrix.py): HTTP/1.1 and
    # HTTP/2 run for every baseline client against every baseline server (it must speak both)
    tcp_baseline: bool = False

    @model_validator(mode="after")
    def _role_fields(self) -> Implementation:
        if self.role == "client":
            if self.adapter is None:
                raise ValueError("adapter: a client needs adapter = \"module:Class\"")
            for f in ("service", "address", "host", "port", "qlog"):
                if getattr(self, f) is not None:
                    raise ValueError(f"{f}: only servers have a {f}")
            if "sender_cc" in self.model_fields_set:
                raise ValueError("sender_cc: only servers have a sender_cc (for downloads the server sends)")
            if self.refuses_migration:
                raise ValueError("refuses_migration: only servers refuse a client's migration")
            if self.competing_quic is not None:
                raise ValueError("competing_quic: only servers serve a competing QUIC download")
        else:
            for f in ("service", "address", "host", "port"):
                if getattr(self, f) is None:
                    raise ValueError(f"{f}: a server needs a {f}")
            if self.adapter is not None or self.processes:
                raise ValueError("adapter: servers have no adapter (they are started by compose)")
            if self.migrates:
                raise ValueError("migrates: only clients move their own connection to a new path")
            if self.quic_window:
                raise ValueError("quic_window: only clients fix the window they grant (scenario `quic_window`)")
            if self.writes_qlog:
                raise ValueError("writes_qlog: a server's qlog is its qlog instance (qlog = {command, port})")
            if self.competing_quic is not None and Protocol.H3 not in self.protocols:
                raise ValueError("competing_quic: the server of a competing QUIC download must speak h3")
            if self.qlog is not None and self.qlog.port == self.port:
                raise ValueError("qlog: its port must differ from the server's own port")
            self._check_cc_instances()
        if self.tcp_baseline and not {Protocol.H1, Protocol.H2} <= self.protocols:
            raise ValueError("tcp_baseline: a TCP baseline must speak h1 and h2")
        unknown = [w for w in self.workloads if w not in KINDS]
        if unknown:
            raise ValueError(f"workloads: unknown workload {unknown[0]!r}: allowed are {', '.join(KINDS)}")
        if Protocol.H3 in self.protocols and self.quic_cc is None:
            raise ValueError("quic_cc: an HTTP/3 implementation must state its QUIC congestion control")
        return self

    def _check_cc_instances(self) -> None:
        inst = self.sender_cc.quic
        if inst is None:
            return
        options = self.quic_cc.options if self.quic_cc is not None else ()
        if not options:
            raise ValueError("sender_cc: quic instances need quic_cc = {options = [...], default = ...}")
        if set(inst.ports) != set(options):
            raise ValueError(f"sender_cc: quic ports must name exactly the quic_cc options {list(options)}, "
                             f"got {sorted(inst.ports)}")
        taken = {self.port, self.qlog.port if self.qlog else None}
        for algorithm, port in inst.ports.items():
            if not 1 <= port <= 65535 or port in taken:
                raise ValueError(f"sender_cc: quic port {port} for {algorithm} must be 1-65535 and differ from the "
                                 "server's own, its qlog instance's and the other algorithms' ports")
            taken.add(port)

    def supports(self, protocol: Protocol) -> bool:
        return protocol in self.protocols

    def url(self, path: str, port: int | None = None) -> str:
        """The URL of `path` on this server (by its TLS name; clients resolve it via /etc/hosts), on its own port
        or on `port` (its qlog instance)."""
        port = port or self.port
        shown = "" if port == 443 else f":{port}"
        return f"https://{self.host}{shown}{path}"

    def cc(self, protocol: Protocol, tcp: str = "kernel") -> str:
        """The congestion control a run over `protocol` uses: the QUIC stack's, or TCP's (the kernel's)."""
        if protocol is Protocol.H3 and self.quic_cc is not None:
            return self.quic_cc.describe()
        return tcp


@dataclass(frozen=True)
class Registry:
    implementations: dict[str, Implementation]

    def names(self, role: Role) -> list[str]:
        return [n for n, i in self.implementations.items() if i.role == role]

    def containers(self) -> tuple[str, ...]:
        """Every implementation's container, once each: the servers' first, then the clients' (registry order).
        The lab's container lists derive from it (lab/lab.py): a new entry is part of the lab without more."""
        ordered = [i.container for role in ("server", "client") for i in self.implementations.values()
                   if i.role == role]
        return tuple(dict.fromkeys(ordered))

    def quic_ports(self) -> tuple[int, ...]:
        """Every UDP port a server of the registry listens on with QUIC (its port, its qlog instance's, its
        per-congestion-control instances'), ascending: what a capture's reader decodes as QUIC
        (lab/evidence/tshark.py)."""
        ports: set[int] = set()
        for i in self.implementations.values():
            if i.role != "server" or "h3" not in i.protocols:
                continue
            ports.update(p for p in (i.port or 443, i.qlog.port if i.qlog else None) if p)
            if i.sender_cc.quic is not None:
                ports.update(i.sender_cc.quic.ports.values())
        return tuple(sorted(ports))

    def migrating(self) -> frozenset[str]:
        """The clients that can move their own connection to a new path (`migrates = true`)."""
        return frozenset(n for n, i in self.implementations.items() if i.role == "client" and i.migrates)

    def tcp_baselines(self) -> list[tuple[str, str]]:
        """The stack matrix's TCP baselines (client, server): every `tcp_baseline` client against every
        `tcp_baseline` server, in registry order (servers first)."""
        pick = [n for n, i in self.implementations.items() if i.tcp_baseline]
        return [(c, s) for s in pick if self.implementations[s].role == "server"
                for c in pick if self.implementations[c].role == "client"]

    def competing_quic(self, measured: str) -> Implementation:
        """The server of a competing QUIC download when `measured` is the measured server: the lowest
        `competing_quic` rank among the others (so the two flows differ by address)."""
        ranked = sorted((i.competing_quic, n) for n, i in self.implementations.items()
                        if i.competing_quic is not None and n != self.canonical(measured))
        if not ranked:
            raise UsageError(f"no server can serve a competing QUIC download while {measured} is measured "
                             "(implementations.toml: competing_quic)")
        return self.implementations[ranked[0][1]]

    def listing(self, role: Role) -> str:
        """The names of a role for help texts: "nginx, ngtcp2, caddy, nginx-sid (or nginx-1.30)"."""
        return ", ".join(n + (f" (or {', '.join(i.aliases)})" if i.aliases else "")
                         for n, i in self.implementations.items() if i.role == role)

    def canonical(self, name: str) -> str:
        """The registry's name for `name` (itself, or the implementation that has it as an alias)."""
        if name in self.implementations:
            return name
        return next((n for n, i in self.implementations.items() if name in i.aliases), name)

    def get(self, name: str, role: Role) -> Implementation:
        impl = self.implementations.get(self.canonical(name))
        if impl is None or impl.role != role:
            raise UsageError(f"unknown {role} {name!r}: allowed are {', '.join(self.names(role))}")
        return impl

    def client(self, name: str) -> Implementation:
        return self.get(name, "client")

    def server(self, name: str) -> Implementation:
        return self.get(name, "server")

    def server_at(self, url: str) -> Implementation | None:
        """The server whose TLS name is the URL's host (clients connect to its registered address), if any."""
        host = urlsplit(url).hostname
        return next((i for i in self.implementations.values() if i.role == "server" and i.host == host), None)

    def check_quic_cc(self, client: str, choice: str, what: str = "--cc") -> str:
        """`choice` if `client` can run its QUIC stack with that congestion controller; else a one-line error."""
        cc = self.client(client).quic_cc
        if cc is None or not cc.settable:
            raise UsageError(f"invalid {what} {choice!r}: {client} cannot choose its congestion control "
                             f"({cc.describe() if cc else 'no QUIC'})")
        if choice not in cc.options:
            raise UsageError(f"invalid {what} {choice!r} for {client}: allowed are {', '.join(cc.options)}")
        return choice

    def for_instance(self, lab: Instance) -> Registry:
        """The registry as lab `lab` has it: the file holds the default lab's containers and addresses, each lab
        has its own (lab/instance.py). Call it on the file's registry (`load()`), not on one already moved."""
        if lab.number == 0:
            return self
        moved = {}
        for name, impl in self.implementations.items():
            update: dict[str, Any] = {"container": lab.from_default_container(impl.container)}
            if impl.address is not None:
                update["address"] = lab.from_default_address(impl.address)
            moved[name] = impl.model_copy(update=update)
        return Registry(moved)

    def unsupported(self, client: str, server: str, protocol: Protocol) -> str:
        """Why this combination cannot run ("" when it can): the matrix shows it as unsupported, not failed."""
        lacking = [i.name for i in (self.client(client), self.server(server)) if not i.supports(protocol)]
        return " and ".join(lacking) + f" {'does' if len(lacking) == 1 else 'do'} not speak {protocol.label}" \
            if lacking else ""


def _field_error(name: str, where: str, e: ValidationError) -> UsageError:
    line = validation_line(e, "field", Implementation.model_fields)
    return UsageError(f"{where}: implementation {name!r}: {line}")


def parse(data: dict[str, Any], where: str = str(REGISTRY_FILE)) -> Registry:
    """Validate a registry document (the TOML's tables)."""
    if not data:
        raise UsageError(f"{where}: no implementations")
    impls: dict[str, Implementation] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: implementation {name!r} must be a table ([{name}])")
        try:
            impls[name] = Implementation.model_validate({"name": name, **entry})
        except ValidationError as e:
            raise _field_error(name, where, e) from None
    for role in ("client", "server"):
        if not any(i.role == role for i in impls.values()):
            raise UsageError(f"{where}: no {role} implementation")
    for i in impls.values():
        if i.address is not None and not _on_server_network(i.address):
            raise UsageError(f"{where}: implementation {i.name!r}: address {i.address!r} is not on the lab's "
                             f"server network (10.71.2.1-254, as in docker-compose.yml)")
    seen_names: dict[str, str] = {}
    for i in impls.values():
        for alias in i.aliases:
            if alias in impls or alias in seen_names:
                raise UsageError(f"{where}: implementation {i.name!r}: alias {alias!r} is already a name")
            seen_names[alias] = i.name
    servers = [i for i in impls.values() if i.role == "server"]
    for attr in ("container", "address", "host"):
        seen: dict[str, str] = {}
        for s in servers:
            value = str(getattr(s, attr))
            if value in seen:
                raise UsageError(f"{where}: implementation {s.name!r}: {attr} {value!r} is already used by "
                                 f"{seen[value]!r}")
            seen[value] = s.name
    return Registry(impls)


def _on_server_network(address: str) -> bool:
    """The registry holds the default lab's addresses (each lab derives its own, lab/instance.py)."""
    try:
        return Instance(0).from_default_address(address) == address and address.startswith("10.71.2.")
    except ValueError:
        return False


def load(path: Path = REGISTRY_FILE) -> Registry:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise UsageError(f"cannot read the implementation registry {str(path)!r}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"the implementation registry {str(path)!r} is not valid TOML: {e}") from None
    return parse(data, str(path))


@cache
def registry() -> Registry:
    """The lab's registry (loaded once), with the containers and addresses of the lab this process drives."""
    from lab import config

    return load().for_instance(config.INSTANCE)


def help_text(what: Literal["client", "server", "client_quic_cc", "sender_quic_cc", "fixed_quic_cc"]) -> str:
    """Implementation names for the CLI's help texts, from the registry (a help text never lists them by hand):
    every client or server ("nginx, ngtcp2, ..., nginx-sid (or nginx-1.30)"), the clients that can choose their
    QUIC congestion control with the choices ("gtlsclient: cubic, reno, bbr"), the servers run as one instance per
    algorithm, or the servers whose QUIC stack has a fixed one. A registry that does not load (its error comes
    when a command uses it) gives a pointer to the docs, so that --help always works."""
    try:
        reg = registry()
    except UsageError:
        return "see docs/implementations.md"
    impls = reg.implementations.values()
    if what in ("client", "server"):
        return reg.listing(what)
    if what == "client_quic_cc":
        return "; ".join(f"{i.name}: {', '.join(i.quic_cc.options)}" for i in impls
                         if i.role == "client" and i.quic_cc is not None and i.quic_cc.settable)
    if what == "sender_quic_cc":
        return ", ".join(i.name for i in impls if i.role == "server" and i.sender_cc.quic is not None)
    return ", ".join(i.name for i in impls if i.role == "server" and i.sender_cc.quic is None
                     and i.quic_cc is not None and i.quic_cc.fixed is not None)
