"""curl: 8.14 (Debian trixie; HTTP/3 over OpenSSL's QUIC stack + nghttp3) in quiclab-client and 8.23 (Debian
unstable; HTTP/3 over ngtcp2 + nghttp3) in quiclab-client-sid, through the same fetch command (quiclab-fetch in
images/client/agent.py)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from lab import config
from lab.endpoints.registry import Implementation, registry
from lab.models import TIMEOUT_EXIT, ClientReport, TransferRequest
from lab.protocols import Protocol
from lab.workloads import curl as workload_curl
from lab.workloads.result import ParsedRun
from lab.workloads.spec import Workload

# --http3 would silently fall back to TCP after ~100-200 ms; --http3-only never does.
_PROTOCOL_FLAGS = {Protocol.H1: "--http1.1", Protocol.H2: "--http2", Protocol.H3: "--http3-only"}


class CurlClient:
    def __init__(self, impl: Implementation | None = None) -> None:
        impl = impl or registry().client("curl")
        self.name, self.container, self.protocols = impl.name, impl.container, impl.protocols
        self.processes = impl.processes

    def command(self, request: TransferRequest) -> list[str]:
        # quiclab-fetch (images/client/agent.py) streams the body through SHA-256 and prints one JSON line.
        env = [f"{k}={v}" for k, v in sorted(request.env.items())]
        return [
            *(["env", *env] if env else []),
            "quiclab-fetch",
            _PROTOCOL_FLAGS[request.protocol],
            # The lab's networks are IPv4 only. Without this, curl 8.23 waited ~26 ms per connection for an IPv6
            # answer the lab's DNS never gives, counted in its connect, handshake and total times.
            "--ipv4",
            *_resolve(request.url),
            "--silent", "--show-error",
            "--cacert", config.CA_FILE,
            "--max-time", f"{request.timeout_s:g}",
            "--connect-timeout", f"{min(request.timeout_s, 30):g}",
            request.url,
        ]

    def parse(self, stdout: str) -> ClientReport:
        return parse_fetch_json(stdout)

    # workloads (lab/workloads): page, reuse, new, resume (HTTP/1.1) through quiclab-page-fetch
    def workload_unsupported(self, w: Workload, protocol: Protocol) -> str:
        return workload_curl.unsupported(w, protocol)

    def workload_command(self, w: Workload, protocol: Protocol, base: str, names: list[str], timeout_s: float,
                         env: dict[str, str], cc: str | None = None) -> list[str]:
        return workload_curl.command(w, protocol, base, names, timeout_s, env)

    def parse_workload(self, w: Workload, stdout: str) -> ParsedRun:
        return workload_curl.parse(stdout)


def _resolve(url: str) -> list[str]:
    """`--resolve host:port:address` for a lab server's URL, from the registry: curl connects to the address the
    registry names without asking /etc/hosts or DNS (the TLS name stays the host). Nothing for another URL."""
    server = registry().server_at(url)
    if server is None:
        return []
    return ["--resolve", f"{server.host}:{urlsplit(url).port or 443}:{server.address}"]


def parse_fetch_json(stdout: str) -> ClientReport:
    """Read the wrappers' JSON line: {"exit": N, "sha256": "...", "curl": curl's %{json} (or the same keys)}."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return ClientReport(exit_code=-1, error=f"unreadable client output: {line[:200]!r}")
    w = doc.get("curl") or {}
    exit_code = int(doc.get("exit", -1))
    return ClientReport(
        exit_code=exit_code,
        error=(w.get("errormsg") or "") if exit_code else "",
        http_version=str(w.get("http_version", "")),
        bytes=int(w.get("size_download", 0)),
        sha256=str(doc.get("sha256", "")),
        handshake_s=_positive(w.get("time_appconnect")),
        ttfb_s=_positive(w.get("time_starttransfer")),
        total_s=_positive(w.get("time_total")),
        udp_rcvbuf_drops=_count(doc.get("udp_rcvbuf_errors")),
        timed_out=exit_code == TIMEOUT_EXIT,
    )


def _count(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _positive(v: object) -> float | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if f > 0 else None
