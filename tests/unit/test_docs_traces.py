"""The generated section of a sweep over recorded traces (block `traces-PRESET`, lab/docgen/traces.py; issue 35
item 4) on a synthetic folder: each protocol's median with its CI at its level, a censored run counted (not
dropped) in the medians and the verdicts, HTTP/3 against HTTP/2 and HTTP/1.1 by the comparison rule, the trace's
capacity over each run's span counted here by hand from the trace, the plot linked from the document's place; a
folder not committed and a trace file gone each say so instead of a number."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab import config
from lab.docgen import blocks, traces
from lab.evidence.delivered import Delivered
from lab.link import linkem
from lab.link.spec import parse_link
from lab.results.schema import csv_text
from tests.unit.test_stats import make_record

#: 10 s: one opportunity a millisecond for 5 s (12 Mbit/s), then one every 4 ms (3 Mbit/s)
DOWN = [*range(1, 5001), *range(5004, 10001, 4)]
UP = list(range(2, 10001, 2))  # 6 Mbit/s
START_S = 0.5  # every run's first packet on the trace
H1 = [2.0, 2.1, 2.2, 2.3, 6.0]  # the last one failed at its own end, 6.0 s
H2 = [1.01, 1.0605, 1.111, 1.1615, 1.212]  # H3 x 1.01
H3 = [1.0, 1.05, 1.1, 1.15, 1.2]


def _opportunities(trace: list[int], start_s: float, span_s: float) -> int:
    """By hand, without the plots' binning: the trace's entries in [start, start + span) ms (no loop: < 10 s)."""
    lo, hi = round(start_s * 1000), round((start_s + span_s) * 1000)
    return sum(1 for t in trace if lo <= t < hi)


def _mbit(trace: list[int], span_s: float) -> float:
    return _opportunities(trace, START_S, span_s) * 1500 * 8 / span_s / 1e6


@pytest.fixture
def reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tdir = tmp_path / "traces"
    tdir.mkdir()
    (tdir / "cell.down").write_text("".join(f"{t}\n" for t in DOWN))
    (tdir / "cell.up").write_text("".join(f"{t}\n" for t in UP))
    monkeypatch.setattr(config, "TRACES_DIR", tdir)
    link = json.dumps(linkem.record_json(parse_link({"traces": "cell", "rtt": "40ms"})), separators=(",", ":"))
    records = []
    for proto, ts in (("h1", H1), ("h2", H2), ("h3", H3)):
        for rep, t in enumerate(ts):
            r = make_record(point=0, protocol=proto, repeat=rep, total_s=t, x_name="point", x=0.0,
                            label="traces=cell size=1MB", sweep="cell")
            series = Delivered(bin_s=0.1, bytes=(0, 0, 0, 0, 0, 500_000, 500_000), start_s=START_S)
            records.append(replace(r, link=link, delivered=series.to_json(), timeout_s=60.0))
    failed = 4  # h1, repeat 4: failed at its own end
    records[failed] = replace(records[failed], status="failed", failure="curl exit 56", goodput_bps=None,
                              total_s=H1[failed])
    unsupported = replace(make_record(point=0, protocol="h3", repeat=0, client="other", label="traces=cell size=1MB",
                                      sweep="cell", x_name="point", x=0.0), status="unsupported", link=link,
                          total_s=None)
    ref = tmp_path / "results" / "reference"
    folder = ref / "cell"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "trace-0.svg").write_text("<svg/>")
    (folder / "runs.csv").write_text(csv_text([*records, unsupported]))
    scenario = {"name": "cell", "sizes": ["1MB"], "link": {"rtt": "40ms"}, "sweep": {"traces": ["cell"]}}
    (folder / "manifest.json").write_text(json.dumps({"name": "cell", "preset": "cell", "status": "complete",
                                                      "scenario": scenario}))
    return ref


def _render(reference: Path) -> str:
    return blocks.render("traces-cell", reference, reference.parent.parent / "docs" / "results.md")


def _row(text: str, first: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {first} "))
    return [c.strip() for c in line.strip("|").split("|")]


def test_medians_with_their_level_and_the_censored_run_counted(reference: Path) -> None:
    text = _render(reference)
    row = _row(text, "cell")
    assert row[:3] == ["cell", "down", "1 MB"]
    # HTTP/1.1: 2.0, 2.1, 2.2, 2.3 and one censored above 6.0: the median is the third, the CI's top a bound;
    # n = 5 (the range at 93.75 %, 1 - 2/32)
    assert row[3] == "5 (1 censored): 2.20 [2.00\u2013>6.00, 93.8 %]"
    assert row[4] == "5: 1.11 [1.01\u20131.21, 93.8 %]"
    assert row[5] == "5: 1.10 [1.00\u20131.20, 93.8 %]"
    assert "other" not in text  # the unsupported run did not run: no column, no count


def test_the_verdicts_by_the_comparison_rule_and_the_sentences_name_the_folder(reference: Path) -> None:
    text = _render(reference)
    table = [ln for ln in text.splitlines() if ln.startswith("| cell ")][1]
    cells = [c.strip() for c in table.strip("|").split("|")]
    # HTTP/3 / HTTP/2: every pair 1/1.01 = 0.990, the whole CI within +-10 %: parity
    assert cells[3] == "0.990 [0.990\u20130.990, 93.8 %] paired: parity"
    # HTTP/3 / HTTP/1.1: 0.5 in four pairs, and one pair whose HTTP/1.1 side is censored (1.2/6.0 = 0.2, known
    # only as "below"; the level then at least): the CI [<0.2, 0.5] lies below 1/1.1: HTTP/3 faster
    assert cells[4] == "0.500 [<0.200\u20130.500, \u226593.8 %] paired: HTTP/3 faster"
    assert ("HTTP/3 vs HTTP/1.1 in `results/reference/cell/` over its 1 trace x size cells: HTTP/3 faster at 1 "
            "(cell 1 MB).") in text
    assert "HTTP/3 vs HTTP/2 in `results/reference/cell/` over its 1 trace x size cells: parity at 1 (cell 1 MB)." \
        in text


def test_the_capacity_over_each_runs_span_counted_from_the_trace(reference: Path) -> None:
    row = _row(_render(reference), "cell")
    spans = [*H1, *H2, *H3]
    down = sorted(_mbit(DOWN, s) for s in spans)
    up = sorted(_mbit(UP, s) for s in spans)
    assert down[0] < 11.0 < down[1] == pytest.approx(12.0, rel=1e-3)  # only the censored run's span reaches 5 s
    assert row[6] == f"{down[7]:.2f} [{down[0]:.2f}\u2013{down[-1]:.2f}], 15 runs"
    assert row[7] == f"{up[7]:.2f} [{up[0]:.2f}\u2013{up[-1]:.2f}], 15 runs"
    assert row[8] == "[trace-0.svg](../results/reference/cell/plots/trace-0.svg)"
    assert "cell: down 7.5 Mbit/s over 10 s, up 6.0 Mbit/s over 10 s" in _render(reference)


def test_a_trace_file_gone_or_changed_gives_no_capacity_and_says_why(reference: Path) -> None:
    (config.TRACES_DIR / "cell.up").write_text("1\n2\n3\n")
    row = _row(_render(reference), "cell")
    assert row[7] == "- (the trace file differs now from the one the runs used (SHA-256))"
    assert row[6].endswith("15 runs")
    (config.TRACES_DIR / "cell.down").unlink()
    row = _row(_render(reference), "cell")
    assert row[6].startswith("- (") and "cell.down" in row[6]
    assert row[3].startswith("5 (1 censored): 2.20")  # the times are the folder's: still there


def test_a_folder_not_committed_says_so_without_a_number(reference: Path) -> None:
    text = blocks.render("traces-nothere", reference)
    assert text == "*Not run yet: no `results/reference/nothere/` (`bash scripts/atlas.sh nothere` makes it).*\n"


def test_cells_are_per_trace_and_size_and_skip_untraced_points(reference: Path) -> None:
    from lab.report.report import load_sweep

    records, _ = load_sweep(reference / "cell")
    plain = [replace(r, point=1, point_label="rate=5mbit", link="{}") for r in records[:3]]
    cs = traces.cells([*records, *plain])
    assert [(c.trace, c.direction, c.size, len(c.runs)) for c in cs] == [("cell", "down", 1_000_000, 15)]
