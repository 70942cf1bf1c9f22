"""Ctrl-C: never a silent exit 0, never a half-recorded run."""

import os
import signal

import pytest
import typer

import lab.cli as cli
from lab.sweep import runner


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


def test_ctrl_c_while_a_run_is_recorded_lets_the_record_finish(monkeypatch):
    executed: list[str] = []
    monkeypatch.setattr(runner, "execute", lambda run, ctx: executed.append(run) or f"record of {run}")

    lines: list[str] = []

    class Log:
        def append(self, rec):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands in the middle of writing the record...
            lines.append(rec)                    # ...which still completes

    counted: list[str] = []
    complete = runner.run_all(["a", "b", "c"], None, Log(), counted.append)  # type: ignore[arg-type]
    assert complete is False
    assert executed == ["a"]  # no run started after the Ctrl-C
    assert lines == counted == ["record of a"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is restored


def test_ctrl_c_during_a_run_records_it_as_interrupted(monkeypatch):
    def execute(run, ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "interrupted", lambda run, ctx: f"{run} interrupted")
    lines: list[str] = []
    log = type("Log", (), {"append": lambda self, rec: lines.append(rec)})()
    assert runner.run_all(["a", "b"], None, log, lambda rec: None) is False  # type: ignore[arg-type]
    assert lines == ["a interrupted"]
