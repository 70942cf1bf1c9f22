"""objects.csv (append, read back only rows of recorded runs) and the workload report of a synthetic sweep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.report import workload_report as report
from lab.results import objects_csv as objects_file
from lab.results.schema import RunRecord, csv_text
from lab.workloads.result import ObjectTiming


def record(point: int, protocol: str, repeat: int, page: float, loss: float) -> RunRecord:
    return RunRecord(
        sweep="web", run_key=f"{point}/{protocol}/curl/nginx/{repeat}", point=point,
        point_label=f"workload=page:4x20kB loss={loss:g}%", x_name="point", x=float(point), protocol=protocol,
        client="curl", server="nginx", repeat=repeat, order=0, seed=1, shaper="linkem", rate_bps=20e6, rtt_s=0.04,
        loss_pct=loss, jitter_s=0.0, link="{}", size_bytes=80_000, status="ok", failure="",
        http_version={"h2": "2", "h3": "3"}[protocol], bytes=80_000, sha256_ok=True, handshake_s=0.05, ttfb_s=0.1,
        total_s=page, goodput_bps=80_000 * 8 / page, wall_s=page + 0.2, overhead_s=0.2, wire_down_bytes=None,
        wire_up_bytes=None, wire_overhead=None, cc_client="x", cc_server="y",
        started_at=f"2026-01-01T00:00:0{repeat}Z", workload="page:4x20kB", objects=4, page_time_s=page,
        connections=1, handshakes=1)


def timings(page: float) -> list[ObjectTiming]:
    return [ObjectTiming(str(i), 0.0, page * (i + 1) / 4, 20_000, "2", True) for i in range(4)]


def test_objects_csv_keeps_only_rows_of_recorded_runs(tmp_path):
    a, b = record(0, "h2", 0, 0.4, 0), record(0, "h2", 1, 0.8, 0)
    stale = replace(b, started_at="2025-12-31T23:59:59Z")  # written, then the run was interrupted and re-run
    for r in (a, stale, b):
        objects_file.append(tmp_path, r.run_key, r.started_at, timings(r.page_time_s or 0))
    got = objects_file.read(tmp_path, [a, b])
    assert sorted(got) == [a.run_key, b.run_key]
    assert [o.done_s for o in got[b.run_key]] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert all(o.started_at == b.started_at for o in got[b.run_key])
    assert objects_file.read(tmp_path / "missing", [a]) == {}


def test_workload_report_tables_and_plots(tmp_path):
    records = []
    for point, loss in enumerate((0.0, 1.0)):
        for proto, slow in (("h2", 1.5), ("h3", 1.0)):
            for rep in range(3):
                r = record(point, proto, rep, (0.4 + 0.1 * rep) * slow * (1 + loss), loss)
                records.append(r)
                objects_file.append(tmp_path, r.run_key, r.started_at, timings(r.page_time_s or 0))
    (tmp_path / "runs.csv").write_text(csv_text(records))
    written = report.build(tmp_path, records)
    names = {p.name for p in written}
    assert {"workloads.md", "page_time.png", "page_time.svg", "objects_cdf_0.png", "objects_cdf_1.svg"} <= names
    md = (tmp_path / "workloads.md").read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| workload=")]
    assert len(rows) == 4
    h2_loss0 = next(ln for ln in rows if "loss=0%" in ln and "HTTP/2" in ln)
    assert "| 3/3 | 0.750 [0.675" in h2_loss0  # median of 0.6, 0.75, 0.9
    assert report.build(tmp_path, [replace(r, workload="bulk") for r in records]) == []


def test_objects_csv_torn_last_line_is_ignored_other_bad_rows_are_errors(tmp_path):
    from lab.errors import UsageError

    a = record(0, "h2", 0, 0.4, 0)
    objects_file.append(tmp_path, a.run_key, a.started_at, timings(0.4))
    path = tmp_path / objects_file.OBJECTS
    good = path.read_text()
    path.write_text(good + "0/h2/curl/nginx/0,2026-01-01T00:00:00Z,9,0.1")  # cut short
    assert len(objects_file.read(tmp_path, [a])[a.run_key]) == 4
    lines = good.splitlines(keepends=True)
    path.write_text(lines[0] + "garbage\n" + "".join(lines[1:]))
    with pytest.raises(UsageError, match="line 2"):
        objects_file.read(tmp_path, [a])
