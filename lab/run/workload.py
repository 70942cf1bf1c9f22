"""One run of a workload, for the sweep runner's one dispatch point (lab/run/runner.py execute()):

    w = workload_of(run.point)
    kinds = capture_kinds(w, ctx.capture)                      # resume/0rtt always capture pcap + keylog
    result = run_workload(...) if handles(adapter, w) else run_transfer(...)   # bulk: today's transfer

Whether a client can run a workload is decided once per run before anything runs (lab/plan/support.py); the
workload's columns, objects.csv and the resume/0rtt proof are the workload probe's (lab/run/probes.py
WorkloadColumns, with `wire_connections` and `prove_sessions` here).

run_workload returns a WorkloadRun: a TransferResult (so the runner records it like a transfer: total_s is the
workload's time, goodput the bits of all objects over it, sha256_ok that every object's hash matched) with the
workload's own results beside it.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pydantic import Field

from lab import agent, compose, docker
from lab.endpoints import check_server
from lab.endpoints.base import ClientAdapter
from lab.endpoints.registry import UNSUPPORTED_EXIT, registry
from lab.errors import EnvironmentProblem
from lab.evidence import pcap, sessions
from lab.evidence.capture import Evidence
from lab.models import TransferResult
from lab.plan.plan import Point
from lab.protocols import Protocol
from lab.run.transfer import EXEC_MARGIN_S, unsupported_result
from lab.workloads import pages
from lab.workloads.result import ObjectTiming, WorkloadResult, verify_objects
from lab.workloads.spec import Workload


class WorkloadRun(TransferResult):
    workload: str = "bulk"
    objects_timed: list[ObjectTiming] = Field(default_factory=list)
    page_time_s: float | None = None
    connections: int | None = None
    handshakes: int | None = None
    resumed: bool | None = None
    early_data: bool | None = None
    sessions_early: bool | None = None  # resume/0rtt: whether 0-RTT was asked for (annotate checks the capture)


def workload_of(point: Point) -> Workload:
    return point.settings.workload


def capture_kinds(w: Workload, asked: tuple[str, ...]) -> tuple[str, ...]:
    """What to capture for the run: resume/0rtt are proven from the decrypted capture, so they always get pcap
    and keylog (in the capture module's order)."""
    if not w.sessions:
        return asked
    return tuple(k for k in ("pcap", "keylog", "qlog") if k in {*asked, "pcap", "keylog"})


def _unsupported(adapter: ClientAdapter, server: str, protocol: Protocol, w: Workload, size: int,
                 why: str) -> WorkloadRun:
    base = unsupported_result(adapter.name, server, protocol, size, why)
    return WorkloadRun(**base.model_dump(), workload=w.label())


def run_workload(adapter: ClientAdapter, server: str, protocol: Protocol, w: Workload, point_size: int,
                 timeout_s: float, *, cc: str | None = None, env: dict[str, str] | None = None,
                 port: int | None = None) -> WorkloadRun:
    size = w.object_size(point_size)
    target = check_server(server)
    n = w.objects
    if w.sessions:
        from lab import objects as bulk_objects

        sha = bulk_objects.ensure(size)
        expected = {"first": sha, "second": sha}
        url = target.url(bulk_objects.path_for(size), port)
        argv = adapter.workload_command(w, protocol, url, list(expected), timeout_s,  # type: ignore[attr-defined]
                                        env or {}, cc)
    else:
        expected = pages.ensure(n, size)
        base = target.url(pages.path_for(n, size), port)
        argv = adapter.workload_command(w, protocol, base, list(expected), timeout_s,  # type: ignore[attr-defined]
                                        env or {}, cc)
    start = time.monotonic()
    try:
        out = agent.run(adapter.container, argv, timeout_s=timeout_s + EXEC_MARGIN_S + 30)
    except docker.DockerError as e:
        message = e.reason(300)
        if e.return_code == UNSUPPORTED_EXIT:
            return _unsupported(adapter, server, protocol, w, w.total_bytes(point_size), message)
        raise EnvironmentProblem(f"could not run {adapter.name} in {adapter.container} (exit {e.return_code}): "
                                 f"{message}") from None
    wall = time.monotonic() - start
    parsed = adapter.parse_workload(w, out)  # type: ignore[attr-defined]
    report, reports = parsed.report, parsed.objects
    if report.exit_code == -1:
        raise EnvironmentProblem(f"{adapter.name} in {adapter.container}: {report.error}")
    if w.sessions:  # the second connection is the measured one; the first must have worked too
        first = [r for r in reports if r.name == "first"]
        res = verify_objects(reports, expected, protocol, size, parallel=False, exit_code=report.exit_code,
                             error=report.error, timed_out=report.timed_out)
        second = [o for o in res.objects if o.name == "second"]
        res.page_time_s = (second[0].done_s - second[0].start_s) if second else None
        if not res.failure and not first:
            res.failure = "the first connection reported nothing"
        total = size
    else:
        res = verify_objects(reports, expected, protocol, size, parallel=w.kind == "page" or w.kind == "bulk",
                             exit_code=report.exit_code, error=report.error, origin=parsed.page_start,
                             extra_connections=parsed.extra_connections, timed_out=report.timed_out)
        total = w.total_bytes(point_size)
        if not res.ok and not res.unsupported:
            problem = pages.changed(n, size)
            if problem:
                raise EnvironmentProblem(f"{res.failure} — and the lab is not sound: {problem}")
    res.client_rcvbuf_drops = report.udp_rcvbuf_drops
    return _as_run(adapter.name, server, protocol, w, res, total, expected, wall)


def _as_run(client: str, server: str, protocol: Protocol, w: Workload, res: WorkloadResult, total: int,
            expected: dict[str, str], wall: float) -> WorkloadRun:
    manifest = hashlib.sha256("".join(f"{k} {v}\n" for k, v in expected.items()).encode()).hexdigest()
    t = res.page_time_s if res.page_time_s and res.page_time_s > 0 else None
    return WorkloadRun(
        ok=res.ok, failure=res.failure, protocol=protocol, http_version=res.http_version, client=client,
        server=server, size=total, bytes=res.bytes,
        sha256_expected=manifest, sha256=manifest if res.ok else "", handshake_s=res.handshake_s,
        ttfb_s=res.ttfb_s, total_s=t, goodput_bps=total * 8 / t if (t and res.ok) else None, wall_s=wall,
        exit_code=res.exit_code, timed_out=res.timed_out, client_rcvbuf_drops=res.client_rcvbuf_drops,
        workload=w.label(),
        objects_timed=res.objects, page_time_s=t, connections=res.connections, handshakes=res.handshakes,
        sessions_early=(w.kind == "0rtt") if w.sessions else None)


def client_ip(client: str) -> str:
    """The address a client's container has on clientnet (docker-compose.yml's, in this lab)."""
    container = registry().client(client).container
    ip = compose.address(container, "client")
    if ip is None:
        raise EnvironmentProblem(f"client {client!r}: its container {container} has no fixed address on the client "
                                 "network in docker-compose.yml")
    return ip


def wire_connections(ev: Evidence, server: str, client: str) -> int | None:
    """Connections from the client to the server in the router's client-side capture (None without one): distinct
    client ports (one per TCP connection; one per QUIC connection's socket, as curl, gtlsclient and chromium
    open them)."""
    path = ev.find("client-side.pcap")
    if path is None:
        return None
    impl = registry().server(server)
    port = ev.server_port or impl.port or 443
    try:
        packets = pcap.read_pcap(path.read_bytes())
    except (OSError, pcap.PcapError):
        return None
    return len({(p.proto, p.sport) for p in packets if p.src == client and p.dst == impl.address and p.dport == port})


def prove_sessions(client: str, result: WorkloadRun, ev: Evidence) -> dict[str, Any]:
    """A resume/0rtt run's proof from its decrypted capture, as columns; a run that does not show what it asked
    for fails with the reason (status, failure, no goodput)."""
    capture_file, keys = ev.find("client-side.pcap"), ev.find("keys.log")
    if capture_file is None or keys is None:
        raise EnvironmentProblem("a resume/0rtt run needs its capture and key log, and one is missing: "
                                 f"{'; '.join(ev.problems) or 'no files'}")
    ip = client_ip(client)
    v = sessions.analyze(sessions.inspect(capture_file, keys, ip), ip, bool(result.sessions_early))
    out: dict[str, Any] = {"handshakes": v.handshakes, "connections": len(v.connections), "resumed": v.resumed,
                           "early_data": v.early_data if result.sessions_early else None}
    if v.failure:
        out.update(status="failed", failure=v.failure, goodput_bps=None)
    return out
