"""How the lab runs a command in an endpoint container for a measurement: `run(container, argv, timeout_s)`.

Every transfer, page load or other per-run command in a client container goes through here. Where the container's
image has `quiclab-agent` (images/client/agent.py), one long-lived `docker exec -i <container> quiclab-agent serve`
per container carries every command of a sweep as JSON lines (one `docker exec` costs ~80 ms on a 2-core host; a
request to the agent ~1 ms); elsewhere each command is one `docker exec`. The agent opens no port and holds no
privileges. The contract is the same either way: returns the command's stdout (without the final newline); raises
python-on-whales' DockerException with the exit code and stderr when the command exits non-zero, and
lab.docker.ExecTimeout when no answer comes in time. An agent that dies, does not answer in time or is cut off by
Ctrl-C is discarded (a new one starts with the next command) and the command in flight is the lab's failure,
never a result.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import subprocess
import tempfile
import time
from typing import IO, Any

from python_on_whales.exceptions import DockerException

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.lines import LineReader

START_TIMEOUT_S = 15.0


class AgentLost(EnvironmentProblem):
    """The agent process went away (container stopped or recreated, agent crashed)."""


class Agent:
    """One `quiclab-agent serve` in a container, spoken to over the stdin/stdout of `docker exec -i`."""

    def __init__(self, container: str) -> None:
        self.container = container
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the agent; close())
        self._proc = subprocess.Popen(["docker", "exec", "-i", container, "quiclab-agent", "serve"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      start_new_session=True)
        assert self._proc.stdout is not None
        self._lines = LineReader(self._proc.stdout)
        self._next_id = 0
        hello = self._read_line(time.monotonic() + START_TIMEOUT_S)
        if hello is None or json.loads(hello).get("agent") != "quiclab-agent":
            self.close()
            raise AgentLost(f"no quiclab-agent answered in {container}: {self._why()}")

    def _why(self) -> str:
        with contextlib.suppress(OSError):
            self._stderr.seek(0)
            text = " ".join(self._stderr.read().decode(errors="replace").split())
            if text:
                return text[-300:]
        code = self._proc.poll()
        return f"docker exec exited with {code}" if code is not None else "no answer"

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _read_line(self, deadline: float) -> str | None:
        """The next line from the agent, or None if it ended or the deadline passed."""
        return self._lines.read_line(deadline)

    def call(self, argv: list[str], timeout_s: float) -> tuple[int, str, str]:
        assert self._proc.stdin is not None
        self._next_id += 1
        request = {"id": self._next_id, "argv": argv, "timeout": timeout_s}
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except OSError:
            raise AgentLost(f"the agent in {self.container} is gone: {self._why()}") from None
        line = self._read_line(time.monotonic() + timeout_s)
        if line is None:
            if self.alive:
                raise docker.ExecTimeout(f"`{' '.join(argv[:2])}` in {self.container} did not answer within "
                                         f"{timeout_s:g} s: is the container frozen (`docker ps`, `quiclab status`)?")
            raise AgentLost(f"the agent in {self.container} ended: {self._why()}")
        answer: dict[str, Any] = json.loads(line)
        if answer.get("id") != self._next_id:
            raise AgentLost(f"the agent in {self.container} answered request {answer.get('id')}, not "
                            f"{self._next_id}")
        return int(answer["exit"]), str(answer.get("stdout", "")), str(answer.get("stderr", ""))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._proc.stdin:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()


_agents: dict[str, Agent] = {}
_without: set[str] = set()  # containers whose image has no agent: one docker exec per command


def _agent(container: str) -> Agent | None:
    agent = _agents.get(container)
    if agent is not None and agent.alive:
        return agent
    _agents.pop(container, None)
    if container in _without:
        return None
    try:
        has = docker.exec_in(container, ["sh", "-c", "command -v quiclab-agent || true"], timeout_s=10).strip()
    except DockerException as e:
        raise EnvironmentProblem(f"{container}: {(e.stderr or str(e)).strip()}") from None
    if not has:
        _without.add(container)
        return None
    _agents[container] = agent = Agent(container)
    return agent


#: QUICLAB_AGENT=off: one `docker exec` per command even where an agent exists (to compare, or to debug).
ENV_AGENT = config.ENV_AGENT


def enabled() -> bool:
    return config.agent_enabled()


def run(container: str, argv: list[str], timeout_s: float) -> str:
    agent = _agent(container) if enabled() else None
    if agent is None:
        return docker.exec_in(container, argv, timeout_s=timeout_s)
    try:
        code, out, err = agent.call(argv, timeout_s)
    except BaseException:  # Ctrl-C, a deadline, a lost agent: it may still be busy with this command
        _agents.pop(container, None)
        agent.close()
        raise
    if code != 0:
        raise DockerException(["quiclab-agent", container, *argv], code, out.encode(), err.encode())
    return out.removesuffix("\n")


@atexit.register
def close_all() -> None:
    """End every agent (their stdin closes; they exit). Also called when the lab goes down."""
    for agent in list(_agents.values()):
        agent.close()
    _agents.clear()
    _without.clear()
