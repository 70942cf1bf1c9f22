"""Endpoint adapters. A client adapter turns a TransferRequest into a command for its container and reads the
result back; adding a client means one adapter here and one stanza in images/."""

from __future__ import annotations

from lab.endpoints.base import ClientAdapter
from lab.endpoints.curl import CurlClient
from lab.errors import UsageError

CLIENTS: dict[str, ClientAdapter] = {a.name: a for a in (CurlClient(),)}
SERVERS: tuple[str, ...] = ("nginx",)


def get_client(name: str) -> ClientAdapter:
    try:
        return CLIENTS[name]
    except KeyError:
        raise UsageError(f"unknown client {name!r}: allowed are {', '.join(sorted(CLIENTS))}") from None


def check_server(name: str) -> str:
    if name not in SERVERS:
        raise UsageError(f"unknown server {name!r}: allowed are {', '.join(SERVERS)}")
    return name
