"""One transfer through the router: prepare the object, run the client, verify what it measured."""

from __future__ import annotations

import time

from python_on_whales.exceptions import DockerException

from lab import objects
from lab.endpoints.base import ClientAdapter
from lab.models import ClientReport, TransferRequest, TransferResult
from lab.protocols import Protocol


def run_transfer(client: ClientAdapter, server: str, protocol: Protocol, size: int,
                 timeout_s: float) -> TransferResult:
    from lab import docker

    expected_sha = objects.ensure(size)
    request = TransferRequest(protocol=protocol, size=size, url=objects.url_for(size), timeout_s=timeout_s)
    start = time.monotonic()
    try:
        report = client.parse(docker.exec_in(client.container, client.command(request)))
    except DockerException as e:
        report = ClientReport(exit_code=-1, error=f"could not run {client.name}: {(e.stderr or str(e)).strip()}")
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
    )


def failure_reason(request: TransferRequest, report: ClientReport, expected_sha: str) -> str:
    if report.exit_code != 0:
        return f"client exit code {report.exit_code}: {report.error or 'no message'}"
    if report.http_version != request.protocol.http_version:
        return (f"asked for {request.protocol.label} but HTTP/{report.http_version or '?'} was used")
    if report.bytes != request.size:
        return f"received {report.bytes} bytes, the object has {request.size}"
    if report.sha256 != expected_sha:
        return f"SHA-256 mismatch: got {report.sha256[:16]}…, the object's is {expected_sha[:16]}…"
    return ""
