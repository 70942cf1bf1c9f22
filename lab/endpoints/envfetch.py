"""Clients whose fetch command takes the endpoint contract in its environment and prints the common JSON line
itself (docs/implementations.md, "the endpoint contract"): aioquic's (`quiclab-aioquic-fetch`) and quic-go's
(`quiclab-quicgo-fetch`), each in its own client container. The command is the registry entry's first process.

What they measure, from inside the client process: `time_appconnect` when the QUIC handshake completed (aioquic's
connect() / quic-go's DialAddr returned), `time_starttransfer` when the response's header section arrived,
`time_total` when the last body byte was read, all from the process's own start of the connection attempt (its
interpreter or runtime start-up is not in them). Both verify the server's certificate against the lab CA
(`/certs/ca.pem`) for the server's host name while sending to the registry's address (HOST_ADDR, as curl's
--resolve). The lab checks protocol, size and SHA-256 as for every client."""

from __future__ import annotations

from lab.endpoints.curl import parse_fetch_json
from lab.endpoints.registry import Implementation, registry
from lab.models import ClientReport, TransferRequest


class EnvFetchClient:
    def __init__(self, impl: Implementation) -> None:
        self.name, self.container, self.protocols = impl.name, impl.container, impl.protocols
        self.processes = impl.processes
        self.fetch = impl.processes[0]
        # only a client whose congestion control can be chosen gets CC (its default when the run names none)
        self.cc = impl.quic_cc.describe() if impl.quic_cc and impl.quic_cc.settable else ""

    def command(self, request: TransferRequest) -> list[str]:
        env = [f"PROTOCOL={request.protocol.value}", f"URL={request.url}",
               f"TIMEOUT={max(1, round(request.timeout_s))}"]
        server = registry().server_at(request.url)
        if server is not None:  # the registry's address, not /etc/hosts or DNS
            env.append(f"HOST_ADDR={server.address}")
        cc = (request.cc or self.cc) if self.cc else ""
        if cc:
            env.append(f"CC={cc}")
        env += [f"{k}={v}" for k, v in sorted(request.env.items())]
        return ["env", *env, self.fetch]

    def parse(self, stdout: str) -> ClientReport:
        return parse_fetch_json(stdout)
