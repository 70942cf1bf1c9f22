"""ngtcp2's example client gtlsclient (HTTP/3 only; GnuTLS, nghttp3), through quiclab-ngtcp2-fetch
(implemented in images/client/agent.py), which prints the same JSON line as curl's wrapper.

What it measures: total_s is the wall time of the gtlsclient process in the client container (connection set-up,
handshake and transfer, like curl's time_total); gtlsclient reports no handshake or first-byte time, so those
are None. gtlsclient has no option for a CA file and does not verify the server's certificate: the size and the
SHA-256 of the body are what the lab checks (as for every client)."""

from __future__ import annotations

from lab.endpoints.curl import parse_fetch_json
from lab.endpoints.registry import Implementation, registry
from lab.models import ClientReport, TransferRequest


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
        cc = request.cc or self.cc
        if cc:
            env.append(f"CC={cc}")
        env += [f"{k}={v}" for k, v in sorted(request.env.items())]
        return ["env", *env, "quiclab-ngtcp2-fetch"]

    def parse(self, stdout: str) -> ClientReport:
        return parse_fetch_json(stdout)  # the same JSON shape as curl's wrapper
