"""Reading a child process's output line by line against a deadline (the client agent's JSON lines, the router's
`nft -i`): bytes are buffered between calls, so a line split across reads or several lines in one read are whole."""

from __future__ import annotations

import os
import select
import time
from typing import IO


class LineReader:
    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._buf = b""

    def read_line(self, deadline: float) -> str | None:
        """The next line without its newline; None if the stream ended or the deadline (time.monotonic) passed."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")

    def rest(self) -> bytes:
        """What was read past the last line returned (and is no longer in the stream): handed over once."""
        rest, self._buf = self._buf, b""
        return rest
