"""`quiclab explain` through the real CLI entry point, on a copy of the committed sweep (tests/data/explain), with
tshark's committed output standing in for tshark in the router: the table, --json, explain.json written, and bad
input as one line with exit code 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from lab.explain import tshark
from tests.explain_data import copied_sweep, run

SWEEP = Path(__file__).parents[1] / "data" / "explain" / "sweep"


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tshark, "fields", lambda pcap, keylog: pcap.with_suffix(".tsv").read_text())
    return copied_sweep(tmp_path, monkeypatch)


def test_table_of_every_captured_run_and_explain_json_beside_its_evidence(sweep, capsys):
    assert run([str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "0/h2/curl/nginx/0" in out and "0/h3/curl/nginx/0" in out and out.count("explained") >= 2
    assert "2 (2)" in out and "1 (1)" in out  # round trips seen (expected)
    for run_dir in ("0_h2_curl_nginx_0", "0_h3_curl_nginx_0"):
        rec = json.loads((sweep / "evidence" / run_dir / "explain.json").read_text())
        assert rec["status"] == "explained" and rec["path"]["down"]["dropped"]["value"] == 1


def test_json_of_one_run(sweep, capsys):
    assert run([str(sweep), "--run", "0/h3/curl/nginx/0", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["run_key"] == "0/h3/curl/nginx/0" and rec["handshake"]["round_trips"]["value"] == 1
    assert rec["loss"]["bytes_retransmitted"] == {"value": 1174, "unit": "bytes", "source": "pcap", "note": ""}


@pytest.mark.parametrize(("args", "needle"), [
    (["{sweep}", "--run", "9/h9/[bold]x/y/0"], "invalid --run '9/h9/[bold]x/y/0': the runs with captures in"),
    (["{tmp}/nowhere"], "no folder"),
    (["{tmp}/empty"], "no runs.csv in"),
])
def test_bad_input_is_one_line_and_exit_2(sweep, tmp_path, capsys, args, needle):
    (tmp_path / "empty").mkdir()
    code = run([a.format(sweep=sweep, tmp=tmp_path) for a in args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_a_sweep_without_captures_says_how_to_get_them(sweep, capsys):
    runs = sweep / "runs.csv"
    header, *rows = runs.read_text().splitlines()
    col = header.split(",").index("evidence")
    parsed = list(csv.reader([header, *rows]))
    for row in parsed[1:]:
        row[col] = ""
    with runs.open("w", newline="") as f:
        csv.writer(f).writerows(parsed)
    assert run([str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "has captures: sweep with --capture pcap,keylog" in err


def test_a_complete_sweep_explains_its_captured_runs_at_its_end(sweep: Path) -> None:
    from lab.explain import folder as explain_folder
    from lab.explain.model import EXPLAIN_JSON
    from lab.results import store

    records = store.load_runs(sweep)
    line = explain_folder.after_sweep(sweep, records, lambda pcap, keylog: pcap.with_suffix(".tsv").read_text())
    assert line is not None and line.startswith(f"explained {len(records)} captured runs")
    assert len(list(sweep.rglob(EXPLAIN_JSON))) == len(records)
    assert explain_folder.after_sweep(sweep, [], tshark.fields) is None  # nothing captured: nothing to say


def test_a_failure_to_explain_at_a_sweeps_end_loses_nothing_and_says_how_to_explain_later(sweep: Path) -> None:
    from lab.errors import EnvironmentProblem
    from lab.explain import folder as explain_folder
    from lab.results import store

    def broken(pcap: Path, keylog: Path | None) -> str:
        raise EnvironmentProblem("the router is not running")

    line = explain_folder.after_sweep(sweep, store.load_runs(sweep), broken)
    assert line is not None and "were not explained" in line and f"quiclab explain {sweep}" in line


def test_a_0rtt_quic_run_gets_sessions_json_and_a_line(sweep, capsys):
    runs = sweep / "runs.csv"
    header, *rows = list(csv.reader(runs.read_text().splitlines()))
    col, proto = header.index("workload"), header.index("protocol")
    for row in rows:
        row[col] = "0rtt:60kB" if row[proto] == "h3" else row[col]
    with runs.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    assert run([str(sweep)]) == 0
    out = capsys.readouterr().out
    # this capture holds one connection (and tshark's rows no connection index): timed as not timed, with why
    assert "0/h3/curl/nginx/0: resumed connection not timed: the client-side capture shows 0 QUIC connection" in out
    rec = json.loads((sweep / "evidence" / "0_h3_curl_nginx_0" / "sessions.json").read_text())
    assert rec["status"] == "not timed" and rec["workload"] == "0rtt:60kB"
    assert not (sweep / "evidence" / "0_h2_curl_nginx_0" / "sessions.json").exists()
