"""Data crossing module boundaries: what a transfer asks for and what it measured."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from lab.protocols import Protocol


class TransferRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    protocol: Protocol
    size: int
    url: str
    timeout_s: float
    cc: str | None = None  # QUIC congestion control to ask the client for (where its registry entry allows)
    env: dict[str, str] = {}  # extra environment for the client (evidence: SSLKEYLOGFILE, QLOGDIR)


#: The wrappers' contract (docs/implementations.md): exit code 28 (curl's own) when the client gave up at its
#: timeout; the other wrappers map their clients' timeouts to it. Adapters read it into ClientReport.timed_out.
TIMEOUT_EXIT = 28


class ClientReport(BaseModel):
    """What a client adapter read from its client's output (not yet checked against the request)."""

    exit_code: int
    error: str = ""
    http_version: str = ""
    bytes: int = 0
    sha256: str = ""
    handshake_s: float | None = None
    ttfb_s: float | None = None
    total_s: float | None = None
    udp_rcvbuf_drops: int | None = None  # datagrams the client's own full UDP receive buffers dropped (not the link)
    timed_out: bool = False  # the client gave up at its timeout (the adapter says so from its client's output)


class TransferResult(BaseModel):
    """One verified (or failed) transfer. `ok` is true only if every check passed."""

    ok: bool
    failure: str = ""
    protocol: Protocol
    http_version: str
    client: str
    server: str
    size: int
    bytes: int
    sha256_expected: str
    sha256: str
    handshake_s: float | None
    ttfb_s: float | None
    total_s: float | None
    goodput_bps: float | None
    wall_s: float
    exit_code: int
    unsupported: bool = False  # the client or server cannot do this protocol (not run, or exit code 127)
    timed_out: bool = False  # the client gave up at its timeout (recorded as status "timeout")
    # Datagrams dropped in the client container because a UDP socket's receive buffer was full during the
    # transfer: losses the endpoint made, not the link (None: the client does not report it).
    client_rcvbuf_drops: int | None = None
