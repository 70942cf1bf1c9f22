"""Adverse conditions as users write them (scenario values): faults, competing flows, path changes.

Every value is one string (a scenario may also give a list, joined with commas); "none" or "" means nothing.
Times are measured from the start of the transfer (the instant the lab starts the client's command).

  faults     KIND[=VALUE]:DURATION@START, comma-separated, e.g. "pause:2s@1s", "blackout:1s@3s,rate=1mbit:2s@6s"
             pause     the server's container frozen (Docker's freezer) for DURATION
             kill      the server's container killed, started again after DURATION (then healthy again)
             blackout  the link drops every packet in both directions for DURATION
             rate=R    the link's rate (both directions) is R for DURATION: 1mbit, or 10% of the link's rate
             delay=D   the one-way delay (both directions) is D for DURATION: 100ms, or +50ms on top of the link's
  competing  KIND[@START], comma-separated, e.g. "tcp-cubic", "tcp-bbr@2s,udp=5mbit": background downloads through
             the same bottleneck, from START until the measured transfer ends
             tcp-cubic, tcp-bbr, tcp-reno   iperf3 TCP (server -> client) with that congestion control
             quic, quic-cubic, quic-bbr, quic-reno   a second HTTP/3 download (gtlsclient, that congestion control)
             udp=R     iperf3 UDP at a constant rate R (server -> client)
  path       KIND@START, one per run
             rebind       NAT rebinding at the router: the client's source port changes (both directions rewritten)
             readdr       the client's address changes at the router (10.71.1.10 -> 10.71.1.200, both ways)
             migrate      gtlsclient moves to a new local port itself (--change-local-addr; START counts from its
                          handshake); h3 with gtlsclient only
             migrate-nat  the same without the client's own path validation (--nat-rebinding)

Pure: strings in, validated values out; errors are one line naming the value and the accepted forms.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lab.errors import UsageError
from lab.link.units import parse_rate

NONE_WORDS = ("", "none", "off")
#: The longest any time in a spec may be: the longest run (a scenario's timeout is at most 3600 s).
MAX_TIME_S = 3600.0

FaultKind = Literal["pause", "kill", "blackout", "rate", "delay"]
FAULT_FORMS = ("KIND[=VALUE]:DURATION@START with KIND pause, kill, blackout, rate=RATE|PCT, delay=DELAY|+DELAY "
               "(e.g. pause:2s@1s, blackout:1s@3s, rate=1mbit:2s@2s, delay=+100ms:1s@2s), comma-separated, or none")

FlowKind = Literal["tcp", "quic", "udp"]
TCP_CC = ("cubic", "bbr", "reno")
QUIC_CC = ("cubic", "bbr", "reno")
FLOW_FORMS = ("KIND[@START] with KIND tcp-cubic, tcp-bbr, tcp-reno, quic, quic-cubic, quic-bbr, quic-reno or udp=RATE "
              "(e.g. tcp-cubic, tcp-bbr@2s, udp=5mbit@1s), comma-separated, or none")

PathKind = Literal["rebind", "readdr", "migrate", "migrate-nat"]
PATH_KINDS: tuple[PathKind, ...] = ("rebind", "readdr", "migrate", "migrate-nat")
PATH_FORMS = "KIND@START with KIND rebind, readdr, migrate, migrate-nat (e.g. rebind@2s), or none"

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_TIME = re.compile(rf"^({_NUM})\s*(us|ms|s|min)?$", re.IGNORECASE)
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}


def parse_time(text: str, what: str, forms: str, value: str) -> float:
    """'2s', '500ms', '1.5s', '0' -> seconds (a unit is required, except for 0)."""
    t = text.strip()
    if t.startswith("-"):
        raise UsageError(f"invalid {what} in {value!r}: {t} is negative; accepted: {forms}")
    m = _TIME.match(t)
    if not m or (m.group(2) is None and float(m.group(1)) != 0):
        raise UsageError(f"invalid {what} in {value!r}: {t!r} is not a time such as 500ms, 2s; accepted: {forms}")
    seconds = float(m.group(1)) * _UNIT[(m.group(2) or "s").lower()]
    if seconds > MAX_TIME_S:
        raise UsageError(f"invalid {what} in {value!r}: {t} is beyond {MAX_TIME_S:g} s (the longest run); "
                         f"accepted: {forms}")
    return seconds


def _items(value: str, forms: str) -> list[str]:
    v = value.strip()
    if v.lower() in NONE_WORDS:
        return []
    items = [x.strip() for x in v.split(",")]
    if any(not x for x in items):
        raise UsageError(f"invalid value {value!r}: an empty item in the comma list; accepted: {forms}")
    return items


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    start_s: float
    duration_s: float
    text: str                       # the spec item as written
    rate_bps: int | None = None     # rate: absolute
    rate_fraction: float | None = None  # rate: a fraction of the link's rate
    delay_s: float | None = None    # delay: absolute one-way delay
    delay_add_s: float | None = None  # delay: added to the link's one-way delay

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def family(self) -> Literal["server", "link"]:
        """What it acts on: the server's container or the link."""
        return KINDS[self.kind][0]


