"""report.html opens with one sentence per point and pair (issue 25 point 4) by the one comparison rule (issue 37:
lab/stats/verdict.py, as `compare` and the atlas): a difference stated only when the paired CI lies wholly
outside +-10 %, equivalence when wholly inside, with its numbers; then the plots, then the tables."""

from __future__ import annotations

from pathlib import Path

from lab.report.headline import sentences
from lab.report.html import report_html
from lab.results.schema import RunRecord


def run(protocol: str, repeat: int, total_s: float) -> RunRecord:
    size = 1_000_000
    return RunRecord(
        sweep="s", run_key=f"0/{protocol}/curl/nginx/{repeat}", point=0, point_label="loss=1%", x_name="loss_pct",
        x=1.0, protocol=protocol, client="curl", server="nginx", repeat=repeat, order=repeat, seed=repeat,
        shaper="linkem", rate_bps=5e6, rtt_s=0.04, loss_pct=1.0, jitter_s=0.0, link="{}", size_bytes=size,
        status="ok", failure="", http_version="3" if protocol == "h3" else "2", bytes=size, sha256_ok=True,
        handshake_s=0.1, ttfb_s=0.2, total_s=total_s, goodput_bps=size * 8 / total_s, wall_s=total_s,
        overhead_s=0.1, wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None, cc_client="x", cc_server="y",
        started_at=f"2026-01-01T00:00:0{repeat}Z")


def sweep(h3: list[float], h2: list[float]) -> list[RunRecord]:
    return [run("h3", i, t) for i, t in enumerate(h3)] + [run("h2", i, t) for i, t in enumerate(h2)]


def test_a_clear_difference_is_stated_with_its_size_and_interval() -> None:
    (s,) = sentences(sweep([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.2, 2.4, 2.6, 2.8]))
    assert s.startswith("loss=1%, curl→nginx: HTTP/3 was 50 % faster than HTTP/2")
    assert "CI 0.500\u20130.500 (93.8 %), 5 pairs" in s


def test_slower_is_said_too_and_an_interval_spanning_one_is_no_difference() -> None:
    (slow,) = sentences(sweep([2.0, 2.2, 2.4, 2.6, 2.8], [1.0, 1.1, 1.2, 1.3, 1.4]))
    assert "HTTP/3 was 100 % slower than HTTP/2" in slow
    (far,) = sentences(sweep([15.1, 15.2, 15.3, 15.4, 15.5], [1.0] * 5))  # the satellite-loss matrix's 15x
    assert "HTTP/3 was 1430 % slower than HTTP/2" in far  # time ratio 15.3 (not "1.43e+03 %")
    (none,) = sentences(sweep([1.0, 1.3, 0.9, 1.2, 1.0], [1.1, 1.0, 1.0, 1.0, 1.2]))
    assert "no verdict between HTTP/3 and HTTP/2 at this n" in none and "crosses \u00b110 %" in none


def test_a_difference_inside_the_margin_is_equivalence_not_faster() -> None:
    """The issue's two rules: a paired CI of 0.973-0.996 excludes 1 but lies inside +-10 %: compare called that
    equivalent while "In short" said "1.47 % faster". One rule now: equivalent."""
    (s,) = sentences(sweep([0.985, 0.975, 0.99, 0.995, 0.98], [1.0] * 5))
    assert "HTTP/3 and HTTP/2 equivalent within \u00b110 % (0.909\u20131.10)" in s
    assert "faster" not in s and "5 pairs" in s


def test_runs_over_other_link_seeds_are_judged_unpaired_and_say_so() -> None:
    recs = sweep([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.2, 2.4, 2.6, 2.8])
    for r in recs:
        if r.protocol == "h2":
            r.seed += 100
    (s,) = sentences(recs)
    assert "HTTP/3 was" in s and "unpaired (pairing broken: link seeds differ at 5 of 5 repeats)" in s
    assert "(90.5 %)" in s  # the Hodges-Lehmann interval's exact level at 5 runs a side


def test_the_report_opens_with_the_sentences_then_plots_then_tables() -> None:
    html = report_html(sweep([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.2, 2.4, 2.6, 2.8]), {}, Path("/nonexistent"))
    order = [html.index(h) for h in ("<h2>In short</h2>", "<h2>Plots</h2>", "<h2>Transfer time and goodput",
                                     "<h2>HTTP/3 vs TCP</h2>", "<h2>Sweep</h2>")]
    assert order == sorted(order)
    assert "HTTP/3 was 50 % faster than HTTP/2" in html
