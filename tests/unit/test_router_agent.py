"""The router's commands through its shell agent (lab/link/router.py, lab/agent.py): one long-lived `docker exec`
instead of one per command. Here the agent's shell loop (agent.SHELL_SERVE) runs on this host in place of
`docker exec -i ROUTER sh -c ...`: the same loop, the same requests and answers, without a container."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import pytest

from lab import agent, config, docker
from lab.errors import EnvironmentProblem
from lab.link import router


@pytest.fixture
def local_shell_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every agent is agent.SHELL_SERVE run by this host's sh (docker exec stripped off)."""
    def exec_in(container: str, command: list[str], timeout_s: float = docker.EXEC_TIMEOUT_S) -> str:
        return subprocess.run(command, capture_output=True, text=True, check=True, timeout=timeout_s).stdout.strip()

    monkeypatch.setattr(docker, "exec_in", exec_in)  # the agent's probe: which kind of agent the container can run
    monkeypatch.setattr(docker, "exec_args", lambda container, command, **_: list(command)[1:])
    monkeypatch.setattr(docker, "PROGRAM", "sh")
    monkeypatch.setattr(config, "agent_enabled", lambda: True)
    agent.close_all()
    yield
    agent.close_all()


def test_router_commands_go_through_the_agent_not_an_exec_each(monkeypatch: pytest.MonkeyPatch):
    seen: list[tuple[str, list[str], float]] = []

    def run(container: str, argv: list[str], timeout_s: float) -> str:
        seen.append((container, argv, timeout_s))
        return "linkem"

    def exec_in(*_: object, **__: object) -> str:
        raise AssertionError("a router command ran as a docker exec of its own")

    monkeypatch.setattr(agent, "run", run)
    monkeypatch.setattr(docker, "exec_in", exec_in)
    assert router.run("quiclab-router", "path") == "linkem"
    assert router.try_run("quiclab-router", "netem-probe") == (0, "")
    assert seen == [(config.ROUTER_CONTAINER, ["quiclab-router", "path"], docker.EXEC_TIMEOUT_S),
                    (config.ROUTER_CONTAINER, ["quiclab-router", "netem-probe"], docker.EXEC_TIMEOUT_S)]


@pytest.mark.parametrize(("raised", "expected"), [
    (docker.DockerError(["quiclab-agent", "r", "tc"], 2, b"", b"Error: bad qdisc\n"), (2, "Error: bad qdisc")),
    (agent.AgentLost("the agent in r ended: docker exec exited with 1"),
     (1, "the agent in r ended: docker exec exited with 1")),
])
def test_try_run_answers_a_failed_or_unreachable_command_with_a_code(monkeypatch: pytest.MonkeyPatch,
                                                                   raised: Exception, expected: tuple[int, str]):
    def run(*_: object, **__: object) -> str:
        raise raised

    monkeypatch.setattr(agent, "run", run)
    assert router.try_run("tc", "qdisc", "show") == expected


def test_a_router_that_does_not_answer_in_time_is_the_labs_failure_not_an_exit_code(monkeypatch: pytest.MonkeyPatch):
    def run(*_: object, **__: object) -> str:
        raise docker.ExecTimeout("`tc qdisc` in r did not answer within 30 s")

    monkeypatch.setattr(agent, "run", run)
    with pytest.raises(docker.ExecTimeout):
        router.try_run("tc", "qdisc", "show")


@pytest.mark.usefixtures("local_shell_agent")
def test_a_multi_line_script_runs_whole_and_its_failure_names_stderr():
    script = "set -e\nx='a b'\necho \"$x\" >/dev/null\nprintf '%s\\n' \"it's fine\"\n"
    router.run_script(script, "applying the link failed")
    assert router.run("bash", "-c", script) == "it's fine"
    with pytest.raises(EnvironmentProblem, match=r"^applying the link failed: Error: no such qdisc for: tc x$"):
        router.run_script("echo 'Error: no such qdisc' >&2\necho 'for: tc x' >&2\nexit 2\n", "applying the link failed")
    assert router.try_run("sh", "-c", "echo nope >&2; exit 3") == (3, "nope")


@pytest.mark.usefixtures("local_shell_agent")
def test_threads_sharing_the_routers_agent_take_turns():
    """A sweep's run and its adverse event (a rate step in the router) may ask at once: each gets its own answer."""
    results: dict[int, list[str]] = {0: [], 1: []}
    errors: list[BaseException] = []

    def ask(n: int) -> None:
        try:
            for i in range(15):
                results[n].append(router.run("sh", "-c", f"sleep 0.01; echo {n}-{i}"))
        except BaseException as e:  # reported by the test below
            errors.append(e)

    threads = [threading.Thread(target=ask, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert results == {n: [f"{n}-{i}" for i in range(15)] for n in (0, 1)}
