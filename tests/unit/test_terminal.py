"""Terminal output is escape-safe (user text is never read as rich markup) and long waits say what they wait for."""

from __future__ import annotations

import pytest

from lab import lab, terminal
from lab.cli.run import _row
from lab.errors import EnvironmentProblem
from lab.models import TransferResult
from lab.protocols import Protocol

NASTY = "results/[bold]x[/bold] [/] [red]y :thumbs_up: \\[z]"


@pytest.mark.parametrize("say", [terminal.error, terminal.warning, terminal.info, terminal.success])
def test_messages_print_user_text_verbatim(capsys, say):
    say(f"cannot read {NASTY}")  # "[/]" with nothing open raised rich's MarkupError before
    err = capsys.readouterr().err
    assert NASTY in err and len(err.strip().splitlines()) == 1


def test_a_multi_line_error_becomes_one_line(capsys):
    terminal.error("tc said:\nError: Specified qdisc kind is unknown.\n")
    assert capsys.readouterr().err.strip() == "error: tc said: Error: Specified qdisc kind is unknown."


def test_table_cells_titles_and_lines_are_plain(capsys):
    terminal.table(f"sweep {NASTY}", ["a [b]", "c"], [[NASTY, terminal.styled("[ok]", "green")]])
    terminal.line(NASTY)
    out = capsys.readouterr().out
    assert out.count(NASTY) == 3 and "a [b]" in out and "[ok]" in out


def _result(failure: str, ok: bool = False, unsupported: bool = False) -> TransferResult:
    return TransferResult(ok=ok, failure=failure, protocol=Protocol.H3, http_version="", client="curl",
                          server="nginx", size=1, bytes=0, sha256_expected="", sha256="", handshake_s=None,
                          ttfb_s=None, total_s=None, goodput_bps=None, wall_s=0.1, exit_code=7,
                          unsupported=unsupported)


def test_run_table_shows_failure_messages_whole(capsys):
    rows = [_row(_result("curl: (7) [/] failed to connect [bold]")),
            _row(_result("unsupported: curl [x] does not speak HTTP/3", unsupported=True)),
            _row(_result("", ok=True))]
    terminal.table("run", ["asked", "used", "bytes", "hs", "ttfb", "total", "goodput", "check"], rows)
    out = capsys.readouterr().out
    assert "FAILED curl: (7) [/] failed to connect [bold]" in out
    assert "unsupported curl [x] does not speak HTTP/3" in out and " ok " in out


def test_waiting_off_a_terminal_reports_every_few_seconds(capsys):
    now = [0.0]
    with terminal.waiting("waiting for the lab", every_s=5, clock=lambda: now[0]) as update:
        for t in (0, 1, 4.9, 5, 7, 10.5):
            now[0] = t
            update(f"router at {t}")
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["· waiting for the lab: router at 0", "· waiting for the lab: router at 5",
                     "· waiting for the lab: router at 10.5"]


def test_wait_ready_names_what_it_still_waits_for(capsys):
    clock = [0.0]
    polls = iter([["quiclab-router is starting", "client-route has not finished"]] * 12 + [[]])

    def sleep(s: float) -> None:
        clock[0] += s

    lab.wait_ready(timeout_s=60, poll=lambda: next(polls), clock=lambda: clock[0], sleep=sleep, interval_s=1)
    err = capsys.readouterr().err
    assert err.count("quiclab-router is starting; client-route has not finished") == 3  # t = 0, 5, 10 s
    assert "every container is ready" in err


def test_wait_ready_gives_up_naming_the_laggards(capsys):
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s

    with pytest.raises(EnvironmentProblem, match=r"in 3 s \(quiclab-server is unhealthy\)"):
        lab.wait_ready(timeout_s=3, poll=lambda: ["quiclab-server is unhealthy"], clock=lambda: clock[0],
                       sleep=sleep, interval_s=1)
