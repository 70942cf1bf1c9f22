"""Headless chromium (Debian's, images/client-browser), driven over WebDriver by quiclab-browse: it loads the
workload's generated test page and reports Navigation and Resource Timing per object, with nextHopProtocol.

What is verified per object: the protocol the browser used (nextHopProtocol, h3 when asked), the body's byte count
and its SHA-256 computed in the page (crypto.subtle.digest) against the server's manifest; the page itself must
have come over the protocol asked for. The lab CA is trusted through a fresh NSS database per run (no
certificate errors are ignored). bulk runs load a page of one object of the point's size (`bulk_as_page`)."""

from __future__ import annotations

from lab import config
from lab.endpoints.registry import Implementation, registry
from lab.models import ClientReport, TransferRequest
from lab.protocols import Protocol
from lab.workloads import curl as workload_curl
from lab.workloads.result import ParsedRun
from lab.workloads.spec import Workload


class BrowserClient:
    bulk_as_page = True

    def __init__(self, impl: Implementation | None = None) -> None:
        impl = impl or registry().client("chromium")
        self.name, self.container, self.protocols = impl.name, impl.container, impl.protocols
        self.processes = impl.processes

    def command(self, request: TransferRequest) -> list[str]:
        raise NotImplementedError("the browser loads pages only (lab/workloads)")

    def parse(self, stdout: str) -> ClientReport:
        raise NotImplementedError("the browser loads pages only (lab/workloads)")

    def workload_unsupported(self, w: Workload, protocol: Protocol) -> str:
        return ""

    def workload_command(self, w: Workload, protocol: Protocol, base: str, names: list[str], timeout_s: float,
                         env: dict[str, str], cc: str | None = None) -> list[str]:
        values = {"PROTOCOL": protocol.value, "URL": f"{base}index.html", "TIMEOUT": f"{max(1, round(timeout_s))}",
                  "CA": config.CA_FILE, **env}
        return ["env", *(f"{k}={v}" for k, v in sorted(values.items())), "quiclab-browse"]

    def parse_workload(self, w: Workload, stdout: str) -> ParsedRun:
        return workload_curl.parse(stdout)  # quiclab-page-fetch's JSON shape, with page_start
