"""How the lab runs a command in an endpoint container for a measurement: `run(container, argv, timeout_s)`.

Every transfer, page load or other per-run command in a client container goes through here, and every command to
the router (lab/link/router.py). Where the container's image has `quiclab-agent` (images/client/agent.py), one
long-lived `docker exec -i <container> quiclab-agent serve` per container carries every command of a sweep as JSON
lines (one `docker exec` costs ~80 ms on a 2-core host; a request to the agent ~1 ms); in an image without it but
with a POSIX shell and coreutils (the servers, the router), a shell loop does the same (ShellAgent); elsewhere each
command is one `docker exec`. The agent opens no port and holds no privileges. The contract is the same either
way: returns the command's stdout (without the final newline); raises lab.docker.DockerError with the exit code and
stderr when the command exits non-zero, and lab.docker.ExecTimeout when no answer comes in time. An agent that
dies, does not answer in time or is cut off by Ctrl-C is discarded (a new one starts with the next command) and the
command in flight is the lab's failure, never a result. Threads take turns on one agent.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import math
import shlex
import subprocess
import tempfile
import threading
import time
from typing import IO, Any

from lab import config, docker
from lab.errors import EnvironmentProblem

START_TIMEOUT_S = 15.0


class AgentLost(EnvironmentProblem):
    """The agent process went away (container stopped or recreated, agent crashed)."""


class Agent:
    """One `quiclab-agent serve` in a container, spoken to over the stdin/stdout of `docker exec -i`."""

    serve: tuple[str, ...] = ("quiclab-agent", "serve")

    def __init__(self, container: str) -> None:
        self.container = container
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the agent; close())
        env = None if config.curl_spare_enabled() else {config.ENV_CURL_SPARE: "off"}
        # No lifetime deadline: an agent serves a whole sweep (days), and every request has its own (call(): one
        # that is not answered in time discards the agent, killed and waited for); a lifetime limit could only
        # cut a healthy agent in the middle of a request.
        self._proc = docker.Stream(docker.exec_args(container, self.serve, interactive=True, env=env),
                                   deadline_s=None, stdin=True, stdout=subprocess.PIPE, stderr=self._stderr)
        self._next_id = 0
        # One request at a time: a request and its answer are lines on one pipe, so two threads' requests (a sweep's
        # run and its adverse event's rate step, both in the router) must not interleave.
        self._lock = threading.Lock()
        hello = self._read_line(time.monotonic() + config.deadline(START_TIMEOUT_S))
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
        return self._proc.line(deadline)

    def request(self, argv: list[str], timeout_s: float) -> bytes:
        """One request as written to the agent's stdin."""
        return (json.dumps({"id": self._next_id, "argv": argv, "timeout": timeout_s}) + "\n").encode()

    def answer(self, line: str) -> tuple[int, int, str, str]:
        """(request id, exit code, stdout, stderr) from one answer line."""
        doc: dict[str, Any] = json.loads(line)
        return int(doc.get("id", -1)), int(doc["exit"]), str(doc.get("stdout", "")), str(doc.get("stderr", ""))

    def call(self, argv: list[str], timeout_s: float) -> tuple[int, str, str]:
        """Run argv through the agent; `timeout_s` is already this machine's (config.deadline: `run` scales it):
        the agent ends the command when it passes, and the answer is awaited a second longer. Threads take turns."""
        with self._lock:
            return self._call(argv, timeout_s)

    def _call(self, argv: list[str], timeout_s: float) -> tuple[int, str, str]:
        self._next_id += 1
        try:
            self._proc.send(self.request(argv, timeout_s))
        except OSError:
            raise AgentLost(f"the agent in {self.container} is gone: {self._why()}") from None
        line = self._read_line(time.monotonic() + timeout_s + 1)
        if line is None:
            if self.alive:
                raise docker.ExecTimeout(f"`{' '.join(argv[:2])}` in {self.container} did not answer within "
                                         f"{timeout_s:g} s: is the container frozen (`docker ps`, `quiclab status`)?")
            raise AgentLost(f"the agent in {self.container} ended: {self._why()}")
        try:
            rid, code, out, err = self.answer(line)
        except (ValueError, KeyError, IndexError):
            raise AgentLost(f"the agent in {self.container} answered {line[:100]!r}") from None
        if rid != self._next_id:
            raise AgentLost(f"the agent in {self.container} answered request {rid}, not {self._next_id}")
        return code, out, err

    def close(self) -> None:
        self._proc.close(grace_s=2)
        self._stderr.close()


