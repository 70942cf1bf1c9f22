"""Scenarios: what a sweep measures, as a validated TOML document.

    name = "connectify-loss"
    description = "..."
    protocols = ["h1", "h2", "h3"]      # default all three
    clients = ["curl"]                  # default curl
    servers = ["nginx"]                 # default nginx (lab/endpoints/implementations.toml lists them all)
    pairs = ["curl>nginx", "gtlsclient>ngtcp2"]  # optional: only these client>server pairs (default: every one)
    cc = "reno"                         # the SENDER's congestion control (downloads: the server's): reno, cubic,
                                        # bbr or native (the server's own; the default); sweepable: [sweep] cc
    client_quic_cc = {gtlsclient = "bbr"}  # the CLIENT's QUIC congestion control (clients that can choose it);
                                        # hardly matters for downloads (the client sends only ACKs); old name quic_cc
    sizes = ["10MB"]                    # objects (a swept `size` replaces this)
    repeats = 5
    seed = 1                            # shuffles the run order and seeds the link's randomness
    timeout = 0                         # seconds per transfer; 0 = derived from size and link
    shaper = "auto"                     # auto | netem | linkem
    log_y = false                       # log goodput axis in plots
    capture = []                        # evidence per run: any of "pcap", "keylog", "qlog" (docs/results.md)
    workload = "bulk"                   # bulk, page:50x20kB, reuse:10x100kB, new:.., resume:100kB, 0rtt:100kB
    faults = ["pause:2s@1s"]            # adverse conditions (lab/adverse/spec.py, docs/adverse.md); sweepable:
    competing = "tcp-cubic"             #   [sweep] faults = ["none", "blackout:1s@2s"], competing = [...],
    path = "rebind@2s"                  #   path = [...]

    [link]                              # fixed link parameters (see lab/link/spec.py for keys)
    rtt = "160ms"
    rate = "5mbit"
    [link.down]                         # optional per-direction overrides
    [link.up]

    [sweep]                             # swept parameters: the points are the product of these lists
    loss = ["0%", "0.1%", "1%"]         # any link key, `size` or `workload`; "off" leaves a key unset at that point
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from lab import terminal
from lab.adverse import spec as adverse
from lab.endpoints import check_server, get_client
from lab.endpoints.registry import registry
from lab.endpoints.sender_cc import parse_cc
from lab.errors import UsageError, validation_line
from lab.evidence.capture import parse_kinds
from lab.link import shaper
from lab.link.shaper import BACKENDS
from lab.link.spec import DIRECTION_KEYS, LINK_KEYS, parse_link
from lab.protocols import parse_protocol
from lab.sizes import parse_size
from lab.workloads.spec import check_workload

OFF = "off"
MAX_REPEATS = 1000
MAX_SEED = 2**63 - 1

#: Run dimensions that are not link parameters: key -> validator of one value (raises UsageError naming it).
#: A scenario sets one as a top-level default (e.g. `cc = "reno"`) or sweeps it (`[sweep] cc = [...]`); the plan
#: hands each point's value to the runner in Point.settings. New dimensions register here (cc, workload, ...).
DIMENSIONS: dict[str, Callable[[str], object]] = {
    "size": parse_size, "workload": check_workload, "cc": parse_cc, "faults": adverse.parse_faults,
    "competing": adverse.parse_competing, "path": adverse.parse_path}
#: The old name of client_quic_cc (accepted, with a one-line note).
DEPRECATED_KEYS = {"quic_cc": "client_quic_cc"}
SWEEP_KEYS = (*LINK_KEYS, *DIMENSIONS)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    protocols: list[str] = ["h1", "h2", "h3"]
    clients: list[str] = ["curl"]
    servers: list[str] = ["nginx"]
    cc: str | None = None  # the sender's congestion control (lab/endpoints/sender_cc.py); None: native
    client_quic_cc: dict[str, str] = Field(default={}, validation_alias=AliasChoices("client_quic_cc", "quic_cc"))
    pairs: list[str] = []  # "client>server": only these pairs of clients x servers run (empty: all of them)
    sizes: list[str] = ["1MB"]
    repeats: int = Field(default=5, ge=1, le=MAX_REPEATS)
    seed: int = Field(default=1, ge=0, le=MAX_SEED)
    timeout: float = Field(default=0, ge=0, le=3600)
    shaper: str = "auto"
    log_y: bool = False
    capture: list[str] = []
    workload: str = "bulk"              # lab/workloads/spec.py; sweep it with [sweep] workload = [...]
    link: dict[str, Any] = {}
    sweep: dict[str, list[Any]] = {}
    faults: str = ""
    competing: str = ""
    path: str = ""

    @field_validator("faults", "competing", "path", mode="before")
    @classmethod
    def _one_string(cls, v: Any) -> str:
        return adverse.joined(v)

    @field_validator("protocols", "clients", "servers", "sizes")
    @classmethod
    def _not_empty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("must not be empty")
        return v


def runs_pair(s: Scenario, client: str, server: str) -> bool:
    """Whether the scenario runs this client against this server (its `pairs`, else every combination)."""
    return not s.pairs or any(p.replace(" ", "") == f"{client}>{server}" for p in s.pairs)


def _fail(where: str, e: ValidationError) -> UsageError:
    return UsageError(f"{where}: {validation_line(e, 'key', Scenario.model_fields)}")


def validate(data: dict[str, Any], where: str) -> Scenario:
    """Check everything that can be checked without the lab; errors are one line naming the value."""
    for old, new in DEPRECATED_KEYS.items():
        if old in data:
            if new in data:
                raise UsageError(f"{where}: give {new} only ({old} is its old name)")
            terminal.warning(f"{where}: {old} is deprecated, use {new} (the client's QUIC congestion control; "
                             "the sender's is cc)")
    try:
        s = Scenario.model_validate(data)
    except ValidationError as e:
        raise _fail(where, e) from None
    if s.cc is not None:
        try:
            s.cc = parse_cc(s.cc)
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    s.protocols = [parse_protocol(p).value for p in s.protocols]
    for c in s.clients:
        get_client(c)
    for sv in s.servers:
        check_server(sv)
    for pair in s.pairs:
        client, sep, server = pair.partition(">")
        if not sep or client.strip() not in s.clients or server.strip() not in s.servers:
            raise UsageError(f"{where}: invalid pairs entry {pair!r}: expected \"client>server\" with a client of "
                             f"{', '.join(s.clients)} and a server of {', '.join(s.servers)}")
    for name, choice in s.client_quic_cc.items():
        if name not in s.clients:
            raise UsageError(f"{where}: client_quic_cc.{name}: not one of the scenario's clients "
                             f"({', '.join(s.clients)})")
        try:
            registry().check_quic_cc(name, choice, f"client_quic_cc.{name}")
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    for size in s.sizes:
        parse_size(size)
    try:
        check_workload(s.workload)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
    try:
        s.capture = list(parse_kinds(",".join(s.capture)))
    except UsageError as e:
        raise UsageError(f"{where}: {str(e).replace('--capture', 'capture')}") from None
    if s.shaper not in BACKENDS:
        raise UsageError(f"{where}: invalid shaper {s.shaper!r}: allowed are {', '.join(BACKENDS)}")
    link = dict(s.link)
    down, up = link.pop("down", {}), link.pop("up", {})
    _check_directional(down, up, where)
    for key in ("faults", "competing", "path"):
        try:
            DIMENSIONS[key](getattr(s, key))
        except UsageError as e:
            raise UsageError(f"{where}: {key}: {e}") from None
    for key, values in s.sweep.items():
        if key not in SWEEP_KEYS:
            raise UsageError(f"{where}: unknown sweep key {key!r}: allowed are {', '.join(SWEEP_KEYS)}")
        if not isinstance(values, list) or not values:
            raise UsageError(f"{where}: sweep.{key} must be a non-empty list")
        for v in values:
            if key in DIMENSIONS:
                try:
                    DIMENSIONS[key](str(v))
                except UsageError as e:
                    raise UsageError(f"{where}: sweep.{key}: {e}") from None
    # every combination of the swept link settings must make a valid link
    link_dims = [(k, [str(v) for v in vs]) for k, vs in s.sweep.items() if k not in DIMENSIONS]
    for combo in itertools.product(*(vs for _, vs in link_dims)):
        setting = {k: v for (k, _), v in zip(link_dims, combo, strict=True) if v != OFF}
        try:
            shaper.check(s.shaper, parse_link({**link, **setting}, down, up))
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    from lab.adverse.check import check_scenario  # (lazy: it plans the points, and the planner imports this module)

    check_scenario(s, where)
    return s


def _check_directional(down: Any, up: Any, where: str) -> None:
    for name, d in (("link.down", down), ("link.up", up)):
        if not isinstance(d, dict):
            raise UsageError(f"{where}: {name} must be a table of {', '.join(DIRECTION_KEYS)}")


def read(path: Path) -> dict[str, Any]:
    """A scenario file's raw TOML (before overrides and validation); errors name the file."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read scenario {str(path)!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read scenario {str(path)!r}: not UTF-8 text (a TOML file is)") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"scenario {str(path)!r} is not valid TOML: {e}") from None


def load(path: Path) -> Scenario:
    return validate(read(path), str(path))
