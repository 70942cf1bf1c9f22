"""Scenarios: what a sweep measures, as a validated TOML document.

    name = "connectify-loss"
    description = "..."
    protocols = ["h1", "h2", "h3"]      # default all three
    clients = ["curl"]                  # default curl
    servers = ["nginx"]                 # default nginx (lab/endpoints/implementations.toml lists them all)
    pairs = ["curl>nginx", "gtlsclient>ngtcp2"]  # optional: only these client>server pairs (default: every one)
    tcp_pairs = ["curl>nginx"]          # optional: HTTP/1.1 and HTTP/2 run only for these pairs (instead of `pairs`)
    matrix = "goodput"                  # a stack matrix over one of its links (lab/plan/matrix.py; `quiclab
                                        # matrix`): clients, servers and tcp_pairs default to the registry's, the
                                        # report draws the servers x clients heatmap
    cc = "reno"                         # the SENDER's congestion control (downloads: the server's): reno, cubic,
                                        # bbr or native (the server's own; the default); sweepable: [sweep] cc
    quic_window = "200kB"               # the QUIC client's flow-control window, fixed (clients that can: the
                                        # registry's quic_window); TCP runs unaffected; sweepable
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

A bad file gets all its problems in one line (exit 2): unknown tables and keys at every level with the nearest valid
name, missing keys, wrong types and values, duplicate entries ("f.toml: 2 problems: unknown table [frobnicate]: ...;
missing key 'name'").
"""

from __future__ import annotations

import difflib
import itertools
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from lab import terminal
from lab.adverse import spec as adverse
from lab.endpoints import check_server, get_client
from lab.endpoints.quic_window import parse_quic_window
from lab.endpoints.registry import registry
from lab.endpoints.sender_cc import parse_cc
from lab.errors import UsageError, error_line, one_line_text
from lab.evidence.capture import parse_kinds
from lab.link import shaper
from lab.link.shaper import BACKENDS
from lab.link.spec import DIRECTION_KEYS, LINK_KEYS, parse_link
from lab.plan.matrix import LINKS as MATRIX_LINKS
from lab.plan.settings import PARSERS
from lab.protocols import parse_protocol
from lab.sizes import parse_size
from lab.workloads.spec import parse_workload

OFF = "off"
TCP_PROTOCOLS = ("h1", "h2")  # what tcp_pairs restricts
MAX_REPEATS = 1000
MAX_SEED = 2**63 - 1


def check_repeats_seed(repeats: int | None, seed: int | None) -> None:
    """The command line's --repeats (1..MAX_REPEATS) and --seed (0..MAX_SEED), checked once for every command."""
    for flag, value, low, top in (("--repeats", repeats, 1, MAX_REPEATS), ("--seed", seed, 0, MAX_SEED)):
        if value is not None and not low <= value <= top:
            raise UsageError(f"invalid {flag} {value}: allowed is {low}..{top}")


