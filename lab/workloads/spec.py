"""Workload strings: what one run does on the wire (a scenario dimension, sweepable like size).

    bulk            one object of the point's size on one fresh connection (every run before workloads existed)
    bulk:SIZE       the same, with its own size
    page:NxSIZE     a page of N objects of SIZE each, loaded at once: HTTP/2 and HTTP/3 multiplexed on one
                    connection, HTTP/1.1 over up to 6 parallel connections (as browsers do)
    reuse:NxSIZE    N requests one after the other on one connection
    new:NxSIZE      N requests one after the other, each on a new connection with a full handshake
    resume:SIZE     a first connection fetches the object and keeps its TLS session; a second connection resumes
                    that session (no Certificate in its handshake) and fetches it again: the second is measured
    0rtt:SIZE       as resume, and the second connection sends its request as 0-RTT early data; a run that asked
                    for 0-RTT and did not get it fails with that reason

Sans-IO: strings in, a Workload out; a bad string is one UsageError naming the value and the accepted forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from lab.errors import UsageError
from lab.sizes import format_size, parse_size

Kind = Literal["bulk", "page", "reuse", "new", "resume", "0rtt"]
KINDS: tuple[Kind, ...] = ("bulk", "page", "reuse", "new", "resume", "0rtt")
FORMS = "bulk, bulk:SIZE, page:NxSIZE, reuse:NxSIZE, new:NxSIZE, resume:SIZE, 0rtt:SIZE (e.g. page:50x20kB)"
MAX_OBJECTS = 500
#: the most objects of a page or sequence, and the most bytes a multi-object workload may move in one run
MAX_TOTAL_BYTES = 2 * 10**9
#: parallel connections an HTTP/1.1 page load uses (what browsers do per origin)
H1_CONNECTIONS = 6
_COUNTED = re.compile(r"^(\d+)\s*[xX]\s*(.+)$")


@dataclass(frozen=True)
class Workload:
    kind: Kind
    objects: int            # requests the run makes that are measured (bulk, resume, 0rtt: 1)
    size: int | None        # bytes per object; None for plain "bulk" (the point's size)

    @property
    def multi(self) -> bool:
        """Several objects per run (page, reuse, new)."""
        return self.kind in ("page", "reuse", "new")

    @property
    def sessions(self) -> bool:
        """Two connections, the second resuming the first's TLS session (resume, 0rtt)."""
        return self.kind in ("resume", "0rtt")

    def object_size(self, point_size: int) -> int:
        return self.size if self.size is not None else point_size

    def total_bytes(self, point_size: int) -> int:
        return self.objects * self.object_size(point_size)

    def label(self) -> str:
        """The canonical string (what runs.csv records)."""
        if self.size is None:
            return self.kind
        size = _exact(self.size)
        return f"{self.kind}:{self.objects}x{size}" if self.multi else f"{self.kind}:{size}"


def _exact(n: int) -> str:
    """A size as written without loss: 20kB, 1MB, 1500B."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def _bad(text: str, why: str = "") -> UsageError:
    return UsageError(f"invalid workload {text!r}{': ' + why if why else ''}: allowed are {FORMS}")


def _size(text: str, whole: str) -> int:
    try:
        n = parse_size(text)
    except UsageError:
        raise _bad(whole, f"{text.strip()!r} is not a size") from None
    if n < 1:
        raise _bad(whole, "objects must have at least 1 byte")
    return n


def parse_workload(text: str) -> Workload:
    """`page:50x20kB` -> Workload(page, 50, 20000); anything else -> a one-line UsageError."""
    raw = str(text)
    s = raw.strip()
    kind, sep, arg = s.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise _bad(raw)
    if kind == "bulk":
        return Workload("bulk", 1, _size(arg, raw) if sep else None)
    if not sep or not arg.strip():
        raise _bad(raw, f"{kind} needs {'NxSIZE' if kind in ('page', 'reuse', 'new') else 'SIZE'}")
    if kind in ("resume", "0rtt"):
        return Workload(kind, 1, _size(arg, raw))
    m = _COUNTED.match(arg.strip())
    if not m:
        raise _bad(raw, f"{kind} needs NxSIZE (a count of objects, x, their size)")
    n = int(m.group(1))
    if not 1 <= n <= MAX_OBJECTS:
        raise _bad(raw, f"the number of objects must be 1 to {MAX_OBJECTS}")
    size = _size(m.group(2), raw)
    if n * size > MAX_TOTAL_BYTES:
        raise _bad(raw, f"at most {format_size(MAX_TOTAL_BYTES)} in all")
    return Workload(kind, n, size)  # type: ignore[arg-type]


def handles(adapter: object, w: Workload) -> bool:
    """Whether a run of `w` with this client adapter goes through the workload runner (else: the plain transfer).
    Clients that cannot fetch one bare object (the browser: `bulk_as_page`) load bulk as a page of one object."""
    return w.kind != "bulk" or bool(getattr(adapter, "bulk_as_page", False))
