"""curl 8.14 (HTTP/1.1, HTTP/2 over TLS; HTTP/3 over QUIC with OpenSSL's QUIC stack + nghttp3)."""

from __future__ import annotations

import json

from lab import config
from lab.endpoints.registry import Implementation, registry
from lab.models import ClientReport, TransferRequest
from lab.protocols import Protocol

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
            "--silent", "--show-error",
            "--cacert", config.CA_FILE,
            "--max-time", f"{request.timeout_s:g}",
            "--connect-timeout", f"{min(request.timeout_s, 30):g}",
            request.url,
        ]

    def parse(self, stdout: str) -> ClientReport:
        return parse_fetch_json(stdout)


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
    )


def _count(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _positive(v: object) -> float | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if f > 0 else None
