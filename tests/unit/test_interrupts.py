"""Ctrl-C and lab failures in a sweep: never a silent exit 0, never a half-recorded run, never a run recorded that
was cut short or that the lab (not the transport) failed."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer

import lab.cli as cli
from lab import signals
from lab.run import runner


@pytest.fixture(autouse=True)
def own_signal_dispositions():
    """These tests send themselves SIGINT: they must not depend on what the shell gave pytest (under `nohup ... &`
    SIGINT arrives ignored)."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in previous.items():
        signal.signal(s, h)


@pytest.fixture(autouse=True)
def no_fidelity_guard(monkeypatch):
    """The runs here are stand-ins (strings): the host-bound judgement (tests/unit/test_parallel.py) is not theirs."""
    monkeypatch.setattr(runner, "_judge_host", lambda rec, load, ctx: (rec, ""))


class Log:
    def __init__(self, on_append=None):
        self.lines: list[str] = []
        self.on_append = on_append

    def append(self, rec):
        if self.on_append:
            self.on_append()
        self.lines.append(rec)


def test_ctrl_c_inside_a_command_exits_130_and_says_so(monkeypatch, capsys):
    app = typer.Typer(add_completion=False)

    @app.command()
    def boom() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "app", app)
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 130
    assert "interrupted" in capsys.readouterr().err
    # a second Ctrl-C during the exit's clean-up is ignored: the process still ends with 130, not killed by SIGINT
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_while_a_run_is_recorded_lets_the_record_finish(monkeypatch):
    executed: list[str] = []
    monkeypatch.setattr(runner, "execute", lambda run, ctx: executed.append(run) or f"record of {run}")
    log = Log(on_append=lambda: os.kill(os.getpid(), signal.SIGINT))  # Ctrl-C lands while the record is written
    counted: list[str] = []
    finish = runner.run_all(["a", "b", "c"], None, log, counted.append)  # type: ignore[arg-type]
    assert finish.outcome == "interrupted"
    assert executed == ["a"]  # no run started after the Ctrl-C
    assert log.lines == counted == ["record of a"]  # ...and the record it interrupted was completed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is restored


def test_ctrl_c_during_a_run_records_nothing(monkeypatch):
    def execute(run, ctx):
        if run == "b":
            os.kill(os.getpid(), signal.SIGINT)
        return f"record of {run}"

    monkeypatch.setattr(runner, "execute", execute)
    log = Log()
    assert runner.run_all(["a", "b", "c"], None, log, lambda rec: None).outcome == "interrupted"  # type: ignore[arg-type]
    assert log.lines == ["record of a"]


def test_an_interrupt_swallowed_inside_a_run_still_keeps_the_run_out(monkeypatch):
    """Something on the way (a library, a client wrapper) turns the KeyboardInterrupt into an ordinary failure:
    the run must still not be recorded (this was the 'client exit code -1: unreadable client output' row)."""
    def execute(run, ctx):
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            return f"failed record of {run}"  # swallowed
        return f"record of {run}"

    monkeypatch.setattr(runner, "execute", execute)
    log = Log()
    assert runner.run_all(["a"], None, log, lambda rec: None).outcome == "interrupted"  # type: ignore[arg-type]
    assert log.lines == []


def test_sigterm_stops_a_sweep_like_ctrl_c(monkeypatch):
    def execute(run, ctx):
        os.kill(os.getpid(), signal.SIGTERM)
        return f"record of {run}"

    monkeypatch.setattr(runner, "execute", execute)
    log = Log()
    assert runner.run_all(["a"], None, log, lambda rec: None).outcome == "interrupted"  # type: ignore[arg-type]
    assert log.lines == [] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_ignored_sigint_stays_ignored(monkeypatch):
    """Under nohup a sweep keeps SIGINT ignored (SIGTERM still stops it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    monkeypatch.setattr(runner, "execute", lambda run, ctx: os.kill(os.getpid(), signal.SIGINT) or f"record of {run}")
    log = Log()
    assert runner.run_all(["a", "b"], None, log, lambda rec: None).outcome == "complete"  # type: ignore[arg-type]
    assert log.lines == ["record of a", "record of b"]


def test_a_lab_failure_is_retried_while_the_lab_is_healthy_and_never_recorded(monkeypatch):
    calls: list[str] = []

    def execute(run, ctx):
        calls.append(run)
        if run == "b" and calls.count("b") == 1:
            raise runner.EnvironmentFailure("docker exec hiccup")
        return f"record of {run}"

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "_lab_problem", lambda run: None)
    retried: list[str] = []
    log = Log()
    finish = runner.run_all(["a", "b"], None, log, lambda rec: None,  # type: ignore[arg-type]
                            on_retry=lambda run, why: retried.append(f"{run}: {why}"))
    assert finish.outcome == "complete"
    assert calls == ["a", "b", "b"] and retried == ["b: the lab failed (docker exec hiccup); it is healthy again"]
    assert log.lines == ["record of a", "record of b"]


def test_a_lab_that_stays_broken_stops_the_sweep_without_a_record(monkeypatch):
    def execute(run, ctx):
        if run == "b":
            raise runner.EnvironmentFailure("router is exited")
        return f"record of {run}"

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "_lab_problem", lambda run: "quiclab-router is exited")
    log = Log()
    finish = runner.run_all(["a", "b", "c"], None, log, lambda rec: None)  # type: ignore[arg-type]
    assert (finish.outcome, finish.error) == ("environment", "router is exited")
    assert log.lines == ["record of a"]


def test_the_lab_is_judged_by_the_containers_the_run_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parallel sweep's extra lab has only the optional parts its plan uses: a timed-out curl run there is a
    result, not the lab's failure because the browser container (not started) is missing."""
    from lab import config
    from lab import lab as lab_module

    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(lab_module, "health_problem", lambda names: asked.append(names) or None)
    run = SimpleNamespace(client="curl", server="nginx")
    assert runner._lab_problem(run) is None  # type: ignore[arg-type]
    (names,) = asked
    assert config.ROUTER_CONTAINER in names and config.CLIENT_CONTAINER in names and config.SERVER_CONTAINER in names
    assert not any("browser" in n for n in names)


