"""The per-run command path (lab/agent.py) on the real containers: the client's quiclab-agent (Python) and the
servers' shell agent give what `docker exec` gives (stdout, stderr, exit code), end an overrunning command, and an
agent killed under a command is the lab's failure (AgentLost, an EnvironmentProblem: never a result), replaced by a
new one for the next command."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from lab import agent, config, docker
from lab.errors import EnvironmentProblem
from tests import client_agent
from tests.lab.parts import require_part

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
    with pytest.raises(docker.DockerError) as e:
        agent.run(container, ["sh", "-c", "echo partial; echo 'went wrong' >&2; exit 3"], timeout_s=10)
    assert e.value.return_code == 3 and "went wrong" in (e.value.stderr or "")
    # a command spanning lines, quotes and a multi-byte character go through unchanged
    text = "line 1\n'quoted' \"double\" $HOME \\ é"
    assert agent.run(container, ["printf", "%s", text], timeout_s=10) == text


def test_an_overrunning_command_is_ended(container: str):
    t0 = time.monotonic()
    with pytest.raises(docker.DockerError) as e:
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


# --- the client agent's prestarted curl ("spare", images/client/agent.py) ----------------------------------------

def _fetch_argv(client: str, protocol: str, size: int, env: dict[str, str] | None = None) -> list[str]:
    from lab import objects
    from lab.endpoints import get_client
    from lab.models import TransferRequest
    from lab.protocols import Protocol

    request = TransferRequest(protocol=Protocol(protocol), size=size, url=objects.url_for(size), timeout_s=30,
                              env=env or {})
    return get_client(client).command(request)


@pytest.mark.parametrize("client", ["curl", "curl-sid"])
def test_a_prestarted_curl_fetches_what_a_fresh_one_does(lab_up: None, client: str, monkeypatch: pytest.MonkeyPatch):
    """Each fetch after the first runs in the curl the agent started ahead of it (its options handed over as a
    config): every protocol verified, curl's own times present; a fetch with another environment, and every fetch
    with QUICLAB_CURL_SPARE=off, starts its own curl and gives the same."""
    import json

    from lab import objects
    from lab.endpoints import get_client

    if client == "curl-sid":
        require_part("sid")
    container = get_client(client).container
    size = 10_000
    digest = objects.ensure(size)

    def fetch(protocol: str, env: dict[str, str] | None = None) -> dict:
        time.sleep(0.05)  # the lab's own work between runs, during which the agent starts the next curl
        doc = json.loads(agent.run(container, _fetch_argv(client, protocol, size, env), timeout_s=60).splitlines()[-1])
        assert doc["exit"] == 0 and doc["sha256"] == digest, doc
        assert doc["curl"]["size_download"] == size and doc["curl"]["time_total"] > 0, doc
        assert doc["curl"]["http_version"] == {"h1": "1.1", "h2": "2", "h3": "3"}[protocol], doc
        return doc

    agent.close_all()
    firsts = [fetch(p)["prestarted"] for p in ("h1", "h2", "h3", "h3", "h2", "h1")]
    assert firsts == [False, True, True, True, True, True]
    # another environment: its own curl, and none is started ahead until two fetches in a row had the same (with a
    # key log file per run no started curl would ever be used)
    mark = {"QUICLAB_TEST_MARK": "1"}
    assert [fetch("h2", mark)["prestarted"] for _ in range(3)] == [False, False, True]
    monkeypatch.setenv(config.ENV_CURL_SPARE, "off")
    agent.close_all()
    assert [fetch(p)["prestarted"] for p in ("h1", "h3", "h3")] == [False, False, False]


def test_options_handed_over_as_a_config_are_the_options_given(lab_up: None):
    """curl_config's quoting read back by the real curl: the same argv as a command line and as `curl -K -` give
    the same output (write-out text with quotes, backslashes, tabs and spaces; a file:// URL)."""
    module = client_agent.load()
    argv = ["--silent", "-o", "/dev/null", "-w", 'a "quoted" \\ back\tslash %{url_effective} %{exitcode}\n',
            "file:///etc/hostname"]
    config_text = module.curl_config(argv)
    assert config_text is not None
    direct = subprocess.run(["docker", "exec", config.CLIENT_CONTAINER, "curl", *argv], capture_output=True,
                            text=True, timeout=30)
    via_config = subprocess.run(["docker", "exec", "-i", config.CLIENT_CONTAINER, "curl", "-K", "-"],
                                input=config_text, capture_output=True, text=True, timeout=30)
    assert direct.returncode == via_config.returncode == 0, (direct.stderr, via_config.stderr)
    assert via_config.stdout == direct.stdout and "quoted" in direct.stdout
    assert module.curl_config(["--not-an-option-we-know", "x"]) is None  # such a fetch starts its own curl


def test_no_curl_is_left_when_the_agent_ends(lab_up: None):
    """A spare curl waits between fetches; when the lab closes the agent (end of a sweep, Ctrl-C) it goes too."""
    from lab import objects

    objects.ensure(10_000)
    agent.close_all()
    agent.run(config.CLIENT_CONTAINER, _fetch_argv("curl", "h2", 10_000), timeout_s=60)
    waiting = docker.exec_in(config.CLIENT_CONTAINER, ["sh", "-c", "pgrep -fc '^curl -K -$' || true"]).strip()
    assert waiting == "1", "no spare curl waited after a fetch"
    agent.close_all()
    left = docker.exec_in(config.CLIENT_CONTAINER, ["sh", "-c", "pgrep -c curl || true"]).strip()
    assert left == "0", f"{left} curl process(es) left after the agent ended"
