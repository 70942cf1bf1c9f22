"""The TCP sender's own view of a captured run: the server kernel's TCP_INFO of each connection as it closes
(`ss -tinHE`: sock_diag's destroy events), written beside the run's captures as `sender-socket.txt` and read by
`quiclab explain` (lab/explain/ss.py, docs/explain.md "The sender's kernel").

A one-shot helper container (the router's image, which has iproute2) shares the server's network namespace with
NET_ADMIN, which subscribing to destroy events needs; the server itself keeps no extra privilege. It is started just
before the transfer and is known to listen once it reports a loopback connection it made itself (inside the
server's namespace: nothing crosses the emulated link); after the transfer it is given a moment for the closing
connection's event, then removed. A helper that cannot start or listen costs the run nothing: the file is not
written and the explanation says the sender's kernel was not read.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from pathlib import Path

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.link import router

SENDER_SOCKET_TXT = "sender-socket.txt"
#: how long the helper may take to start listening, and how long a run's connection may take to close after it
READY_S = 8.0
CLOSE_WAIT_S = 1.0
#: the helper's whole life at most (a stuck one is killed by its deadline)
LIFE_S = 3600.0


class SocketWatch:
    """One run's helper: `start()` before the transfer, `collect()` after it (always call `stop()`)."""

    def __init__(self, server_container: str, port: int, client_ip: str) -> None:
        self.server, self.port, self.client_ip = server_container, port, client_ip
        self.name = f"{config.PROJECT}-helper-ss-{uuid.uuid4().hex[:10]}"
        self.stream: docker.Stream | None = None
        self.lines: list[str] = []
        self.problem = ""

    def start(self) -> bool:
        """Start the helper and wait until it listens; False (with `problem` set) if it does not."""
        try:
            image = router.image()
            self.stream = docker.Stream(
                ["run", "--rm", "--name", self.name, "--label", f"{config.PROJECT}.helper=1", "--network",
                 f"container:{self.server}", "--cap-add=NET_ADMIN", "--entrypoint", "stdbuf", image, "-oL", "ss",
                 "-tinHE"], deadline_s=LIFE_S, stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + config.deadline(READY_S)
            probe = f"exec 3<>/dev/tcp/127.0.0.1/{self.port}; exec 3>&-"
            while time.monotonic() < deadline:
                with contextlib.suppress(EnvironmentProblem):
                    docker.exec_in(self.name, ["bash", "-c", probe], timeout_s=5.0)
                line = self.stream.line(min(deadline, time.monotonic() + 0.5))
                while line is not None:
                    if "127.0.0.1" in line:
                        self._drain(time.monotonic() + 0.05)
                        return True
                    line = self.stream.line(time.monotonic() + 0.05)
            self.problem = f"the ss helper did not report its own test connection within {config.deadline(READY_S):g} s"
        except EnvironmentProblem as e:
            self.problem = f"the ss helper could not start: {e}"
        self.stop()
        return False

    def _drain(self, until: float) -> None:
        """Read what it printed up to `until` (the readiness lines are not the run's)."""
        assert self.stream is not None
        while self.stream.line(until) is not None:
            pass

    def collect(self, wait_s: float = CLOSE_WAIT_S) -> str:
        """The helper's lines about connections with the client (each socket: its address line and its info line),
        waiting up to `wait_s` for the first of them; then the helper is stopped."""
        if self.stream is None:
            return ""
        deadline = time.monotonic() + config.deadline(wait_s)
        got = False
        pending: str | None = None
        while True:
            line = self.stream.line(deadline if not got else time.monotonic() + config.deadline(0.2))
            if line is None:
                break
            if not line.startswith((" ", "\t")):
                pending = line if self.client_ip in line else None
            elif pending is not None:
                self.lines += [pending, line]
                pending, got = None, True
        self.stop()
        return "\n".join(self.lines) + ("\n" if self.lines else "")

    def stop(self) -> None:
        if self.stream is None:
            return
        with contextlib.suppress(EnvironmentProblem):
            docker.kill(self.name)
        self.stream.close(grace_s=2.0)
        self.stream = None


def write(folder: Path, text: str) -> Path:
    path = folder / SENDER_SOCKET_TXT
    path.write_text(text, encoding="utf-8")
    return path
