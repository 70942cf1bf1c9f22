"""The trace plots (issue 35): a synthetic trace's capacity per bin as linkem loops it, the two panels drawn from a
trace and delivered-bytes series, and a report of a synthetic sweep over a trace pair that writes, links and
inlines them (and says when the trace read now is not the one the runs used)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab import config
from lab.evidence.delivered import Delivered
from lab.link import linkem
from lab.link.spec import parse_link
from lab.report.report import build_report
from lab.report.trace_plots import Curve, capacity_bytes, make_trace_plots, trace_figure
from lab.report.traced import summary_line, trace_points
from lab.results.schema import csv_text
from tests.unit.test_stats import make_record

#: 10 s: 5 s at one opportunity a millisecond (12 Mbit/s), then 5 s at one every 4 ms (3 Mbit/s)
TRACE = [*range(1, 5001), *range(5004, 10001, 4)]


def test_capacity_counts_each_opportunity_in_its_bin_and_loops_the_trace() -> None:
    assert capacity_bytes([100, 100, 250, 500], 0.2, 1.0) == [3000, 1500, 1500, 4500, 0]
    cap = capacity_bytes(TRACE, 1.0, 12.0)
    # (1 ms off at the edges: the trace's first entry is at 1 ms, the 3 Mbit/s part starts at 5004 ms)
    assert [b * 8 / 1e6 for b in cap] == pytest.approx([12.0] * 5 + [3.0] * 5 + [12.0] * 2, rel=0.005)  # loops at 10 s


def _series(rate_bps: float, seconds: float, start_s: float = 0.5) -> Delivered:
    bins = [0] * int(start_s * 10) + [int(rate_bps / 8 / 10)] * int(seconds * 10)
    return Delivered(bin_s=0.1, bytes=tuple(bins))


def test_the_figure_has_the_capacity_above_and_every_run_below() -> None:
    curves = [Curve("h3", 0, _series(10e6, 4)), Curve("h3", 1, _series(9e6, 4)), Curve("h1", 0, _series(8e6, 5))]
    fig = trace_figure(TRACE, curves, "cellular: traces=cell size=10MB")
    top, bottom = fig.axes
    assert top.get_ylabel() == "capacity (Mbit/s)" and bottom.get_ylabel() == "delivered (MB)"
    heights = max(top.patches[0].get_data().values)
    assert heights == pytest.approx(12.0)
    lines = bottom.get_lines()
    dashed = [ln for ln in lines if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and len(lines) == 4
    end = dashed[0].get_xdata()[-1]
    assert dashed[0].get_ydata()[-1] == pytest.approx(sum(capacity_bytes(TRACE, 0.1, end)) / 1e6)
    finals = sorted(round(ln.get_ydata()[-1], 3) for ln in lines if ln not in dashed)
    assert finals == [4.5, 5.0, 5.0]  # each run's delivered total (8 Mbit/s x 5 s, 10 x 4, 9 x 4 rounded up)
    labels = [t.get_text() for t in bottom.get_legend().get_texts()]
    assert labels == ["what the trace could deliver (IP bytes)", "HTTP/1.1 (1 run)", "HTTP/3 (2 runs)"]


def test_without_the_trace_the_runs_are_still_drawn_and_the_reason_shown() -> None:
    fig = trace_figure(None, [Curve("h2", 0, _series(5e6, 2))], "t", "the trace cannot be read: gone")
    top, bottom = fig.axes
    assert "trace not drawn: the trace cannot be read: gone" in [t.get_text() for t in top.texts]
    assert len(bottom.get_lines()) == 1


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "cell.down").write_text("".join(f"{t}\n" for t in TRACE))
    (traces / "cell.up").write_text("".join(f"{t}\n" for t in range(2, 10001, 2)))
    monkeypatch.setattr(config, "TRACES_DIR", traces)
    link = json.dumps(linkem.record_json(parse_link({"traces": "cell", "rtt": "40ms"})), separators=(",", ":"))
    records = []
    for proto, rate in (("h1", 8e6), ("h2", 8.5e6), ("h3", 10e6)):
        for rep in range(3):
            r = make_record(point=0, protocol=proto, repeat=rep, total_s=5.0, x_name="point", x=0.0,
                            label="traces=cell", sweep="cellular")
            records.append(replace(r, link=link, delivered=_series(rate * (1 - 0.05 * rep), 5).to_json()))
    records[0] = replace(records[0], status="failed", delivered="")
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "runs.csv").write_text(csv_text(records))
    scenario = {"name": "cellular", "sizes": ["10MB"], "link": {"rtt": "40ms"}, "sweep": {"traces": ["cell"]}}
    (folder / "manifest.json").write_text(json.dumps({"name": "cellular", "scenario": scenario}))
    return folder


def test_a_report_over_a_trace_writes_links_and_inlines_its_trace_plot(sweep: Path) -> None:
    paths = {p.relative_to(sweep).as_posix() for p in build_report(sweep)}
    assert {"plots/trace-0.svg", "plots/trace-0.png"} <= paths
    svg = (sweep / "plots" / "trace-0.svg").read_text()
    assert "<svg" in svg
    summary = (sweep / "summary.md").read_text()
    assert "Trace plots" in summary and "[trace-0](plots/trace-0.png)" in summary
    html = (sweep / "report.html").read_text()
    assert html.count("<svg") == 3  # goodput, time and the trace plot


def test_a_trace_that_changed_since_the_runs_is_not_drawn_as_theirs(sweep: Path) -> None:
    from lab.results.schema import read_runs

    records = read_runs(sweep / "runs.csv").records
    manifest = json.loads((sweep / "manifest.json").read_text())
    (config.TRACES_DIR / "cell.down").write_text("1\n2\n3\n")
    seen: list[str] = []
    import lab.report.trace_plots as tp

    real = tp.trace_figure

    def spy(trace, curves, title, note=""):  # type: ignore[no-untyped-def]
        seen.append(note)
        assert trace is None and len(curves) == 8  # the failed run has no series
        return real(trace, curves, title, note)

    tp.trace_figure = spy  # type: ignore[assignment]
    try:
        make_trace_plots(records, manifest, sweep / "plots")
    finally:
        tp.trace_figure = real  # type: ignore[assignment]
    assert seen == ["the trace file differs now from the one the runs used (SHA-256); 1 run(s) without a series "
                    "(not ok, or not captured)"]


def test_a_sweep_without_traces_has_no_trace_plots(tmp_path: Path) -> None:
    records = [replace(make_record(point=0), delivered=_series(5e6, 1).to_json())]  # a series, but no trace
    assert trace_points(records) == [] and summary_line(records) == ""
    assert make_trace_plots(records, {}, tmp_path) == []
