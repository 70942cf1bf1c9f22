"""The trace plots (issue 35): a synthetic trace's capacity per bin as linkem loops it, the two panels drawn from a
trace and delivered-bytes series (what the trace could deliver counted from each run's own start on it), and a
report of a synthetic sweep over a trace pair that writes, links and inlines them (and says when the trace read now
is not the one the runs used)."""

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
from lab.report.trace_plots import Curve, capacity_bytes, could_deliver, make_trace_plots, trace_figure
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


def test_capacity_from_a_start_counts_from_there_and_still_loops() -> None:
    # bins [0.15, 0.35), [0.35, 0.55): the opportunities at 250 and 500 ms (the two at 100 ms came before)
    assert capacity_bytes([100, 100, 250, 500], 0.2, 0.55, start_s=0.15) == [1500, 1500]
    # from 9.5 s: 0.5 s at 3 Mbit/s, then the trace again from its beginning at 12 Mbit/s
    cap = capacity_bytes(TRACE, 0.5, 11.5, start_s=9.5)
    assert [b * 8 / 0.5 / 1e6 for b in cap] == pytest.approx([3.0, 12.0, 12.0, 12.0], rel=0.01)


def _series(rate_bps: float, seconds: float, start_s: float = 0.5, first_packet_s: float | None = None) -> Delivered:
    bins = [0] * int(start_s * 10) + [int(rate_bps / 8 / 10)] * int(seconds * 10)
    return Delivered(bin_s=0.1, bytes=tuple(bins), start_s=first_packet_s)


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
    # these series carry no start (cells written before it was kept): the capacity from the link's application
    assert labels == ["what the trace could deliver from the link's application (IP bytes; 3 run(s) without a "
                      "recorded start)", "HTTP/1.1 (1 run)", "HTTP/3 (2 runs)"]


def test_what_the_trace_could_deliver_starts_at_each_runs_own_start_on_the_trace() -> None:
    """A run whose first packet left 4.0 s after its link was applied (the trace restarts then) could have had 1 s
    at 12 Mbit/s and then 3 Mbit/s: its ceiling starts at (4.0 s, 0) and reaches 1.5 MB at 5 s and 3.0 MB at 9 s,
    not the 7.5 MB and 9 MB the trace offered from its beginning (the old line, from 0, for every run)."""
    late = Curve("h1", 0, _series(4e6, 5, start_s=4.0, first_packet_s=4.0))  # data 4.0-9.0 s
    early = Curve("h3", 0, _series(10e6, 4, start_s=0.3, first_packet_s=0.2))
    fig = trace_figure(TRACE, [late, early], "cellular: traces=cell size=10MB")
    bottom = fig.axes[1]
    dashed = {ln.get_color(): ln for ln in bottom.get_lines() if ln.get_linestyle() == "--" and len(ln.get_xdata())}
    assert len(dashed) == 2
    h1 = next(ln for ln in dashed.values() if ln.get_xdata()[0] == 4.0)
    xs, ys = list(h1.get_xdata()), list(h1.get_ydata())
    assert ys[0] == 0.0 and xs[-1] == pytest.approx(9.0)
    assert ys[xs.index(5.0)] == pytest.approx(1.5, rel=0.01) and ys[-1] == pytest.approx(3.0, rel=0.01)
    h3 = next(ln for ln in dashed.values() if ln is not h1)
    assert h3.get_xdata()[0] == 0.2 and h3.get_ydata()[0] == 0.0
    assert (list(h3.get_xdata()), list(h3.get_ydata())) == tuple(map(list, could_deliver(TRACE, 0.1, 0.2, 4.3)))
    labels = [t.get_text() for t in bottom.get_legend().get_texts()]
    assert labels[0] == "what the trace could deliver from the run's first packet (IP bytes; run's colour)"


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
            series = _series(rate * (1 - 0.05 * rep), 5, first_packet_s=0.4)
            records.append(replace(r, link=link, delivered=series.to_json()))
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