_FAULT = re.compile(r"^([a-z]+)(?:=([^:@]*))?:([^@]*)@(.*)$")


def _rate(item: str, arg: str) -> dict[str, Any]:
    """rate=R: an absolute rate (1mbit), or PCT% of the link's rate."""
    if arg.strip().endswith("%"):
        try:
            pct = float(arg.strip()[:-1])
        except ValueError:
            pct = -1.0
        if not 0 < pct <= 100:
            raise UsageError(f"invalid fault {item!r}: rate {arg!r} must be a percentage in (0, 100]; "
                             f"accepted: {FAULT_FORMS}")
        return {"rate_fraction": pct / 100}
    try:
        return {"rate_bps": parse_rate(arg, "fault rate")}
    except UsageError as e:
        raise UsageError(f"invalid fault {item!r}: {e}; accepted: {FAULT_FORMS}") from None


def _delay(item: str, arg: str) -> dict[str, Any]:
    """delay=D: an absolute one-way delay (100ms), or +D on top of the link's."""
    t = parse_time(arg.strip().lstrip("+"), "fault delay", FAULT_FORMS, item)
    if t > 60:
        raise UsageError(f"invalid fault {item!r}: delay {arg!r} is above 60 s; accepted: {FAULT_FORMS}")
    return {"delay_add_s" if arg.strip().startswith("+") else "delay_s": t}


#: Every fault kind: what it acts on (the server's container or the link; faults on one must not overlap) and the
#: parser of its VALUE (None: it takes none). Its action (apply, undo, verify) is its class in lab/adverse/faults.py.
KINDS: dict[FaultKind, tuple[Literal["server", "link"], Callable[[str, str], dict[str, Any]] | None]] = {
    "pause": ("server", None), "kill": ("server", None), "blackout": ("link", None), "rate": ("link", _rate),
    "delay": ("link", _delay)}


def parse_fault(item: str) -> Fault:
    m = _FAULT.match(item.strip())
    if not m:
        raise UsageError(f"invalid fault {item!r}: accepted: {FAULT_FORMS}")
    kind, arg, duration, start = m.group(1), m.group(2), m.group(3), m.group(4)
    if kind not in KINDS:
        raise UsageError(f"invalid fault {item!r}: unknown kind {kind!r}; accepted: {FAULT_FORMS}")
    d = parse_time(duration, "fault duration", FAULT_FORMS, item)
    s = parse_time(start, "fault start", FAULT_FORMS, item)
    value = KINDS[kind][1]
    if value is not None and not arg:
        raise UsageError(f"invalid fault {item!r}: {kind} needs a value ({kind}=...); accepted: {FAULT_FORMS}")
    if value is None and arg is not None:
        raise UsageError(f"invalid fault {item!r}: {kind} takes no value; accepted: {FAULT_FORMS}")
    return Fault(kind=kind, start_s=s, duration_s=d, text=item.strip(),
                 **(value(item, arg) if value is not None and arg else {}))


def parse_faults(value: str) -> tuple[Fault, ...]:
    """A comma list of faults. Faults of the same family (the server's container; the link) must not overlap:
    each undoes to the run's own state."""
    faults = tuple(sorted((parse_fault(x) for x in _items(value, FAULT_FORMS)), key=lambda f: f.start_s))
    for family in ("server", "link"):
        fam = [f for f in faults if f.family == family]
        for a, b in itertools.pairwise(fam):
            if b.start_s < a.end_s or (b.start_s == a.start_s):
                raise UsageError(f"invalid faults {value!r}: {a.text!r} and {b.text!r} overlap (faults on the "
                                 f"{family} must not); accepted: {FAULT_FORMS}")
    return faults


