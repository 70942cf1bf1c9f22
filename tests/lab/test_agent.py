"""The per-run command path (lab/agent.py) on the real containers: the client's quiclab-agent (Python) and the
servers' shell agent give what `docker exec` gives (stdout, stderr, exit code), end an overrunning command, and an
agent killed under a command is the lab's failure (AgentLost, an EnvironmentProblem: never a result), replaced by a
new one for the next command."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from python_on_whales.exceptions import DockerException

from lab import agent, config, docker
from lab.errors import EnvironmentProblem

pytestmark = pytest.mark.lab

SCRIPT = "printf 'one two\\nthree'; echo \"it's stderr\" >&2"


@pytest.fixture(params=[(config.CLIENT_CONTAINER, "Agent"), (config.SERVER_CONTAINER, "ShellAgent")],
                ids=["python-agent-in-client", "shell-agent-in-server"])
def container(request: pytest.FixtureRequest, lab_up: None) -> str:
    name, kind = request.param
    agent.close_all()
    agent.run(name, ["true"], timeout_s=10)
    assert type(agent._agents[name]).__name__ == kind
    return name


def test_the_agent_answers_as_docker_exec_does(container: str):
    argv = ["sh", "-c", SCRIPT]
    assert agent.run(container, argv, timeout_s=10) == docker.exec_in(container, argv) == "one two\nthree"
    with pytest.raises(DockerException) as e:
        agent.run(container, ["sh", "-c", "echo partial; echo 'went wrong' >&2; exit 3"], timeout_s=10)
    assert e.value.return_code == 3 and "went wrong" in (e.value.stderr or "")
    # a command spanning lines, quotes and a multi-byte character go through unchanged
    text = "line 1\n'quoted' \"double\" $HOME \\ é"
    assert agent.run(container, ["printf", "%s", text], timeout_s=10) == text


def test_an_overrunning_command_is_ended(container: str):
    t0 = time.monotonic()
    with pytest.raises(DockerException) as e:
        agent.run(container, ["sleep", "30"], timeout_s=1.5)
    assert e.value.return_code == 124 and time.monotonic() - t0 < 5
    assert agent.run(container, ["echo", "still here"], timeout_s=10) == "still here"  # the same agent goes on


def test_an_agent_killed_under_a_command_is_the_labs_failure_and_replaced(container: str):
    first = agent._agents[container]
    errors: list[BaseException] = []

    def long_command() -> None:
        try:
            agent.run(container, ["sleep", "20"], timeout_s=30)
        except BaseException as e:  # what the caller of a run would see
            errors.append(e)

    worker = threading.Thread(target=long_command)
    worker.start()
    time.sleep(1.0)
    # the agent's own process in the container (the docker exec's child), as a crash or an OOM kill would end it
    pattern = "quiclab-agent serve" if container == config.CLIENT_CONTAINER else "quiclab-agent.*sh"
    subprocess.run(["docker", "exec", container, "pkill", "-KILL", "-f", pattern], capture_output=True, timeout=30)
    worker.join(timeout=30)
    assert not worker.is_alive()
    [error] = errors
    assert isinstance(error, EnvironmentProblem), repr(error)
    assert agent.run(container, ["echo", "again"], timeout_s=10) == "again"
    assert agent._agents[container] is not first
