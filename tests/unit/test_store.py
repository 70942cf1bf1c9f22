"""Resume bookkeeping: runs.csv appends survive torn lines; a resumed plan skips exactly the completed runs."""

from __future__ import annotations

import dataclasses

from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.results import store
from lab.results.schema import RunRecord


def record(key: str, status: str = "ok") -> RunRecord:
    point, proto, client, server, repeat = key.split("/")
    return RunRecord(
        sweep="t", run_key=key, point=int(point), point_label="loss=0%", x_name="loss_pct", x=0.0, protocol=proto,
        client=client, server=server, repeat=int(repeat), order=0, seed=1, shaper="linkem", rate_bps=1e7,
        rtt_s=0.02, loss_pct=0.0, jitter_s=0.0, link="{}", size_bytes=1000, status=status, failure="",
        http_version="3", bytes=1000, sha256_ok=True, handshake_s=0.01, ttfb_s=0.02, total_s=0.1,
        goodput_bps=8e4, wall_s=0.2, overhead_s=0.1, wire_down_bytes=1100, wire_up_bytes=100, wire_overhead=1.2,
        cc_client="bbr", cc_server="bbr", started_at="2026-01-01T00:00:00Z")


def test_appended_runs_round_trip(tmp_path):
    log = store.RunLog(tmp_path)
    recs = [record("0/h1/curl/nginx/0"), record("0/h3/curl/nginx/0", "failed")]
    for r in recs:
        log.append(r)
    log.close()
    assert store.load_runs(tmp_path) == recs


def test_torn_last_line_is_dropped(tmp_path):
    log = store.RunLog(tmp_path)
    log.append(record("0/h1/curl/nginx/0"))
    log.close()
    with (tmp_path / store.RUNS).open("a") as f:
        f.write("t,0/h2/curl/nginx/0,0,loss=0%")  # a crash mid-write
    assert [r.run_key for r in store.load_runs(tmp_path)] == ["0/h1/curl/nginx/0"]


def test_reopening_appends_without_a_second_header(tmp_path):
    for key in ("0/h1/curl/nginx/0", "0/h2/curl/nginx/0"):
        log = store.RunLog(tmp_path)
        log.append(record(key))
        log.close()
    text = (tmp_path / store.RUNS).read_text()
    assert text.count("run_key") == 1 and len(store.load_runs(tmp_path)) == 2


def test_resume_set_arithmetic(tmp_path):
    """Keep completed runs (not interrupted, planned, no duplicates); the rest is what a resume runs."""
    s = validate({"name": "t", "repeats": 2, "sweep": {"loss": ["0%", "1%"]}}, "t")
    runs = plan(s)
    done = [record(r.key) for r in runs[:5]]
    done.append(dataclasses.replace(record(runs[5].key), status="interrupted"))
    done.append(record(runs[0].key))  # a duplicate must not count twice
    done.append(record("9/h1/curl/nginx/0"))  # not in this plan
    kept = store.completed_runs(done, {r.key for r in runs})
    store.rewrite_runs(tmp_path, list(kept.values()))
    todo = [r for r in runs if r.key not in kept]
    assert len(kept) == 5 and len(todo) == len(runs) - 5 and runs[5] in todo
    assert {r.run_key for r in store.load_runs(tmp_path)} | {r.key for r in todo} == {r.key for r in runs}


def test_one_reader_one_rule_torn_last_line_tolerated_and_reported(tmp_path, capsys):
    log = store.RunLog(tmp_path)
    log.append(record("0/h1/curl/nginx/0"))
    log.close()
    with (tmp_path / store.RUNS).open("a") as f:
        f.write("t,0/h2/curl/nginx/0,0,loss=0%")  # a crash mid-write
    from lab.report.report import load_sweep
    from lab.results.schema import read_runs

    assert read_runs(tmp_path / store.RUNS).torn_line == 3
    assert [r.run_key for r in load_sweep(tmp_path)[0]] == ["0/h1/curl/nginx/0"]  # the report: same rule
    store.load_runs(tmp_path, report_torn=True)
    assert "line 3 is incomplete" in capsys.readouterr().err


def test_a_bad_row_in_the_middle_is_an_error_naming_the_line(tmp_path):
    log = store.RunLog(tmp_path)
    for key in ("0/h1/curl/nginx/0", "0/h2/curl/nginx/0", "0/h3/curl/nginx/0"):
        log.append(record(key))
    log.close()
    path = tmp_path / store.RUNS
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(",ok,", ",okay,")
    path.write_text("".join(lines))
    from lab.errors import UsageError
    from lab.report.report import load_sweep

    for read in (lambda: store.load_runs(tmp_path), lambda: load_sweep(tmp_path)):
        try:
            read()
        except UsageError as e:
            assert "line 3" in str(e) and "okay" in str(e) and "status" in str(e)
        else:
            raise AssertionError("a bad middle row was read without an error")


def test_a_middle_row_with_missing_fields_is_an_error_not_a_torn_line(tmp_path):
    log = store.RunLog(tmp_path)
    for key in ("0/h1/curl/nginx/0", "0/h2/curl/nginx/0"):
        log.append(record(key))
    log.close()
    path = tmp_path / store.RUNS
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(2, "t,0/h3/curl/nginx/0,0\n")
    path.write_text("".join(lines))
    from lab.errors import UsageError

    try:
        store.load_runs(tmp_path)
    except UsageError as e:
        assert "line 3" in str(e) and "fields" in str(e)
    else:
        raise AssertionError("a short middle row was read without an error")


def test_legacy_rows_that_were_the_labs_failures_are_run_again(tmp_path):
    s = validate({"name": "t", "repeats": 1, "sweep": {"loss": ["0%"]}}, "t")
    runs = plan(s)
    lab_failed = dataclasses.replace(record(runs[0].key), status="failed",
                                     failure="client exit code -1: unreadable client output: ''")
    real_failure = dataclasses.replace(record(runs[1].key), status="failed", failure="SHA-256 mismatch")
    kept = store.completed_runs([lab_failed, real_failure], {r.key for r in runs})
    assert set(kept) == {runs[1].key}
