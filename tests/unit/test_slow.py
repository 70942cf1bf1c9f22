"""QUICLAB_SLOW (lab/config.py `deadline`): under emulation (scripts/vm.sh sets it in a TCG guest) every deadline of
the lab's own machinery is that many times longer, applied once where it is enforced; on a real host (unset) every
deadline is what it was. Exercised on the real enforcement paths with stand-ins for the docker program."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from lab import agent, config, docker, lab
from lab.errors import EnvironmentProblem, UsageError
from lab.run import environment
from tests import fake_docker as fake_docker_program

ROOT = Path(__file__).resolve().parents[2]

#: A stand-in docker program: `exec [-i] [-e K=V]... CONTAINER CMD...` runs CMD here; a container named *slow*
#: sleeps SLEEP seconds first (so a deadline either holds it or not).
FAKE_DOCKER = """#!/bin/sh
[ "$1" = exec ] || exit 2
shift
while [ "$1" = -i ] || [ "$1" = -e ]; do [ "$1" = -e ] && shift; shift; done
case $1 in *slow*) sleep "$SLEEP" ;; esac
shift
exec "$@"
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("QUICLAB_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(config, "ENV_FILE", tmp_path / ".env")
    return monkeypatch


@pytest.fixture
def fake_docker(tmp_path: Path, env: pytest.MonkeyPatch) -> Path:
    return fake_docker_program.install(tmp_path, env, FAKE_DOCKER)


def test_unset_the_factor_is_one_and_every_deadline_what_it_was(env):
    assert config.slow_factor() == 1.0
    assert config.deadline(30.0) == 30.0 and config.deadline(0.05) == 0.05


def test_the_factor_from_the_environment_or_dotenv_multiplies_every_deadline(env, tmp_path):
    (tmp_path / ".env").write_text("QUICLAB_SLOW=4\n")
    assert config.slow_factor() == 4.0 and config.deadline(30.0) == 120.0
    env.setenv(config.ENV_SLOW, "12.5")  # the environment wins
    assert config.deadline(2.0) == 25.0
    config.check_all()


@pytest.mark.parametrize("bad", ["0", "0.5", "-3", "abc", "nan", "inf", "101", "10x"])
def test_a_bad_factor_is_one_line_naming_it_and_what_is_allowed(env, bad):
    env.setenv(config.ENV_SLOW, bad)
    with pytest.raises(UsageError) as caught:
        config.check_all()
    message = str(caught.value)
    assert f"QUICLAB_SLOW {bad!r}" in message and "from 1 to 100" in message and "\n" not in message


def test_docker_exec_deadline_scales_once(fake_docker, env):
    """A command that answers after 0.6 s: past a 0.3 s deadline on a real host; within it at QUICLAB_SLOW=4 (1.2 s),
    the message naming the deadline in force."""
    env.setenv("SLEEP", "0.6")
    with pytest.raises(docker.ExecTimeout, match=r"within 0\.3 s"):
        docker.exec_in("slow-box", ["echo", "hi"], timeout_s=0.3)
    env.setenv(config.ENV_SLOW, "4")
    assert docker.exec_in("slow-box", ["echo", "hi"], timeout_s=0.3) == "hi"
    env.setenv("SLEEP", "5")
    t0 = time.monotonic()
    with pytest.raises(docker.ExecTimeout, match=r"within 0\.4 s"):  # 0.1 s x 4, not x 16: scaled once
        docker.exec_in("slow-box", ["echo", "hi"], timeout_s=0.1)
    assert time.monotonic() - t0 < 4


def test_a_command_without_an_agent_is_scaled_once_through_agent_run(fake_docker, env):
    """agent.run falls back to one docker exec (QUICLAB_AGENT=off): exec_in scales it, agent.run must not again."""
    env.setenv(config.ENV_AGENT, "off")
    env.setenv(config.ENV_SLOW, "2")
    env.setenv("SLEEP", "0.7")
    assert agent.run("slow-box", ["echo", "ok"], timeout_s=0.5) == "ok"  # 1.0 s in force
    with pytest.raises(docker.ExecTimeout, match=r"within 0\.4 s"):  # 0.2 x 2 (0.8 if scaled twice: would pass)
        agent.run("slow-box", ["echo", "ok"], timeout_s=0.2)


def test_an_agents_command_limit_scales(fake_docker, env):
    """The shell agent (the servers' kind) ends a command at its request's limit: `sleep 1.5` with a 0.5 s
    deadline is cut (exit 124) on a real host and completes at QUICLAB_SLOW=6 (3 s)."""
    name = "box-agent-test"
    try:
        with pytest.raises(docker.DockerError) as caught:
            agent.run(name, ["sleep", "1.5"], timeout_s=0.5)
        assert caught.value.return_code == 124
        env.setenv(config.ENV_SLOW, "6")
        assert agent.run(name, ["sh", "-c", "sleep 1.5; echo done"], timeout_s=0.5) == "done"
        assert isinstance(agent._agents.get(name), agent.ShellAgent)  # it went through the agent, not an exec
    finally:
        agent.close_all()


def test_a_streams_lifetime_deadline_scales(env):
    env.setenv(config.ENV_SLOW, "20")
    s = docker.Stream(["30"], program="sleep", deadline_s=0.2, stdout=subprocess.PIPE)
    try:
        assert s.line(time.monotonic() + 0.8) is None
        assert not s.timed_out and s.alive  # 4 s in force
    finally:
        s.close(grace_s=0)


def test_the_readiness_wait_scales(env, capsys):
    """The lab comes up after 400 s of an emulated machine's time: past the real host's 180 s, within 3 x 180."""
    def run() -> None:
        clock = [0.0]

        def sleep(s: float) -> None:
            clock[0] += s
        lab.wait_ready(timeout_s=180, poll=lambda: ["quiclab-router is starting"] if clock[0] < 400 else [],
                       clock=lambda: clock[0], sleep=sleep, interval_s=10)
    with pytest.raises(EnvironmentProblem, match=r"in 180 s"):
        run()
    env.setenv(config.ENV_SLOW, "3")
    run()
    assert "every container is ready" in capsys.readouterr().err


def test_a_sweeps_manifest_says_it_ran_under_emulation(env):
    assert environment.host()["slow"] == 1.0
    env.setenv(config.ENV_SLOW, "10")
    assert environment.host()["slow"] == 10.0


#: Where the lab's code enforces a deadline on its own machinery (a subprocess, a thread join, a polling loop):
#: each such line either goes through config.deadline or is listed here (file, text on the line) with why it stays.
UNSCALED: dict[str, tuple[str, ...]] = {
    "lab/docker.py": ("pull_timeout_s",  # a registry pull: the network's time, not the CPU's
                      "compose.down("),  # Docker's stop grace before it kills containers that are being removed
    "lab/agent.py": ("timeout_s + 1",),  # call() is handed the deadline run() scaled
    "lab/evidence/sender_socket.py": ("min(deadline,", "+ 0.05)"),  # slices of a scaled wait; draining what is there
    "lab/observe/push.py": ("",),  # live metrics, best effort: a miss is retried and never fails a run
    "lab/run/parallel.py": ("timeout=0.5", "timeout=0.2"),  # the scheduler's wake-up intervals, not deadlines
    "lab/results/publish.py": ("",),  # publishing runs on the host that measured, never in the VM
    "lab/bench/": ("",),  # benchmarks measure this host; they are not run under emulation
    "lab/calibrate/": ("",),  # the search's run limits are the plan's
}
_DEADLINE = re.compile(r"timeout=(?!config\.deadline|timeout_s\b|grace_s\b)[\w.]+"
                       r"|monotonic\(\) \+ (?!config\.deadline)[\w.]+"
                       r"|Timer\((?!config\.deadline)[\w.]+"
                       r"|(?:\bt|thread)\.join\((?!(?:timeout=)?config\.deadline)[\w.=]+")


def test_every_fixed_deadline_of_the_lab_goes_through_the_one_factor():
    """A new fixed deadline that an emulated machine would hit must be scaled (or say here why not)."""
    found = []
    for path in sorted((ROOT / "lab").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            for m in _DEADLINE.finditer(code):
                if any(rel.startswith(k) and any(v in code for v in vs) for k, vs in UNSCALED.items()):
                    continue
                found.append(f"{rel}:{n}: {m.group(0)}")
    assert not found, "deadlines not scaled by config.deadline:\n" + "\n".join(found)


def test_the_host_never_sets_the_factor_only_the_vm_guest_does():
    """Deadlines are never loosened on the host: the test command and the set-up leave QUICLAB_SLOW alone; scripts/
    vm.sh writes it for the guest's job only."""
    for script in ("scripts/test.sh", "scripts/setup.sh", "scripts/lib.sh", "docker-compose.yml"):
        assert "QUICLAB_SLOW" not in (ROOT / script).read_text(), script
    vm = (ROOT / "scripts/vm.sh").read_text()
    assert "export QUICLAB_SLOW" in vm.split("cat >\"$share/job.sh\"")[1], "the guest's job exports it"


def test_health_checks_are_timed_as_slow_as_the_machine_is(env):
    """Docker's periodic health checks (a `docker exec` each) may take QUICLAB_SLOW times as long under emulation
    and run that many times as seldom; every long-running service of docker-compose.yml whose image or service has
    a check takes both from the lab (the TCG VM's router was called unhealthy on the images' own 3 s)."""
    for name in (docker.ENV_HEALTH_INTERVAL, docker.ENV_HEALTH_TIMEOUT, config.ENV_INSTANCE):  # restored after
        env.delenv(name, raising=False)
    docker.compose_environment()
    assert (os.environ[docker.ENV_HEALTH_INTERVAL], os.environ[docker.ENV_HEALTH_TIMEOUT]) == ("30s", "5s")
    env.setenv(config.ENV_SLOW, "10")
    docker.compose_environment()
    assert (os.environ[docker.ENV_HEALTH_INTERVAL], os.environ[docker.ENV_HEALTH_TIMEOUT]) == ("300s", "50s")
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    checked_images = {p.parent.name for p in (ROOT / "images").glob("*/Dockerfile") if "HEALTHCHECK" in p.read_text()}
    for name, service in services.items():
        one_shot = service.get("restart") == "no" or name == "pki" or name.endswith("-route")
        image = service.get("build", {}).get("dockerfile", "").split("/")[1:2]
        if one_shot or not ("healthcheck" in service or set(image) & checked_images):
            continue
        check = service.get("healthcheck")
        assert check is not None, f"{name}: its image's check runs on the image's own timing"
        assert (check["interval"], check["timeout"]) == ("${QUICLAB_HEALTH_INTERVAL:-30s}",
                                                         "${QUICLAB_HEALTH_TIMEOUT:-5s}"), name
