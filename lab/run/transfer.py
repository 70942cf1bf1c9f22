"""One transfer through the router: prepare the object, run the client, verify what it measured."""

from __future__ import annotations

import contextlib
import time

from lab import agent, docker, objects
from lab.endpoints import check_server
from lab.endpoints.base import ClientAdapter
from lab.endpoints.registry import UNSUPPORTED_EXIT, registry
from lab.errors import EnvironmentProblem
from lab.models import ClientReport, TransferRequest, TransferResult
from lab.protocols import Protocol

#: Extra time a transfer's `docker exec` gets beyond the transfer timeout before the lab calls the container frozen.
EXEC_MARGIN_S = 30.0


def unsupported_result(client: str, server: str, protocol: Protocol, size: int, why: str) -> TransferResult:
    """A combination the registry says cannot run: recorded as unsupported, never run, never a failure."""
    return TransferResult(
        ok=False, failure=f"unsupported: {why}", protocol=protocol, http_version="", client=client, server=server,
        size=size, bytes=0, sha256_expected="", sha256="", handshake_s=None, ttfb_s=None, total_s=None,
        goodput_bps=None, wall_s=0.0, exit_code=UNSUPPORTED_EXIT, unsupported=True)


def run_transfer(client: ClientAdapter, server: str, protocol: Protocol, size: int,
                 timeout_s: float, cc: str | None = None, env: dict[str, str] | None = None,
                 port: int | None = None) -> TransferResult:
    """One transfer of a `size`-byte object from `server`. Whether the combination can run at all is the caller's
    question, asked once (a sweep: lab/plan/support.py; `quiclab run`: lab/cli/run.py)."""
    target = check_server(server)
    expected_sha = objects.ensure(size)
    request = TransferRequest(protocol=protocol, size=size, url=target.url(objects.path_for(size), port),
                              timeout_s=timeout_s, cc=cc, env=env or {})
    start = time.monotonic()
    try:
        # the wrapper bounds the client by the timeout itself; the deadline here catches a frozen container
        out = agent.run(client.container, client.command(request), timeout_s=timeout_s + EXEC_MARGIN_S)
    except docker.DockerError as e:
        if e.return_code != UNSUPPORTED_EXIT:
            # the wrappers always print a JSON line and exit 0: a non-zero exit is the harness or Docker failing
            raise EnvironmentProblem(f"could not run {client.name} in {client.container} (exit {e.return_code}): "
                                     f"{e.reason()}") from None
        report = ClientReport(exit_code=UNSUPPORTED_EXIT, error=f"unsupported: {e.reason()}")
    else:
        report = client.parse(out)
        if report.exit_code == -1:  # no JSON line: the wrapper did not finish (killed, container stopping)
            raise EnvironmentProblem(f"{client.name} in {client.container}: {report.error}")
    wall = time.monotonic() - start
    return verify(request, report, expected_sha, client=client.name, server=server, wall_s=wall)


def verify(request: TransferRequest, report: ClientReport, expected_sha: str, *, client: str, server: str,
           wall_s: float) -> TransferResult:
    """Check the report against the request: exit status, protocol actually used, size and hash."""
    failure = failure_reason(request, report, expected_sha)
    total = report.total_s
    goodput = report.bytes * 8 / total if (not failure and total) else None
    return TransferResult(
        ok=not failure, failure=failure, protocol=request.protocol, http_version=report.http_version,
        client=client, server=server, size=request.size, bytes=report.bytes, sha256_expected=expected_sha,
        sha256=report.sha256, handshake_s=report.handshake_s, ttfb_s=report.ttfb_s, total_s=total,
        goodput_bps=goodput, wall_s=wall_s, exit_code=report.exit_code,
        unsupported=report.exit_code == UNSUPPORTED_EXIT, client_rcvbuf_drops=report.udp_rcvbuf_drops,
        timed_out=report.timed_out and bool(failure),
    )


def failure_reason(request: TransferRequest, report: ClientReport, expected_sha: str) -> str:
    if report.exit_code == UNSUPPORTED_EXIT:
        return report.error or "unsupported (exit code 127)"
    if report.exit_code != 0:
        return f"client exit code {report.exit_code}: {report.error or 'no message'}"
    if report.http_version != request.protocol.http_version:
        return (f"asked for {request.protocol.label} but HTTP/{report.http_version or '?'} was used")
    if report.bytes != request.size:
        return f"received {report.bytes} bytes, the object has {request.size}"
    if report.sha256 != expected_sha:
        return f"SHA-256 mismatch: got {report.sha256[:16]}…, the object's is {expected_sha[:16]}…"
    return ""


def stop_clients() -> None:
    """After Ctrl-C: no transfer left running in a client container (each client's registered processes)."""
    from lab import docker

    reg = registry()
    for name in reg.names("client"):
        impl = reg.client(name)
        for pattern in impl.processes:
            with contextlib.suppress(EnvironmentProblem):
                docker.exec_in(impl.container, ["pkill", "-f", pattern], timeout_s=10)
