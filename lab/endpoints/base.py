"""The client adapter contract (docs/implementations.md)."""

from __future__ import annotations

from typing import Protocol as TypingProtocol

from lab.models import ClientReport, TransferRequest
from lab.protocols import Protocol


class ClientAdapter(TypingProtocol):
    name: str
    container: str
    protocols: frozenset[Protocol]
    processes: tuple[str, ...]  # what to stop in `container` after Ctrl-C

    def command(self, request: TransferRequest) -> list[str]:
        """The argument list to run in `container` (never a shell string)."""
        ...

    def parse(self, stdout: str) -> ClientReport:
        """Read what the command printed (one JSON line; exit code 127 means "unsupported")."""
        ...