#: The agent of images without quiclab-agent (the servers: no Python there): a POSIX shell loop over the same
#: `docker exec -i`. A request is three lines: id, timeout in seconds, and the command quoted for sh in base64 (it
#: may span lines) or "r/PATH" for `cat PATH` (read by the shell itself, no process started). The answer is one line
#: "ID EXIT b<stdout in base64> b<stderr in base64>", stdout as "p<word>" when it is one word of safe characters.
#: coreutils' timeout ends a command that overruns (exit 124). What the lab reads per run goes through it (the
#: server's congestion control, its listener): a /proc value in under 1 ms, another command ~8 ms, where a
#: `docker exec` takes ~90.
SHELL_SERVE = r"""
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
echo '{"agent": "quiclab-agent", "kind": "sh"}'
while IFS= read -r id && IFS= read -r limit && IFS= read -r cmd; do
  case $cmd in
    r/*)  # read one file with the shell's own `read` (no process started: a /proc or /sys value per run)
      out=; code=0
      { while IFS= read -r line || [ -n "$line" ]; do out=${out:+$out
}$line; done <"${cmd#r}"; } 2>"$err" || code=1 ;;
    *) out=$(timeout -k 1 "$limit" sh -c "$(printf '%s' "$cmd" | base64 -d)" </dev/null 2>"$err"); code=$? ;;
  esac
  e=; if [ -s "$err" ]; then e=$(base64 -w0 <"$err"); fi
  case $out in
    *[!A-Za-z0-9_.:/=+-]*) printf '%s %s b%s b%s\n' "$id" "$code" "$(printf '%s' "$out" | base64 -w0)" "$e" ;;
    *) printf '%s %s p%s b%s\n' "$id" "$code" "$out" "$e" ;;  # plain: one word of safe characters, as it is
  esac
done
"""
#: What a container needs for the shell agent.
SHELL_NEEDS = ("sh", "timeout", "base64", "mktemp")


class ShellAgent(Agent):
    serve = ("sh", "-c", SHELL_SERVE)

    def request(self, argv: list[str], timeout_s: float) -> bytes:
        if len(argv) == 2 and argv[0] == "cat" and argv[1].startswith("/") and "\n" not in argv[1]:
            command = f"r{argv[1]}"  # one file read in the shell itself
        else:
            command = base64.b64encode(shlex.join(argv).encode()).decode()
        return f"{self._next_id}\n{max(1, math.ceil(timeout_s))}\n{command}\n".encode()

    def answer(self, line: str) -> tuple[int, int, str, str]:
        rid, code, out, err = line.split(" ")
        text = out[1:] if out[:1] == "p" else base64.b64decode(out[1:]).decode(errors="replace")
        return int(rid), int(code), text, base64.b64decode(err[1:]).decode(errors="replace")


_agents: dict[str, Agent] = {}
_without: set[str] = set()  # containers whose image has no agent: one docker exec per command


_starting = threading.Lock()  # two threads asking one container at once start one agent between them


def _agent(container: str) -> Agent | None:
    with _starting:
        return _agent_locked(container)


def _agent_locked(container: str) -> Agent | None:
    agent = _agents.get(container)
    if agent is not None and agent.alive:
        return agent
    _agents.pop(container, None)
    if container in _without:
        return None
    probe = ("if command -v quiclab-agent >/dev/null; then echo python; "
             f"elif {' && '.join(f'command -v {x} >/dev/null' for x in SHELL_NEEDS)}; then echo sh; fi")
    try:
        kind = docker.exec_in(container, ["sh", "-c", probe], timeout_s=10).strip()
    except docker.DockerError as e:
        raise EnvironmentProblem(f"{container}: {e.reason()}") from None
    if kind not in ("python", "sh"):
        _without.add(container)
        return None
    _agents[container] = agent = Agent(container) if kind == "python" else ShellAgent(container)
    return agent


def warm(container: str) -> None:
    """Start the container's agent now (if it has one and agents are on), not with its first command."""
    if enabled():
        _agent(container)


#: QUICLAB_AGENT=off: one `docker exec` per command even where an agent exists (to compare, or to debug).
ENV_AGENT = config.ENV_AGENT


def enabled() -> bool:
    return config.agent_enabled()


def run(container: str, argv: list[str], timeout_s: float) -> str:
    agent = _agent(container) if enabled() else None
    if agent is None:
        return docker.exec_in(container, argv, timeout_s=timeout_s)
    try:
        code, out, err = agent.call(argv, config.deadline(timeout_s))  # (exec_in scales its own)
    except BaseException:  # Ctrl-C, a deadline, a lost agent: it may still be busy with this command
        _agents.pop(container, None)
        agent.close()
        raise
    if code != 0:
        raise docker.DockerError(["quiclab-agent", container, *argv], code, out.encode(), err.encode())
    return out.removesuffix("\n")


@atexit.register
def close_all() -> None:
    """End every agent (their stdin closes; they exit). Also called when the lab goes down."""
    for agent in list(_agents.values()):
        agent.close()
    _agents.clear()
    _without.clear()
