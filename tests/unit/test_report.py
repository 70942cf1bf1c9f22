"""Reports of a synthetic sweep folder: every artifact written, one table row per point and protocol, exclusions
stated, a self-contained HTML page, comparisons of two sweeps."""

import json
import re
from pathlib import Path

import pytest

from lab.errors import UsageError
from lab.report.report import build_report, compare_markdown, compare_sweeps
from lab.results.schema import csv_text, read_runs
from tests.unit.test_stats import make_record

LOSSES = (0.0, 0.5, 1.0, 3.0)
PROTOCOLS = ("h1", "h2", "h3")
REPEATS = 4
TIMEOUT = 120.0
FAILED = {(1, "h3", 2): ("failed", "curl exit 56: connection reset"), (3, "h1", 0): ("timeout", "no answer in 120 s")}


def make_sweep(folder, name="loss-demo", slow=1.0, x_name="loss_pct"):
    """A results folder: 4 points x 3 protocols x 4 repeats, two runs excluded."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = []
    for p, loss in enumerate(LOSSES):
        for pr in PROTOCOLS:
            for rep in range(REPEATS):
                base = {"h1": 2.0, "h2": 2.1, "h3": 1.6}[pr] * (1 + loss) * slow
                status, failure = FAILED.get((p, pr, rep), ("ok", ""))
                x = loss if x_name == "loss_pct" else float(p)
                recs.append(make_record(point=p, protocol=pr, repeat=rep, total_s=base * (1 + 0.03 * rep),
                                        status=status, failure=failure, x=x, x_name=x_name, timeout_s=TIMEOUT,
                                        label=f"loss={loss:g}% rtt=40ms" if x_name == "point" else None,
                                        sweep=name))
    (folder / "runs.csv").write_text(csv_text(recs))
    manifest = {"name": name, "scenario": "connectify-loss", "preset": "quick", "started_at": "2024-06-01T12:00:00Z",
                "git_commit": "0123abcd", "shaper": "linkem", "repeats": REPEATS,
                "versions": {"curl": "8.9.1", "nginx": "1.27.1"},
                "self_check": {"rtt": {"configured_ms": 40, "measured_ms": 40.8},
                               "rate": {"configured_mbit": 10, "measured_mbit": 9.71}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _table_rows(md, header_start):
    lines = md.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        rows.append(ln)
    return rows


def test_build_report_writes_every_artifact(tmp_path):
    folder = make_sweep(tmp_path / "20240601-loss")
    paths = build_report(folder)
    names = {p.relative_to(folder).as_posix() for p in paths}
    assert names == {"summary.md", "plots/goodput.png", "plots/goodput.svg", "plots/time.png", "plots/time.svg",
                     "report.html"}
    for p in paths:
        assert p.stat().st_size > 500, p
    assert not [p for p in folder.rglob(".*tmp*")], "temporary files left behind"
    assert build_report(folder) == paths  # rebuilds in place


def test_summary_rows_and_exclusions(tmp_path):
    folder = make_sweep(tmp_path / "s")
    build_report(folder)
    md = (folder / "summary.md").read_text()
    rows = _table_rows(md, "| parameter | method |")
    assert len(rows) == len(LOSSES) * len(PROTOCOLS)
    # n = 4: the CI is the range and says so (87.5 %), never a flat "95 %"
    assert rows[0] == ("| loss=0% | HTTP/1.1 curl→nginx | 4 | 2.09 [2.04\u20132.14] | 2.00\u20132.18 | "
                       "3.83 [3.75\u20133.91] | 3.67\u20134.00 | 87.5 % | 0 | 0 |")
    assert "95 % CI" not in md and "| 95.0 % |" not in md
    # the failed run counts as a result, censored at its 120 s timeout: n stays 4, the CI's far end is a bound
    assert ("| loss=0.5% | HTTP/3 curl→nginx | 4 | 2.54 [2.45\u2013>32.0] | 2.40\u2013>120 | "
            "3.15 [<2.31\u20133.26] | <0.0667\u20133.33 | 87.5 % | 1 (failed 1) | 0 |") in rows
    assert any("HTTP/1.1 curl→nginx | 4 |" in r and "| 1 (timeout 1) | 0 |" in r for r in rows)
    for needle in ("loss-demo", "connectify-loss", "0123abcd", "linkem", "## HTTP/3 vs TCP", "## Excluded runs",
                   "## Runs that did not complete", "Failed and timed-out runs are results",
                   "curl exit 56: connection reset", "no answer in 120 s", "2 of 48 runs did not complete (censored)",
                   "No runs excluded", "48 (46 completed, 2 censored, 0 excluded)",
                   "median of the per-pair ratios", "order-statistic", "## Shaper self-check", "measured_ms: 40.8"):
        assert needle.lower() in md.lower(), needle
    ratio_rows = _table_rows(md, "| parameter | client→server | comparison |")
    assert len(ratio_rows) == len(LOSSES) * 2
    assert ratio_rows[0] == ("| loss=0% | curl→nginx | HTTP/3 / HTTP/1.1 | 4 | 0.800 | 0.800\u20130.800 | 1.25 | "
                             "1.25\u20131.25 | 87.5 % | 0 | 0 |")
    # HTTP/3 failed in one pair at loss 0.5 %: that pair's time ratio is > 120 / 3.18 and ranks highest
    assert ratio_rows[2] == ("| loss=0.5% | curl→nginx | HTTP/3 / HTTP/1.1 | 4 | 0.800 | 0.800\u2013>37.7 | 1.25 | "
                             "<0.0265\u20131.25 | 87.5 % | 1 | 0 |")
    # HTTP/1.1 timed out in one pair at loss 3 %: that pair's time ratio is < 6.98 / 120 and ranks lowest
    assert "| loss=3% | curl→nginx | HTTP/3 / HTTP/1.1 | 4 | 0.800 | <0.0533\u20130.800 |" in ratio_rows[6]


def test_non_results_are_excluded_and_counted_everywhere(tmp_path):
    from lab.report.summary import summary_markdown

    recs = [make_record(protocol=pr, repeat=i, total_s=1.0 + i, timeout_s=TIMEOUT) for pr in ("h1", "h3")
            for i in range(6)]
    recs += [make_record(protocol="h2", status="unsupported", failure="no HTTP/2"),
             make_record(protocol="h3", repeat=6, status="interrupted", failure="interrupted by the user (Ctrl-C)"),
             make_record(protocol="h1", repeat=6, total_s=3.0, timeout_s=TIMEOUT)]
    md = summary_markdown(recs, {})
    rows = _table_rows(md, "| parameter | method |")
    # times 1, 2, 3, 3, 4, 5, 6 s; goodputs 8 / t Mbit/s; n = 7: the range at 1 - 2/2^7 = 98.4 %
    assert rows[0] == ("| loss=0% | HTTP/1.1 curl→nginx | 7 | 3.00 [2.50\u20134.50] | 1.00\u20136.00 | "
                       "2.67 [1.80\u20133.33] | 1.33\u20138.00 | 98.4 % | 0 | 0 |")
    assert rows[1].endswith("| 0 | unsupported | - | unsupported | - | - | 0 | 1 (unsupported 1) |")
    assert rows[2].startswith("| loss=0% | HTTP/3 curl→nginx | 6 |") and "| 96.9 % | 0 | 1 (interrupted 1) |" in rows[2]
    assert "2 of 15 runs excluded" in md and "Every run that is a result completed." in md
    [ratio] = _table_rows(md, "| parameter | client→server | comparison |")  # no HTTP/2 row: it cannot run
    assert ratio.endswith("| 6 | 1.00 | 1.00\u20131.00 | 1.00 | 1.00\u20131.00 | 96.9 % | 0 | 1 (unpaired 1) |")


def test_plots_state_the_level_they_have(tmp_path):
    from lab.report.plots import _figure, ci_levels
    from lab.stats.stats import summarize

    folder = make_sweep(tmp_path / "s")
    recs = read_runs(folder / "runs.csv").records
    groups = summarize(recs)
    assert ci_levels(groups) == "87.5 %"
    title = _figure(groups, {}, "time", "t").axes[0].get_title()
    assert "at 87.5 %" in title and "95 %" not in title and "censored" in title
    more = summarize([*recs, make_record(point=0, protocol="h1", repeat=4, total_s=2.0, timeout_s=TIMEOUT)])
    assert ci_levels(more) == "87.5\u201393.8 % (by n)"


def test_html_is_self_contained(tmp_path):
    folder = make_sweep(tmp_path / "s")
    build_report(folder)
    html = (folder / "report.html").read_text()
    assert html.count("<svg") >= 2
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html.lower() and "@import" not in html and not re.search(r"url\(\s*['\"]?(?!#)", html)
    assert "curl exit 56: connection reset" in html and "<details" in html and "HTTP/3 vs TCP" in html


def test_categorical_points_plot(tmp_path):
    folder = make_sweep(tmp_path / "grid", x_name="point")
    build_report(folder)
    assert "loss=1% rtt=40ms" in (folder / "report.html").read_text()


def test_all_failed_sweep_still_reports(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "runs.csv").write_text(csv_text([make_record(status="failed", failure="image missing")]))
    paths = build_report(folder)  # no manifest.json either
    assert len(paths) == 6
    md = (folder / "summary.md").read_text()
    # a failed run is a censored result; with no timeout_s and nothing completed its bound is unknown
    assert "1 of 1 runs did not complete (censored)" in md and "No runs excluded." in md
    assert "| 1 | >? [>?\u2013>?] | - | <? [<?\u2013<?] | - | - | 1 (failed 1) | 0 |" in md
    (folder / "runs.csv").write_text(csv_text([make_record(status="unsupported", failure="no HTTP/3 here")]))
    build_report(folder)
    assert "1 of 1 runs excluded" in (folder / "summary.md").read_text()


def test_compare_two_sweeps(tmp_path):
    a = make_sweep(tmp_path / "a", name="before")
    b = make_sweep(tmp_path / "b", name="after", slow=2.0)
    md = compare_markdown(a, b)
    rows = _table_rows(md, "| parameter | method | n A/B |")
    assert len(rows) == len(LOSSES) * len(PROTOCOLS)
    assert rows[0] == "| loss=0% | HTTP/1.1 curl→nginx | 4/4 | 0/0 | 0/0 | 2.09 | 4.18 | 3.83 | 1.91 |"
    ratio_rows = _table_rows(md, "| parameter | method | pairs |")
    assert len(ratio_rows) == len(rows)
    assert all("| 2.00 | 2.00\u20132.00 | 0.500 | 0.500\u20130.500 |" in r for r in ratio_rows), ratio_rows
    # the run that failed in both sweeps (same point, method, repeat) is an indeterminate pair: excluded, shown
    assert ratio_rows[5] == ("| loss=0.5% | HTTP/3 curl→nginx | 3 | 2.00 | 2.00\u20132.00 | 0.500 | "
                             "0.500\u20130.500 | 75.0 % | 0 | 1 (both censored 1) |")
    assert "before" in md and "after" in md and "median of the per-pair ratios" in md
    c = compare_sweeps(a, a)
    assert not c.only_a and not c.only_b


def test_compare_pairs_only_the_same_link_seed(tmp_path):
    a = make_sweep(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    recs = [make_record(point=0, x=0.0, protocol="h1", repeat=i, total_s=4.0) for i in range(3)]
    recs[2].seed += 1  # repeat 2 ran over another link seed: not a pair
    (b / "runs.csv").write_text(csv_text(recs))
    [row] = compare_sweeps(a, b).ratio_table[1]
    # pairs: repeat 0 (4 / 2.00) and repeat 1 (4 / 2.06): median (2 + 1.942) / 2
    assert row[2:4] == ["2", "1.97"] and row[-1] == "2 (seeds differ 1, unpaired 1)"


def test_compare_lists_rows_in_one_sweep_only(tmp_path):
    a = make_sweep(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    (b / "runs.csv").write_text(csv_text([make_record(point=0, x=0.0, protocol="h3")]))
    c = compare_sweeps(a, b)
    assert len(c.table[1]) == 1 and len(c.only_a) == len(LOSSES) * len(PROTOCOLS) - 1 and c.only_b == []
    assert "Only in A:" in compare_markdown(a, b)


def test_missing_runs_csv_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"no runs\.csv in") as e:
        build_report(tmp_path / "nonexistent")
    assert e.value.exit_code == 2 and "nonexistent" in str(e.value) and "\n" not in str(e.value)


def test_bad_manifest_is_a_usage_error(tmp_path):
    folder = make_sweep(tmp_path / "s")
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"manifest\.json"):
        build_report(folder)


def _cli():
    import typer

    from lab.cli import compare, report

    app = typer.Typer()
    report.register(app)
    compare.register(app)
    return app


def test_cli_report_and_compare(tmp_path):
    from typer.testing import CliRunner

    a, b = make_sweep(tmp_path / "a"), make_sweep(tmp_path / "b", slow=2.0)
    r = CliRunner().invoke(_cli(), ["report", str(a)])
    assert r.exit_code == 0, r.output
    assert "report.html" in r.output and "HTTP/3 curl→nginx" in r.output
    assert "CI level" in r.output and "87.5 %" in r.output and "1 (failed 1)" in r.output
    before = sorted(p.name for p in b.iterdir())
    r = CliRunner().invoke(_cli(), ["compare", str(a), str(b)])
    assert r.exit_code == 0, r.output
    assert "2.00" in r.output and "0.500" in r.output and "87.5 %" in r.output and "both censored 1" in r.output
    assert sorted(p.name for p in b.iterdir()) == before  # compare writes nothing
    r = CliRunner().invoke(_cli(), ["report", str(tmp_path / "nowhere")])
    assert isinstance(r.exception, UsageError) and "nowhere" in str(r.exception)


def test_receiver_side_drops_are_called_out():
    from lab.report.html import report_html
    from lab.report.summary import receiver_drops_note, summary_markdown

    clean = [make_record(repeat=i) for i in range(3)]
    assert receiver_drops_note(clean) == ""
    assert "Receiver-side drops" not in summary_markdown(clean, {})
    hit = [*clean, make_record(repeat=3), make_record(repeat=4, status="failed")]
    hit[3].client_rcvbuf_drops, hit[4].client_rcvbuf_drops = 120, 9  # the failed run does not count
    note = receiver_drops_note(hit)
    assert "1 of 4 ok runs" in note and "120 in all" in note
    assert note in summary_markdown(hit, {})
    assert "Receiver-side drops: 1 of 4" in report_html(hit, {}, Path("/nonexistent"))
