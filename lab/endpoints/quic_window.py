"""The QUIC client's flow-control window as a run dimension (`quic_window`, e.g. "200kB"): the receive window a
QUIC client grants its server, fixed at that size (connection and stream level, no auto-tuning), so that the
server can have at most that many bytes of the response in flight per round trip whatever its congestion control.
It stands in for a stack whose window did not grow (Connectify 2013's gQUIC moved a flat ~200 kB per round trip).

Only a QUIC client whose registry entry says `quic_window = true` can fix it (gtlsclient: --max-data,
--max-stream-data-bidi-local, --max-window and --max-stream-window all at the size); any other h3 client is
"unsupported" (recorded, never run with its own window instead). TCP runs are not affected: the setting names
QUIC's window, and a point's TCP runs are the uncapped baseline beside it. What a run did is in its behaviour: the
bytes it delivered per round trip (docs/seeds.md), and its transport parameters in a captured run's qlog."""

from __future__ import annotations

from lab.endpoints.registry import registry
from lab.errors import UsageError
from lab.protocols import Protocol
from lab.sizes import parse_size

#: the client's environment variable that carries the window (bytes) to its wrapper (images/client/agent.py)
ENV = "QUIC_WINDOW"
#: below this a window cannot hold one full packet's worth of stream data with headroom
MINIMUM = 4096


#: the value that leaves the client's own window (as "off" leaves a link key unset at a point)
OFF = "off"


def parse_quic_window(text: str) -> int | None:
    """A window size such as 200kB (at least 4 kB), or "off" (None: the client's own, auto-tuned window)."""
    if str(text).strip().lower() == OFF:
        return None
    try:
        size = parse_size(str(text))
    except (UsageError, ValueError):
        raise UsageError(f"invalid quic_window {text!r}: allowed is a size such as 200kB or 1MB, or off") from None
    if size < MINIMUM:
        raise UsageError(f"invalid quic_window {text!r}: allowed are sizes of at least {MINIMUM} bytes")
    return size


def unsupported(window: int | None, client: str, protocol: Protocol, workload: str = "bulk") -> str | None:
    """Why this run cannot have its QUIC window fixed (recorded as unsupported, not run), or None."""
    if window is None or protocol is not Protocol.H3:
        return None
    if workload != "bulk":
        return f"quic_window: only bulk downloads fix the window (not {workload} workloads)"
    reg = registry()
    if reg.client(client).quic_window:
        return None
    able = sorted(n for n, i in reg.implementations.items() if i.role == "client" and i.quic_window)
    return (f"quic_window: {client} cannot fix its QUIC flow-control window (only "
            f"{', '.join(able) or 'no registered client'} can)")


def client_env(window: int | None, protocol: Protocol) -> dict[str, str]:
    """What the client's wrapper is given for this run (nothing for TCP or without a window)."""
    return {ENV: str(window)} if window is not None and protocol is Protocol.H3 else {}
