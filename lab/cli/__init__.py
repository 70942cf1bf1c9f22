"""The `quiclab` command. One module per command; errors become one line and an exit code."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from pydantic import ValidationError
from typer.exceptions import TyperException

from lab import config, signals, terminal
from lab.cli import (
    bench,
    build,
    calibrate,
    compare,
    dashboard,
    docs,
    down,
    explain,
    matrix,
    merge,
    presets,
    probe,
    publish,
    report,
    reproduce,
    run,
    shape,
    status,
    sweep,
    up,
)
from lab.config import ENV_GRAFANA, ENV_INSTANCE, ENV_PROMETHEUS_PORT, ENV_PUSHGATEWAY_URL, ENV_TIMEOUT
from lab.errors import QuiclabError

app = typer.Typer(
    name="quiclab",
    help=("Measure QUIC/HTTP-3 against TCP (HTTP/1.1, HTTP/2) through an emulated link.\n\n"
          f"Environment: {ENV_PROMETHEUS_PORT} (Prometheus port on 127.0.0.1, default 9090), "
          f"{ENV_TIMEOUT} (per-transfer timeout in seconds, default 120), "
          f"{ENV_PUSHGATEWAY_URL} (where sweeps push live results; off = do not push), "
          f"{ENV_GRAFANA} (off = never start Grafana), "
          f"{ENV_INSTANCE} (which lab of this host: 1..9; unset = the default lab). See docs/observability.md."),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for module in (up, down, status, dashboard, run, shape, sweep, matrix, merge, presets, report, compare, reproduce,
               bench, build, docs, explain, publish, probe, calibrate):
    module.register(app)
sweep.register_worker(app)


def _typer_message(e: TyperException) -> str:
    """typer's own one-line message, plus the value it could not convert (typer's pydantic coercion leaves it out:
    "Invalid value for '--repeats': Input should be a valid integer ... (got 'abc')")."""
    message = e.format_message()
    cause = e.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        message += f" (got {cause.errors()[0].get('input')!r})"
    return message


def exit_interrupted() -> NoReturn:
    """The one line and exit code 130 after Ctrl-C."""
    signals.ignore_further_interrupts()
    terminal.error("interrupted")
    sys.exit(130)


def main(argv: list[str] | None = None) -> None:
    try:
        # Outside standalone mode typer *returns* an exit code instead of exiting: 130 when a Ctrl-C escaped the
        # command (it turns KeyboardInterrupt into Exit(130)). A command's own return value is None.
        config.check_instance()  # every lab name derives from it: a bad one stops any command before it runs
        code = app(args=argv, standalone_mode=False)
        if isinstance(code, int) and code:
            if code == 130:
                exit_interrupted()
            sys.exit(code)
    except QuiclabError as e:
        if e.exit_code == 130:  # a sweep stopped by Ctrl-C (its line names the command that continues it)
            signals.ignore_further_interrupts()
        terminal.error(str(e))
        sys.exit(e.exit_code)
    except typer.Abort:
        exit_interrupted()
    except TyperException as e:
        if not e.format_message().strip():  # no arguments: the help was printed
            sys.exit(0)
        terminal.error(_typer_message(e))
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        exit_interrupted()