@dataclass(frozen=True)
class Flow:
    kind: FlowKind
    start_s: float
    text: str
    cc: str | None = None        # tcp: cubic | bbr | reno; quic: the gtlsclient's choice
    rate_bps: int | None = None  # udp

    @property
    def label(self) -> str:
        if self.kind == "udp":
            return f"udp={self.rate_bps}bps"
        return f"{self.kind}-{self.cc}"


_FLOW = re.compile(r"^([a-z]+)(?:-([a-z]+))?(?:=([^@]*))?(?:@(.*))?$")


def parse_flow(item: str) -> Flow:
    m = _FLOW.match(item.strip())
    if not m:
        raise UsageError(f"invalid competing flow {item!r}: accepted: {FLOW_FORMS}")
    kind, cc, arg, start = m.group(1), m.group(2), m.group(3), m.group(4)
    s = parse_time(start, "competing flow start", FLOW_FORMS, item) if start is not None else 0.0
    text = item.strip()
    if kind == "tcp":
        if cc not in TCP_CC or arg is not None:
            raise UsageError(f"invalid competing flow {item!r}: tcp needs a congestion control "
                             f"({', '.join('tcp-' + c for c in TCP_CC)}); accepted: {FLOW_FORMS}")
        return Flow("tcp", s, text, cc=cc)
    if kind == "quic":
        if (cc is not None and cc not in QUIC_CC) or arg is not None:
            raise UsageError(f"invalid competing flow {item!r}: quic takes one of "
                             f"{', '.join('quic-' + c for c in QUIC_CC)}; accepted: {FLOW_FORMS}")
        return Flow("quic", s, text, cc=cc or "cubic")
    if kind == "udp":
        if cc is not None or not arg:
            raise UsageError(f"invalid competing flow {item!r}: udp needs a rate (udp=5mbit); accepted: {FLOW_FORMS}")
        try:
            return Flow("udp", s, text, rate_bps=parse_rate(arg, "competing udp rate"))
        except UsageError as e:
            raise UsageError(f"invalid competing flow {item!r}: {e}; accepted: {FLOW_FORMS}") from None
    raise UsageError(f"invalid competing flow {item!r}: unknown kind {kind!r}; accepted: {FLOW_FORMS}")


#: At most this many background flows per run (each one is an iperf3 or gtlsclient process on a 2-core host).
MAX_FLOWS = 8


def parse_competing(value: str) -> tuple[Flow, ...]:
    flows = tuple(parse_flow(x) for x in _items(value, FLOW_FORMS))
    if len(flows) > MAX_FLOWS:
        raise UsageError(f"invalid competing {value!r}: {len(flows)} flows, at most {MAX_FLOWS}; "
                         f"accepted: {FLOW_FORMS}")
    return flows


@dataclass(frozen=True)
class PathChange:
    kind: PathKind
    at_s: float
    text: str

    @property
    def client_side(self) -> bool:
        """Done by the client itself (gtlsclient), not by the router."""
        return self.kind in ("migrate", "migrate-nat")


_PATH = re.compile(r"^([a-z-]+)@(.*)$")


def parse_path(value: str) -> PathChange | None:
    items = _items(value, PATH_FORMS)
    if not items:
        return None
    if len(items) > 1:
        raise UsageError(f"invalid path {value!r}: one path change per run; accepted: {PATH_FORMS}")
    m = _PATH.match(items[0])
    if not m:
        raise UsageError(f"invalid path {value!r}: accepted: {PATH_FORMS}")
    kind = m.group(1)
    if kind not in PATH_KINDS:
        raise UsageError(f"invalid path {value!r}: unknown kind {kind!r}; accepted: {PATH_FORMS}")
    return PathChange(kind, parse_time(m.group(2), "path change time", PATH_FORMS, value), items[0])


def joined(value: object) -> str:
    """A scenario value given as a list -> the one-string form (comma-joined)."""
    if isinstance(value, list | tuple):
        return ",".join(str(x) for x in value)
    return "" if value is None else str(value)
