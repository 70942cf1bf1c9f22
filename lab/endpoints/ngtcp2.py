"""ngtcp2's example client gtlsclient (HTTP/3 only; GnuTLS, nghttp3), through quiclab-ngtcp2-fetch
(implemented in images/client/agent.py), which prints the same JSON line as curl's wrapper.

What it measures: total_s is the wall time of the gtlsclient process in the client container (connection set-up,
handshake and transfer, like curl's time_total). gtlsclient prints no times of its own: its wrapper sees the
handshake's end (its TLS key log gets the application secrets) and the first body byte (the first write into its
download folder) through inotify, as handshake_s and ttfb_s. gtlsclient has no option for a CA file and does not
verify the server's certificate: the size and the SHA-256 of the body are what the lab checks (as for every
client)."""

from __future__ import annotations

from lab.endpoints.curl import parse_fetch_json
from lab.endpoints.registry import Implementation, registry
from lab.models import ClientReport, TransferRequest
from lab.protocols import Protocol
from lab.workloads import curl as workload_curl
from lab.workloads.result import ParsedRun
from lab.workloads.spec import Workload


class Ngtcp2Client:
    def __init__(self, impl: Implementation | None = None) -> None:
        impl = impl or registry().client("gtlsclient")
        self.name, self.container, self.protocols = impl.name, impl.container, impl.protocols
        self.processes = impl.processes
        self.cc = impl.quic_cc.describe() if impl.quic_cc else ""

    def command(self, request: TransferRequest) -> list[str]:
        # The wrapper exits 127 (the contract's "unsupported") for anything but h3; the runner does not even
        # start it then (the registry says so first).
        env = [f"PROTOCOL={request.protocol.value}", f"URL={request.url}",
               f"TIMEOUT={max(1, round(request.timeout_s))}"]
        server = registry().server_at(request.url)
        if server is not None:  # the registry's address, not /etc/hosts or DNS (as curl's --resolve)
            env.append(f"HOST_ADDR={server.address}")
        cc = request.cc or self.cc
        if cc:
            env.append(f"CC={cc}")
        env += [f"{k}={v}" for k, v in sorted(request.env.items())]
        return ["env", *env, "quiclab-ngtcp2-fetch"]

    def parse(self, stdout: str) -> ClientReport:
        return parse_fetch_json(stdout)  # the same JSON shape as curl's wrapper

    # workloads (lab/workloads): resume and 0rtt through quiclab-ngtcp2-session (two connections, the second
    # resuming the first's session; 0rtt sends its request as early data)
    def workload_unsupported(self, w: Workload, protocol: Protocol) -> str:
        return ""

    def workload_command(self, w: Workload, protocol: Protocol, url: str, names: list[str], timeout_s: float,
                         env: dict[str, str], cc: str | None = None) -> list[str]:
        values = {"PROTOCOL": protocol.value, "URL": url, "TIMEOUT": str(max(1, round(timeout_s))),
                  "EARLY": "1" if w.kind == "0rtt" else "0", **env}
        if cc or self.cc:
            values["CC"] = cc or self.cc
        return ["env", *(f"{k}={v}" for k, v in sorted(values.items())), "quiclab-ngtcp2-session"]

    def parse_workload(self, w: Workload, stdout: str) -> ParsedRun:
        return workload_curl.parse(stdout)  # quiclab-page-fetch's JSON shape
