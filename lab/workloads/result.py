"""What a multi-object run measured, and the arithmetic that turns per-object reports into a page result.

Sans-IO: client reports in (already parsed), a verified WorkloadResult out. Definitions (docs/results.md):
- parallel loads (page): page time = the last object's completion minus the first request's start, on one clock
  (each object's start = its completion time minus its own transfer time); per-object times are completion
  times from that start;
- sequential loads (reuse, new): page time = the sum of the requests' own times (gaps between them, e.g. a new
  client process per request, are not counted); per-object times are the cumulative sums;
- resume, 0rtt: the second (resuming) connection's request is the measured one; the first is set-up.
Every object is verified: the protocol actually used, the byte count and the SHA-256 against the server's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lab.models import ClientReport
from lab.protocols import Protocol


@dataclass(frozen=True)
class ObjectReport:
    """One object as a client reported it (not yet verified)."""

    name: str
    http_version: str = ""
    bytes: int = 0
    sha256: str = ""
    total_s: float | None = None    # the request's own time (start to last byte)
    done_at: float | None = None    # completion on a clock shared by the run's objects (parallel loads)
    new_connection: bool = False    # this request opened a connection (and made a TLS handshake)
    handshake_s: float | None = None  # from its start until its connection was secure (if it opened one)
    ttfb_s: float | None = None     # from its start to its first response byte
    error: str = ""


@dataclass(frozen=True)
class ParsedRun:
    """A client's report of a multi-object run (lab/workloads/curl.py parse)."""

    report: ClientReport
    objects: list[ObjectReport]
    page_start: float | None = None  # the page load's start on the objects' clock (the browser: its navigation)
    extra_connections: int = 0       # connections opened by requests that are not objects (the page itself)


@dataclass(frozen=True)
class ObjectTiming:
    """One verified object of a run: what objects.csv records."""

    name: str
    start_s: float       # from the run's first request
    done_s: float        # completion, from the run's first request
    bytes: int
    http_version: str
    ok: bool


@dataclass
class WorkloadResult:
    ok: bool
    failure: str
    http_version: str              # the one protocol every object used ("" if none or mixed)
    bytes: int                     # all objects' bytes received
    page_time_s: float | None      # the primary metric (see the module's docstring)
    handshake_s: float | None = None
    ttfb_s: float | None = None
    objects: list[ObjectTiming] = field(default_factory=list)
    connections: int | None = None  # connections the client opened
    handshakes: int | None = None   # TLS/QUIC handshakes made (full or resumed)
    resumed: bool | None = None     # the measured connection resumed a TLS session
    early_data: bool | None = None  # its request went as 0-RTT early data and the server accepted it
    exit_code: int = 0
    timed_out: bool = False  # the client gave up at its timeout (its adapter says so)
    unsupported: bool = False
    client_rcvbuf_drops: int | None = None
    evidence_checks: list[str] = field(default_factory=list)  # what the capture proved (resume, 0rtt)


def object_failure(o: ObjectReport, protocol: Protocol, size: int, expected_sha: str) -> str:
    """Why one object does not verify ("" when it does)."""
    if o.error:
        return f"object {o.name}: {o.error}"
    if o.http_version != protocol.http_version:
        return f"object {o.name}: asked for {protocol.label} but HTTP/{o.http_version or '?'} was used"
    if o.bytes != size:
        return f"object {o.name}: received {o.bytes} bytes, the object has {size}"
    if o.sha256 != expected_sha:
        return f"object {o.name}: SHA-256 mismatch"
    return ""


def timings(reports: Sequence[ObjectReport], parallel: bool,
            origin: float | None = None) -> tuple[float | None, list[tuple[float, float]]]:
    """(page time, [(start, done)] per report in order), both from the first request's start (or from `origin`,
    the page's own request, when it came earlier: the browser's navigation); None and [] if any report lacks its
    times."""
    if not reports or any(r.total_s is None for r in reports):
        return None, []
    if parallel:
        if any(r.done_at is None for r in reports):
            return None, []
        starts = [r.done_at - r.total_s for r in reports]  # type: ignore[operator]
        t0 = min(starts) if origin is None else min(origin, *starts)
        spans = [(s - t0, r.done_at - t0) for s, r in zip(starts, reports, strict=True)]  # type: ignore[operator]
        return max(d for _, d in spans), spans
    spans, t = [], 0.0
    for r in reports:
        spans.append((t, t + r.total_s))  # type: ignore[operator]
        t += r.total_s  # type: ignore[operator]
    return t, spans


def verify_objects(reports: Sequence[ObjectReport], expected: Mapping[str, str], protocol: Protocol, size: int,
                   *, parallel: bool, exit_code: int, error: str = "", origin: float | None = None,
                   timed_out: bool = False,
                   extra_connections: int = 0) -> WorkloadResult:
    """Check every expected object (each exactly once) and compute the page result."""
    by_name = {r.name: r for r in reports}
    failure = ""
    if exit_code != 0:
        failure = f"client exit code {exit_code}: {error or 'no message'}"
    missing = [n for n in expected if n not in by_name]
    if not failure and missing:
        failure = f"{len(missing)} of {len(expected)} objects were not received (first: {missing[0]})"
    if not failure and len(reports) != len(by_name):
        failure = "an object was reported twice"
    per_object = {r.name: object_failure(r, protocol, size, expected.get(r.name, "")) for r in reports}
    if not failure:
        failure = next((f for f in per_object.values() if f), "")
    ordered = [by_name[n] for n in expected if n in by_name]
    page_time, spans = timings(ordered, parallel, origin)
    if not failure and page_time is None:
        failure = "the client reported no times for some objects"
    objs = [ObjectTiming(r.name, s, d, r.bytes, r.http_version, not per_object[r.name])
            for r, (s, d) in zip(ordered, spans, strict=True)]
    versions = {r.http_version for r in ordered}
    firsts = sorted(zip(spans, ordered, strict=False), key=lambda x: x[0][0])
    handshake = next((s + r.handshake_s for (s, _), r in firsts if r.new_connection and r.handshake_s), None)
    ttfbs = [s + r.ttfb_s for (s, _), r in firsts if r.ttfb_s]
    return WorkloadResult(
        ok=not failure, failure=failure, http_version=versions.pop() if len(versions) == 1 else "",
        bytes=sum(r.bytes for r in ordered), page_time_s=page_time, objects=objs, handshake_s=handshake,
        ttfb_s=min(ttfbs) if ttfbs else None,
        connections=extra_connections + sum(1 for r in ordered if r.new_connection) if ordered else None,
        handshakes=extra_connections + sum(1 for r in ordered if r.new_connection) if ordered else None,
        exit_code=exit_code, timed_out=timed_out and bool(failure))