_AFTER_A_CTRL_C_IN_EXEC = """
import sys, types
{setup}
try:  # how dataclasses and namedtuple build methods while a module imports: a Ctrl-C passes through exec() of a
    exec("raise KeyboardInterrupt")  # string (the last such exec before the exit: each one resets CPython's mark)
except KeyboardInterrupt:
    pass
from lab.__main__ import run
run()
"""


_A_SWALLOWED_CTRL_C = """
import sys
import lab.cli
def main():
    try:  # a real Ctrl-C landing in exec() of a string, and swallowed there (as something on the way might)
        exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(100000): pass\\n")
    except KeyboardInterrupt:
        pass
    {setup}
lab.cli.main = main
from lab.__main__ import run
run()
"""


def _entry_point(tmp_path: Path, setup: str, probe: str = _AFTER_A_CTRL_C_IN_EXEC) -> subprocess.CompletedProcess[str]:
    """The entry point run as `python -m` (as the lab tests and `uv run python -m lab` do: only then does CPython
    turn its mark into an exit by SIGINT; a script's sys.exit exits at once)."""
    (tmp_path / "entry_probe.py").write_text(probe.format(setup=setup))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    return subprocess.run([sys.executable, "-m", "entry_probe"], capture_output=True, text=True, timeout=60,
                          cwd=root, env=env)


def test_the_entry_point_exits_130_after_a_ctrl_c_that_passed_through_exec(tmp_path):
    """CPython 3.11 remembers a KeyboardInterrupt that left exec() of a string and then ends the process by SIGINT
    (-2) whatever sys.exit asked for: the CI's ten-interrupts lab test met it when a Ctrl-C landed while the CLI
    imported. The entry point's interrupted exit must still be 130."""
    done = _entry_point(tmp_path, "import lab.cli\nlab.cli.main = lambda: sys.exit(130)")
    assert done.returncode == 130, (done.returncode, done.stderr)


@pytest.mark.parametrize(("end", "status"), [("pass", 0), ("sys.exit(2)", 2)])
def test_a_command_that_ends_after_a_swallowed_ctrl_c_keeps_its_own_status(tmp_path, end, status):
    """The CI's ten-interrupts lab test (2026-11-28) got -2, with no line, from a resumed sweep whose last Ctrl-C
    landed as it finished: the Ctrl-C went through exec() and was swallowed, the command ended normally, and
    CPython then ended the process by SIGINT. The entry point ends it with the command's own status."""
    done = _entry_point(tmp_path, end, _A_SWALLOWED_CTRL_C)
    assert done.returncode == status, (done.returncode, done.stderr)


def test_a_ctrl_c_wrapped_by_an_import_error_exits_130_with_one_line(tmp_path):
    """Python 3.11 wraps a Ctrl-C landing in a class body's __set_name__ (pydantic fields) in a RuntimeError: while
    the CLI imports that is still an interrupt, not a traceback."""
    setup = """
def wrapped(name):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        raise RuntimeError("Error calling __set_name__ on 'Field' instance") from e
cli = types.ModuleType("lab.cli")
cli.__getattr__ = wrapped
sys.modules["lab.cli"] = cli
"""
    done = _entry_point(tmp_path, setup)
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")


def test_caused_by_interrupt_follows_the_cause_and_context_chain():
    assert not signals.caused_by_interrupt(RuntimeError("no Ctrl-C on the way"))
    chained = RuntimeError("outer")
    chained.__cause__ = OSError("mid")
    chained.__cause__.__context__ = KeyboardInterrupt()
    assert signals.caused_by_interrupt(chained) and signals.caused_by_interrupt(KeyboardInterrupt())
