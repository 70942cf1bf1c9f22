"""lab/docker.py without Docker: the argv of `docker exec`, `Stream` (a docker process the caller talks to: lines
against a deadline, a lifetime deadline, kill + wait on exit) and the one error type, with stand-ins for the docker
program (`cat`, `sleep`, `sh`, a fake `docker` script)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from python_on_whales.exceptions import DockerException, NoSuchContainer

from lab import docker
from lab.errors import EnvironmentProblem, QuiclabError
from tests import fake_docker as fake_docker_program

FAKE_DOCKER = """#!/bin/sh
# a stand-in for the docker CLI: `exec CONTAINER ...` / `start -a CONTAINER` behave by the container's name
case "$2$3" in
  *fail*) echo "Error: no such thing" >&2; exit 3 ;;
  *slow*) exec sleep 30 ;;
esac
echo "$@"
"""


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_docker_program.install(tmp_path, monkeypatch, FAKE_DOCKER)


def test_exec_args_are_built_in_one_place():
    assert docker.exec_args("c", ["ls", "-l"]) == ["exec", "c", "ls", "-l"]
    assert docker.exec_args("c", ("sh",), interactive=True, env={"A": "1", "B": "x y"}) == [
        "exec", "-i", "-e", "A=1", "-e", "B=x y", "c", "sh"]


def test_a_stream_runs_the_docker_program_with_its_arguments(fake_docker: Path):
    with docker.Stream(docker.exec_args("box", ["ls", "/"], interactive=True), deadline_s=10,
                       stdout=subprocess.PIPE) as s:
        assert s.argv == [str(fake_docker), "exec", "-i", "box", "ls", "/"]
        assert s.line(time.monotonic() + 5) == "exec -i box ls /"
    assert s.poll() == 0


def test_a_stream_talks_both_ways_and_close_ends_it():
    s = docker.Stream([], program="cat", deadline_s=10, stdin=True, stdout=subprocess.PIPE)
    s.send(b"one\ntw")
    assert s.line(time.monotonic() + 5) == "one"
    s.send(b"o\n")
    assert s.line(time.monotonic() + 5) == "two"
    assert s.alive
    s.close(grace_s=5)  # its stdin closes: cat exits by itself
    assert s.poll() == 0 and not s.timed_out
    with pytest.raises(OSError):
        s.send(b"gone\n")


def test_a_line_that_does_not_come_is_none_at_the_deadline():
    with docker.Stream(["30"], program="sleep", deadline_s=60, stdout=subprocess.PIPE) as s:
        t0 = time.monotonic()
        assert s.line(t0 + 0.3) is None
        assert 0.25 < time.monotonic() - t0 < 5
        assert s.alive


def test_the_deadline_kills_the_process_wherever_its_owner_is():
    s = docker.Stream(["30"], program="sleep", deadline_s=0.3, stdout=subprocess.PIPE)
    t0 = time.monotonic()
    assert s.line(t0 + 20) is None  # the read ends when the process is killed, not at the read's own deadline
    assert time.monotonic() - t0 < 10
    assert s.timed_out and s.proc.wait(timeout=5) == -9
    s.close()


def test_leaving_the_block_kills_and_waits_for_a_process_that_does_not_exit():
    t0 = time.monotonic()
    with docker.Stream(["30"], program="sleep", deadline_s=60, stdin=True) as s:
        pass
    assert s.proc.returncode == -9  # waited for: the exit code is known
    assert time.monotonic() - t0 < 15
    assert not s.timed_out


def test_close_on_exit_from_an_exception_too():
    with pytest.raises(RuntimeError), docker.Stream(["30"], program="sleep", deadline_s=60) as s:
        raise RuntimeError("the owner failed")
    assert s.proc.returncode is not None


def test_finish_waits_then_kills_and_hands_over_the_rest_of_the_output():
    script = "echo 'listening on eth0' >&2; echo 'tail line' >&2; echo out; sleep 30"
    s = docker.Stream(["-c", script], program="sh", deadline_s=60, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)
    assert s.line(time.monotonic() + 5, "stderr") == "listening on eth0"
    time.sleep(0.2)
    t0 = time.monotonic()
    out, err = s.finish(grace_s=0.3)
    assert time.monotonic() - t0 < 10 and s.proc.returncode == -9
    assert out == "out\n" and "tail line" in err and "listening" not in err


def test_finish_of_a_process_that_ends_keeps_its_exit_code():
    s = docker.Stream(["-c", "echo 3 packets dropped by kernel >&2"], program="sh", deadline_s=60,
                      stderr=subprocess.PIPE, text=True)
    out, err = s.finish(grace_s=5)
    assert out is None and err == "3 packets dropped by kernel\n" and s.proc.returncode == 0


def test_the_deadline_never_keeps_quiclab_alive():
    with docker.Stream(["30"], program="sleep", deadline_s=3600) as s:
        assert s._timer is not None and s._timer.daemon
    s._timer.join(timeout=5)  # cancelled when the stream ended
    assert not s._timer.is_alive()
    assert not any(t is s._timer for t in threading.enumerate())


def test_a_missing_docker_program_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem, match="the docker command is not installed"):
        docker.Stream(["ps"], program="/nonexistent/docker", deadline_s=1)


def test_exec_in_returns_stdout_without_the_final_newline(fake_docker: Path):
    assert docker.exec_in("box", ["echo", "hi"]) == "exec box echo hi"


def test_a_failed_command_is_one_docker_error_with_python_on_whales_fields_and_message(fake_docker: Path):
    with pytest.raises(docker.DockerError) as caught:
        docker.exec_in("fail", ["ls"])
    e = caught.value
    assert isinstance(e, EnvironmentProblem) and isinstance(e, QuiclabError) and e.exit_code == 2
    assert e.return_code == 3 and e.stderr == "Error: no such thing\n" and e.stdout == ""
    assert e.docker_command == [str(fake_docker), "exec", "fail", "ls"]
    theirs = DockerException([str(fake_docker), "exec", "fail", "ls"], 3, b"", b"Error: no such thing\n")
    assert str(e) == str(theirs)
    # what every message quotes: the stderr on one line, cut to the limit; no stderr: the exit code
    assert e.reason() == "Error: no such thing" and e.reason(5) == "Error"
    assert docker.DockerError(["docker", "x"], 4, "", " \n ").reason() == "exit code 4"
    assert docker.DockerError(["docker", "x"], 1, None, "a\n  b\n").reason() == "a b"


def test_exec_in_times_out(fake_docker: Path):
    t0 = time.monotonic()
    with pytest.raises(docker.ExecTimeout, match=r"did not return within 0\.3 s"):
        docker.exec_in("slow", ["ls"], timeout_s=0.3)
    assert time.monotonic() - t0 < 10


def test_start_attached(fake_docker: Path):
    assert docker.start_attached("helper", timeout_s=10) == (0, "start -a helper\n", "")
    code, _, err = docker.start_attached("fail-route", timeout_s=10)
    assert code == 3 and "no such thing" in err
    with pytest.raises(docker.ExecTimeout, match=r"slow-route did not finish within 0\.3 s"):
        docker.start_attached("slow-route", timeout_s=0.3)


def test_python_on_whales_exceptions_become_docker_errors():
    with pytest.raises(docker.DockerError) as caught, docker._translated():
        raise NoSuchContainer(["docker", "container", "pause", "x"], 1, b"", b"Error: No such container: x")
    e = caught.value
    assert e.return_code == 1 and e.stderr == "Error: No such container: x" and e.docker_command[-1] == "x"
    assert e.__cause__ is None and e.__suppress_context__  # one line for the user, no python-on-whales traceback


def test_inspected_reads_pid_and_configured_image():
    c = docker.Inspected.of({"Id": "abc", "Name": "/quiclab-router", "Image": "sha256:1",
                             "State": {"Status": "running", "Pid": 4242},
                             "Config": {"Image": "quiclab/router:latest"}})
    assert (c.name, c.pid, c.config_image, c.image) == ("quiclab-router", 4242, "quiclab/router:latest", "sha256:1")
    stopped = docker.Inspected.of({"State": {"Status": "exited", "Pid": 0}})
    assert stopped.pid == 0 and stopped.config_image == ""