#: Run dimensions that are not link parameters: key -> validator of one value (raises UsageError naming it).
#: A scenario sets one as a top-level default (e.g. `cc = "reno"`) or sweeps it (`[sweep] cc = [...]`); the plan
#: parses each point's values once into Point.settings (lab/plan/settings.py, where new dimensions register).
DIMENSIONS: dict[str, Callable[[str], object]] = {"size": parse_size, **PARSERS}
#: The old name of client_quic_cc (accepted, with a one-line note).
DEPRECATED_KEYS = {"quic_cc": "client_quic_cc"}
SWEEP_KEYS = (*LINK_KEYS, *DIMENSIONS)
T = TypeVar("T")


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    protocols: list[str] = ["h1", "h2", "h3"]
    clients: list[str] = ["curl"]
    servers: list[str] = ["nginx"]
    cc: str | None = None  # the sender's congestion control (lab/endpoints/sender_cc.py); None: native
    quic_window: str | None = None  # the QUIC client's fixed window (lab/endpoints/quic_window.py); None: its own
    client_quic_cc: dict[str, str] = Field(default={}, validation_alias=AliasChoices("client_quic_cc", "quic_cc"))
    pairs: list[str] = []  # "client>server": only these pairs of clients x servers run (empty: all of them)
    tcp_pairs: list[str] = []  # "client>server": HTTP/1.1 and HTTP/2 run only for these (empty: as `pairs` says)
    matrix: str = ""  # the stack matrix's link (lab/plan/matrix.py LINKS); "" when the sweep is no matrix
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

    @field_validator("clients", "servers", mode="before")
    @classmethod
    def _registry_names(cls, v: Any) -> Any:
        """Older names of an implementation (registry aliases, e.g. nginx-1.30) become its name: runs record one."""
        return [registry().canonical(x) if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @field_validator("pairs", "tcp_pairs", mode="before")
    @classmethod
    def _registry_pairs(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return v
        out = []
        for p in v:
            client, sep, server = p.partition(">") if isinstance(p, str) else ("", "", "")
            out.append(f"{registry().canonical(client.strip())}>{registry().canonical(server.strip())}" if sep else p)
        return out

    @field_validator("protocols", "clients", "servers", "sizes")
    @classmethod
    def _not_empty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("must not be empty")
        return v


def runs_pair(s: Scenario, client: str, server: str, protocol: str | None = None) -> bool:
    """Whether the scenario runs this client against this server over `protocol` (None: over any of its
    protocols): for HTTP/1.1 and HTTP/2 its `tcp_pairs` when it has them, else its `pairs`, else every
    combination."""
    if protocol is None:
        return any(runs_pair(s, client, server, p) for p in s.protocols)
    listed = s.tcp_pairs if s.tcp_pairs and protocol in TCP_PROTOCOLS else s.pairs
    return not listed or any(p.replace(" ", "") == f"{client}>{server}" for p in listed)


class Problems:
    """The problems found in one scenario, collected so that all of them are reported together; `failed` names the
    fields that had one (checks that need such a field are skipped: they would only repeat it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.failed: set[str] = set()

    def add(self, field: str, line: str) -> None:
        self.lines.append(one_line_text(line))
        self.failed.add(field)

    def attempt(self, field: str, check: Callable[[], T], prefix: str = "") -> T | None:
        """check(), or None with its UsageError recorded as a problem of `field`."""
        try:
            return check()
        except UsageError as e:
            self.add(field, prefix + str(e))
            return None

    def error(self, where: str) -> UsageError | None:
        """All problems as one line: "WHERE: PROBLEM", or "WHERE: N problems: P1; P2; ..."; None if there are none."""
        unique = list(dict.fromkeys(self.lines))
        if not unique:
            return None
        if len(unique) == 1:
            return UsageError(f"{where}: {unique[0]}")
        return UsageError(f"{where}: {len(unique)} problems: {'; '.join(unique)}")


@dataclass(frozen=True)
class Level:
    """The names one table of a scenario may hold: plain keys, and tables with their own names (None: any names,
    checked with the values, e.g. the client names of client_quic_cc)."""

    keys: tuple[str, ...]
    tables: Mapping[str, Level | None] = dc_field(default_factory=dict)


_DIRECTION = Level(DIRECTION_KEYS)
_TABLES: dict[str, Level | None] = {
    "link": Level(LINK_KEYS, {"down": _DIRECTION, "up": _DIRECTION}), "sweep": Level(SWEEP_KEYS),
    "client_quic_cc": None, **dict.fromkeys(DEPRECATED_KEYS)}
TOP = Level(tuple(k for k in Scenario.model_fields if k not in _TABLES), _TABLES)


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest to a mistyped `name` (difflib, ignoring case), or None when none is near."""
    match = difflib.get_close_matches(name.lower(), list(candidates), n=1)
    return match[0] if match else None


def unknown_names(data: Mapping[str, Any], level: Level = TOP, at: str = "") -> list[str]:
    """Every name in `data` (and its tables, at any depth) that the scenario format does not have, one line each,
    with the nearest valid name: "unknown table [frobnicate]", "unknown key 'los' in [link] (did you mean 'loss'?)"."""
    problems: list[str] = []
    for name, value in data.items():
        if name in level.tables:
            sub = level.tables[name]
            if sub is not None and isinstance(value, dict):
                problems += unknown_names(value, sub, _dotted(at, name))
        elif name not in level.keys:
            problems.append(_unknown(name, value, level, at))
    return problems


def _unknown(name: str, value: object, level: Level, at: str) -> str:
    """An unknown table is matched against the tables of its level, an unknown key against the keys."""
    table = _is_table(value)
    if table:
        what = f"table [{_dotted(at, name)}]"
        names = {t: f"[{_dotted(at, t)}]" for t in level.tables if t not in DEPRECATED_KEYS}
    else:
        what = f"key {name!r}" + (f" in [{at}]" if at else "")
        names = {k: k for k in level.keys}
    near = closest(name, names)
    if near is not None:
        return f"unknown {what} (did you mean {names[near] if table else repr(near)}?)"
    allowed = f"allowed are {', '.join(names.values())}" if names else f"[{at}] has no tables"
    return f"unknown {what}: {allowed}"


def _is_table(value: object) -> bool:
    """A TOML table ([x] or x = {...}), or an array of them ([[x]])."""
    return isinstance(value, dict) or (isinstance(value, list) and bool(value)
                                       and all(isinstance(v, dict) for v in value))


def _dotted(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


def validate_fields(data: dict[str, Any], where: str) -> Scenario:
    """Check every field without the lab and without expanding the points. Every problem is found, not just the
    first: unknown tables and keys (with the nearest valid name), missing keys, wrong types and values; all of them
    are raised together as one UsageError of one line naming each bad key or value. The checks that need the
    points come right after (lab/plan/checks.py `validate`, what callers use)."""
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: expected a table of scenario keys, got {type(data).__name__}")
    problems = Problems()
    for line in unknown_names(data):
        problems.add("", line)
    s = _model(data, problems)
    if s is not None:
        _check_values(s, problems)
    if (e := problems.error(where)) is not None:
        raise e
    assert s is not None  # (no problems: the model validated)
    return s


def _model(data: Mapping[str, Any], problems: Problems) -> Scenario | None:
    """The scenario with every field pydantic refuses left at its default (the name at a stand-in), so that the
    other fields can still be checked; each refusal is a problem of its field."""
    known = {k: v for k, v in data.items() if k in Scenario.model_fields or k in DEPRECATED_KEYS}
    for old, new in DEPRECATED_KEYS.items():
        if old in known and new in known:
            problems.add(new, f"give {new} only ({old} is its old name)")
            del known[old]
    try:
        return Scenario.model_validate(known)
    except ValidationError as e:
        errors = e.errors()
    kept = dict(known)
    for err in errors:
        problems.add(str(err["loc"][0]) if err["loc"] else "", error_line(err, "key", Scenario.model_fields))
        _drop(kept, err["loc"])
    kept.setdefault("name", "unnamed")
    try:
        return Scenario.model_validate(kept)
    except ValidationError:  # (not expected: every refused field was dropped)
        return None


def _drop(data: dict[str, Any], loc: tuple[int | str, ...]) -> None:
    """Remove what pydantic refused at `loc`: the entry of a table (e.g. one [sweep] list), else the whole key."""
    if not loc:
        return
    key = str(loc[0])
    table = data.get(key)
    if len(loc) > 1 and isinstance(loc[1], str) and isinstance(table, dict):
        data[key] = {k: v for k, v in table.items() if k != loc[1]}
    else:
        data.pop(key, None)


def _check_values(s: Scenario, problems: Problems) -> None:
    """The checks pydantic cannot do: names of protocols, clients, servers; sizes, workload, capture, shaper,
    congestion control, adverse conditions, the link and the swept values; each one's problems are recorded."""
    if s.cc is not None:
        s.cc = problems.attempt("cc", partial(parse_cc, s.cc)) or s.cc
    if s.quic_window is not None:
        problems.attempt("quic_window", partial(parse_quic_window, s.quic_window))
    s.protocols = _each(problems, "protocols", s.protocols, lambda p: parse_protocol(p).value)
    _each(problems, "clients", s.clients, _keeping_name(get_client))
    _each(problems, "servers", s.servers, _keeping_name(check_server))
    _each(problems, "sizes", s.sizes, parse_size)
    problems.attempt("workload", partial(parse_workload, s.workload))
    capture = problems.attempt("capture", partial(_capture, s.capture))
    s.capture = list(capture) if capture is not None else s.capture
    if s.shaper not in BACKENDS:
        problems.add("shaper", f"invalid shaper {s.shaper!r}: allowed are {', '.join(BACKENDS)}")
    for key in ("faults", "competing", "path"):
        problems.attempt(key, partial(DIMENSIONS[key], getattr(s, key)), prefix=f"{key}: ")
    if s.matrix and s.matrix not in MATRIX_LINKS:
        problems.add("matrix", f"invalid matrix {s.matrix!r}: allowed are {', '.join(MATRIX_LINKS)}")
    if not {"clients", "servers"} & problems.failed:
        _check_pairs(s, problems)
    if "clients" not in problems.failed:
        _check_client_quic_cc(s, problems)
    _check_link_and_sweep(s, problems)


def _each(problems: Problems, field: str, values: list[str], check: Callable[[str], Any]) -> list[Any]:
    """check() of every value of a list field (what it returns, e.g. the normalized name, or the value when it
    fails), and a problem for each value that repeats an earlier one (it would plan the same runs twice)."""
    out: list[Any] = []
    for value in values:
        got = problems.attempt(field, partial(check, value))
        out.append(value if got is None else got)
    for line in _repeats(values, out, field):
        problems.add(field, line)
    return out if field not in problems.failed else values


def _keeping_name(check: Callable[[str], object]) -> Callable[[str], str]:
    """check(name) that returns the name (the normalized form of a client or server is its name)."""
    def run(name: str) -> str:
        check(name)
        return name
    return run


def _repeats(given: Sequence[object], same: Sequence[object], field: str) -> list[str]:
    """'duplicate ...' for every entry of `given` whose `same` (its normalized form) came before."""
    first: dict[object, object] = {}
    lines: list[str] = []
    for text, key in zip(given, same, strict=True):
        if key in first:
            also = f" (the same as {first[key]!r})" if first[key] != text else ""
            lines.append(f"duplicate {text!r} in {field}{also}")
        first.setdefault(key, text)
    return lines


def _capture(kinds: list[str]) -> tuple[str, ...]:
    try:
        return parse_kinds(",".join(kinds))
    except UsageError as e:
        raise UsageError(str(e).replace("--capture", "capture")) from None


def _check_pairs(s: Scenario, problems: Problems) -> None:
    for field in ("pairs", "tcp_pairs"):
        for pair in getattr(s, field):
            client, sep, server = pair.partition(">")
            if not sep or client.strip() not in s.clients or server.strip() not in s.servers:
                problems.add(field, f"invalid {field} entry {pair!r}: expected \"client>server\" with a client of "
                                    f"{', '.join(s.clients)} and a server of {', '.join(s.servers)}")


def _check_client_quic_cc(s: Scenario, problems: Problems) -> None:
    for name, choice in s.client_quic_cc.items():
        what = f"client_quic_cc.{name}"
        if name not in s.clients:
            near = closest(name, s.clients)
            hint = f" (did you mean {near!r}?)" if near else ""
            problems.add("client_quic_cc", f"{what}: not one of the scenario's clients ({', '.join(s.clients)})"
                                           f"{hint}")
        else:
            problems.attempt("client_quic_cc", partial(registry().check_quic_cc, name, choice, what))


def _check_link_and_sweep(s: Scenario, problems: Problems) -> None:
    """Every [link] setting and swept value, each with the settings it may depend on (a key is checked with the
    keys before it in LINK_KEYS, given or swept: spikes after rate); then, if all of them pass, every combination
    of the swept link settings as a link the shaper can emulate."""
    link = {k: v for k, v in s.link.items() if k not in ("down", "up")}
    swept = {k: [str(v) for v in vs] for k, vs in s.sweep.items()}
    fixed: dict[str, Any] = {}  # the accepted [link] settings
    context: dict[str, Any] = {}  # ... and, for a swept key, its first accepted value: what later keys see
    for key in LINK_KEYS:
        if key in link and _link_ok(problems, {**context, key: link[key]}):
            fixed[key] = context[key] = link[key]
        for text in swept.get(key, []):
            if text != OFF and _link_ok(problems, {**context, key: text}, prefix=f"sweep.{key}: "):
                context.setdefault(key, text)
    down = _accepted(_direction_table(s.link, "down", problems), DIRECTION_KEYS, partial(parse_link, context),
                     problems)
    up = _accepted(_direction_table(s.link, "up", problems), DIRECTION_KEYS, partial(parse_link, context, down),
                   problems)
    for key, texts in swept.items():
        _check_swept(key, texts, problems)
    if not problems.failed & {"link", "sweep", "shaper"}:
        _check_combinations(s, fixed, down, up, problems)


def _link_ok(problems: Problems, common: dict[str, Any], prefix: str = "") -> bool:
    return problems.attempt("link", partial(parse_link, common), prefix) is not None


def _direction_table(link: Mapping[str, Any], name: str, problems: Problems) -> dict[str, Any]:
    table = link.get(name, {})
    if isinstance(table, dict):
        return table
    problems.add("link", f"link.{name} must be a table of {', '.join(DIRECTION_KEYS)}")
    return {}


def _accepted(given: Mapping[str, Any], order: tuple[str, ...], check: Callable[[dict[str, Any]], object],
              problems: Problems) -> dict[str, Any]:
    """The settings of `given` that check() accepts when added one at a time in `order` (names not in it were
    reported as unknown); each refused one is a problem of the link."""
    ok: dict[str, Any] = {}
    for key in order:
        if key in given and problems.attempt("link", partial(check, {**ok, key: given[key]})) is not None:
            ok[key] = given[key]
    return ok


def _check_swept(key: str, texts: list[str], problems: Problems) -> None:
    """A [sweep] list: known key (else named by unknown_names), not empty, no value twice, dimension values valid
    (link values are checked with the link)."""
    if key not in SWEEP_KEYS:
        problems.failed.add("sweep")
        return
    if not texts:
        problems.add("sweep", f"sweep.{key} must be a non-empty list")
    if key in DIMENSIONS:
        for text in texts:
            problems.attempt("sweep", partial(DIMENSIONS[key], text), prefix=f"sweep.{key}: ")
    for line in _repeats(texts, [t.strip() for t in texts], f"sweep.{key}"):
        problems.add("sweep", line)


def _check_combinations(s: Scenario, common: dict[str, Any], down: dict[str, Any], up: dict[str, Any],
                        problems: Problems) -> None:
    """Every combination of the swept link settings must make a link the scenario's shaper can emulate."""
    link_dims = [(k, [str(v) for v in vs]) for k, vs in s.sweep.items() if k not in DIMENSIONS]
    for combo in itertools.product(*(vs for _, vs in link_dims)):
        setting = {k: v for (k, _), v in zip(link_dims, combo, strict=True) if v != OFF}
        problems.attempt("link", partial(_emulable, s.shaper, {**common, **setting}, down, up))


def _emulable(backend: str, common: dict[str, Any], down: dict[str, Any], up: dict[str, Any]) -> None:
    shaper.check(backend, parse_link(common, down, up))


def warn_deprecated(data: Mapping[str, Any], where: str) -> None:
    for old, new in DEPRECATED_KEYS.items():
        if old in data:
            terminal.warning(f"{where}: {old} is deprecated, use {new} (the client's QUIC congestion control; "
                             "the sender's is cc)")


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


