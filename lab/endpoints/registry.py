"""The implementation registry (implementations.toml): which clients and servers exist, what each can do, where it
runs, how to ask its version and what congestion control its QUIC stack uses. Loaded once and validated; a
malformed entry is a UsageError of one line naming the entry and the field."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lab.errors import UsageError, validation_line
from lab.protocols import Protocol

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


class Implementation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    role: Role
    description: str = ""
    protocols: frozenset[Protocol] = Field(min_length=1)
    container: str = Field(min_length=1)
    version: str = Field(min_length=1)
    quic_cc: QuicCC | None = None
    # clients
    adapter: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    processes: tuple[str, ...] = ()
    # servers
    service: str | None = None
    address: str | None = Field(default=None, pattern=r"^\d{1,3}(\.\d{1,3}){3}$")
    host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]+$")
    port: int | None = Field(default=None, ge=1, le=65535)
    qlog: QlogInstance | None = None

    @model_validator(mode="after")
    def _role_fields(self) -> Implementation:
        if self.role == "client":
            if self.adapter is None:
                raise ValueError("adapter: a client needs adapter = \"module:Class\"")
            for f in ("service", "address", "host", "port", "qlog"):
                if getattr(self, f) is not None:
                    raise ValueError(f"{f}: only servers have a {f}")
        else:
            for f in ("service", "address", "host", "port"):
                if getattr(self, f) is None:
                    raise ValueError(f"{f}: a server needs a {f}")
            if self.adapter is not None or self.processes:
                raise ValueError("adapter: servers have no adapter (they are started by compose)")
            if self.qlog is not None and self.qlog.port == self.port:
                raise ValueError("qlog: its port must differ from the server's own port")
        if Protocol.H3 in self.protocols and self.quic_cc is None:
            raise ValueError("quic_cc: an HTTP/3 implementation must state its QUIC congestion control")
        return self

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

    def get(self, name: str, role: Role) -> Implementation:
        impl = self.implementations.get(name)
        if impl is None or impl.role != role:
            raise UsageError(f"unknown {role} {name!r}: allowed are {', '.join(self.names(role))}")
        return impl

    def client(self, name: str) -> Implementation:
        return self.get(name, "client")

    def server(self, name: str) -> Implementation:
        return self.get(name, "server")

    def check_quic_cc(self, client: str, choice: str, what: str = "--cc") -> str:
        """`choice` if `client` can run its QUIC stack with that congestion controller; else a one-line error."""
        cc = self.client(client).quic_cc
        if cc is None or not cc.settable:
            raise UsageError(f"invalid {what} {choice!r}: {client} cannot choose its congestion control "
                             f"({cc.describe() if cc else 'no QUIC'})")
        if choice not in cc.options:
            raise UsageError(f"invalid {what} {choice!r} for {client}: allowed are {', '.join(cc.options)}")
        return choice

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
    """The lab's registry (loaded once)."""
    return load()
