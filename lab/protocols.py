"""The application protocols quiclab compares."""

from __future__ import annotations

from enum import StrEnum

from lab.errors import UsageError


class Protocol(StrEnum):
    H1 = "h1"
    H2 = "h2"
    H3 = "h3"

    @property
    def http_version(self) -> str:
        """What curl's %{http_version} reports when this protocol was really used."""
        return {"h1": "1.1", "h2": "2", "h3": "3"}[self.value]

    @property
    def transport(self) -> str:
        return "quic" if self is Protocol.H3 else "tcp"

    @property
    def label(self) -> str:
        return {"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}[self.value]


_ALIASES = {
    "h1": "h1", "h1.1": "h1", "http1.1": "h1", "http/1.1": "h1", "1.1": "h1",
    "h2": "h2", "http2": "h2", "http/2": "h2", "2": "h2",
    "h3": "h3", "http3": "h3", "http/3": "h3", "3": "h3",
}


def parse_protocol(text: str) -> Protocol:
    try:
        return Protocol(_ALIASES[text.strip().lower()])
    except KeyError:
        raise UsageError(f"unknown protocol {text!r}: allowed are h1 (HTTP/1.1), h2 (HTTP/2), h3 (HTTP/3)") from None
