"""Terminal output is escape-safe (user text is never read as rich markup) and long waits say what they wait for."""

from __future__ import annotations

import dataclasses
import re

import pytest
from rich.cells import cell_len

from lab import lab, terminal
from lab.cli.run import _row
from lab.errors import EnvironmentProblem
from lab.results.schema import RunRecord
from tests.unit.test_stats import make_record

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


def _result(failure: str, status: str = "failed") -> RunRecord:
    return dataclasses.replace(make_record(), protocol="h3", status=status, failure=failure, total_s=None,
                               http_version="", bytes=0, goodput_bps=None)


def test_run_table_shows_failure_messages_whole(capsys):
    rows = [_row(_result("curl: (7) [/] failed to connect [bold]")),
            _row(_result("curl [x] does not speak HTTP/3", status="unsupported")),
            _row(_result("", status="ok"))]
    cols = ["asked", "used", "sender cc", "bytes", "handshake ms", "TTFB ms", "total ms", "goodput Mbit/s", "check"]
    terminal.table("run", cols, rows, right=cols[3:8], wrap=["check"], width=80)  # as `quiclab run` prints it
    out = capsys.readouterr().out
    words = " ".join(out.split())  # the check column may wrap, never cut
    assert "FAILED curl: (7) [/] failed to connect [bold]" in words
    assert "unsupported curl [x] does not speak HTTP/3" in words and "ok" in out.split()
    assert max(cell_len(ln) for ln in out.splitlines()) <= 80


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


# Tables at 80 columns (a terminal that size, or a pipe): names whole, free text wrapped, nothing ellipsized.

LONG_NAMES = ["connectify-loss-with-a-long-name", "survey-grid-and-then-some", "x"]
LONG_TEXT = ("Default job's link at 0 and 5 % loss with sender cc reno/cubic/bbr/native: TCP curl->nginx, "
             "QUIC gtlsclient->ngtcp2 and curl->nginx; 2 MB, and a great deal more to say about it " * 2).strip()


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def _starts_a_row(name: str, lines: list[str]) -> bool:
    return any(re.match(rf"(│ )?{re.escape(name)}(\s|$)", ln) for ln in lines)


def test_names_stay_whole_and_descriptions_wrap_at_80_columns(capsys):
    rows = [[n, "alias", "12", "345", LONG_TEXT] for n in LONG_NAMES]
    terminal.table("sweep presets", ["preset", "alias", "points", "runs", "description"], rows,
                   right=["points", "runs"], wrap=["description"], width=80)
    lines = _lines(capsys)
    assert all(_starts_a_row(n, lines) for n in LONG_NAMES), lines
    assert "…" not in "".join(lines) and max(cell_len(ln) for ln in lines) <= 80
    assert " ".join(" ".join(lines).split()).count(" ".join(LONG_TEXT.split())) == len(rows)  # whole, wrapped
    assert len(lines) > 3 * len(rows)  # several lines a description, not the name column's room


def test_a_long_description_does_not_squeeze_the_name_column(capsys):
    terminal.table(None, ["preset", "description"], [["connectify-rate", "word " * 200]], wrap=["description"],
                   width=80)
    lines = _lines(capsys)
    assert lines[2].startswith("connectify-rate  word")
    assert all(ln.startswith(" " * len("connectify-rate  ") + "word") for ln in lines[3:])


def test_a_table_that_fits_keeps_its_box(capsys):
    terminal.table("t", ["name", "n"], [["quick", "3"]], right=["n"], width=80)
    out = capsys.readouterr().out
    assert "┃ name  ┃ n ┃" in out and "│ quick │ 3 │" in out


def test_too_many_columns_become_several_tables_each_row_labelled(capsys):
    cols = ["parameter", "method", *(f"measure {k} median [IQR]" for k in range(8))]
    methods = ["HTTP/1.1 curl→nginx", "HTTP/3 gtlsclient→ngtcp2"]
    rows = [[f"loss={p}% rtt=40ms", m, *(f"{k}.{p}9 [{k}.00-{k}.{p}99]" for k in range(8))]
            for p in range(3) for m in methods]
    terminal.table("summary", cols, rows, right=cols[2:], width=80)
    lines = _lines(capsys)
    assert max(cell_len(ln) for ln in lines) <= 80 and "…" not in "".join(lines)
    text = "\n".join(lines)
    for r in rows:
        labelled = [ln for ln in lines if ln.startswith(f"{r[0]}  {r[1]}")]
        assert len(labelled) >= 2  # the row appears in each of the tables, named by its point and method
        assert all(cell in text for cell in r[2:])
    assert lines[0] == "summary" and text.count("summary") == 1


def test_a_name_wider_than_the_page_is_printed_whole(capsys):
    name = "n" * 120
    terminal.table(None, ["name", "value"], [[name, "1"]], right=["value"], width=80)
    assert name in capsys.readouterr().out


def test_free_text_with_brackets_prints_literally_when_wrapped(capsys):
    terminal.table(f"t {NASTY}", ["name [x]", "note"], [["[bold]n", f"{NASTY} " * 6]], wrap=["note"], width=60)
    out = capsys.readouterr().out
    assert f"t {NASTY}" in out and "name [x]" in out and "[bold]n" in out
    assert " ".join(out.split()).count(NASTY) == 7  # the title's and the note's six


def test_no_line_ends_in_blanks(capsys):
    terminal.table("t", ["name", "note"], [["a", "short"], ["b", "a note " * 30]], wrap=["note"], width=80)
    assert all(ln == ln.rstrip() for ln in _lines(capsys))


def test_the_page_is_columns_else_80_off_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")
    assert terminal.page_width() == 123
    monkeypatch.delenv("COLUMNS")
    assert not terminal.out.is_terminal and terminal.page_width() == 80


def test_the_sweep_summary_at_80_columns_keeps_points_and_methods_whole(capsys, tmp_path):
    from lab.results.report import load_sweep
    from lab.results.stats import summarize
    from lab.results.summary import stats_table
    from tests.unit.test_report import make_sweep

    records, _ = load_sweep(make_sweep(tmp_path / "s", x_name="point"))
    cols, rows = stats_table(summarize(records))
    terminal.table("s: transfer time and goodput (median [IQR])", cols, rows, right=cols[2:], width=80)
    lines = _lines(capsys)
    assert max(cell_len(ln) for ln in lines) <= 80 and "…" not in "".join(lines)
    for r in rows:
        starts = re.compile(rf"{re.escape(r[0])} +{re.escape(r[1])}  ")
        assert sum(bool(starts.match(ln)) for ln in lines) >= 2, r[:2]  # in each of the tables it became
