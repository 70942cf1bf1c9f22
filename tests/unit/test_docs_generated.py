"""The documents generated from committed data (issue 26): docs/seeds.md and the generated blocks of README.md and
docs/results.md match results/reference/ as committed (`quiclab docs --check`); the atlas's comparison rule on
synthetic sweeps (direction, censoring, the seed's band); the seeds' numbers in docs/seeds.toml are the seed files'
own, on the lines cited."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from lab import config
from lab.docgen import atlas, generated
from lab.errors import UsageError
from lab.results.schema import RunRecord
from lab.stats.stats import Est

SEEDS_DIR = config.ROOT.parent / "shared" / "seeds"


def test_every_generated_document_matches_its_committed_data() -> None:
    stale = [str(p.relative_to(config.ROOT)) for p in generated.stale()]
    assert not stale, f"{stale} no longer match results/reference/: run `quiclab docs` and commit"


def test_every_reference_folder_is_complete_and_its_summary_is_what_report_builds() -> None:
    from lab.report.report import folder_texts, load_sweep

    folders = sorted(p for p in atlas.REFERENCE.iterdir() if (p / "runs.csv").is_file())
    assert folders, "no committed reference folder"
    for f in folders:
        records, manifest = load_sweep(f)
        if f.name != manifest.get("preset"):
            continue  # benchmark folders (bench parallel, startup, degraded set-up) have their own tests
        assert manifest.get("status") == "complete", f"{f.name}: {manifest.get('status')}"
        planned = manifest.get("planned_runs")
        keys = [r.run_key for r in records]
        assert len(keys) == len(set(keys)) == planned, f"{f.name}: not every planned run once"  # no key twice
        for path, text in folder_texts(f, records, manifest).items():  # summary.md (and a matrix's matrix.md)
            assert path.read_text(encoding="utf-8") == text, (
                f"{f.name}/{path.name} is not what `quiclab report` builds from its runs.csv")


def run(protocol: str, repeat: int, total_s: float, status: str = "ok", point: str = "loss=1%",
        client: str = "curl", server: str = "nginx") -> RunRecord:
    size = 10_000_000
    return RunRecord(
        sweep="s", run_key=f"0/{protocol}/{client}/{server}/{repeat}", point=0, point_label=point, x_name="loss_pct",
        x=1.0, protocol=protocol, client=client, server=server, repeat=repeat, order=repeat, seed=repeat,
        shaper="linkem", rate_bps=5e6, rtt_s=0.16, loss_pct=1.0, jitter_s=0.0, link="{}", size_bytes=size,
        status=status, failure="" if status == "ok" else "timed out", http_version="3" if protocol == "h3" else "1.1",
        bytes=size if status == "ok" else 0, sha256_ok=status == "ok", handshake_s=0.3, ttfb_s=0.5,
        total_s=total_s if status == "ok" else None, goodput_bps=size * 8 / total_s if status == "ok" else None,
        wall_s=total_s, overhead_s=0.1, wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None, cc_client="x",
        cc_server="y", started_at=f"2026-01-01T00:00:0{repeat}Z", timeout_s=120.0 if status != "ok" else None)


QUIC, TCP = atlas.Side(protocol="h3"), atlas.Side(protocol="h1")


def cell(quic_times: list[float], tcp_times: list[float]) -> atlas.LabCell:
    records = [run("h3", i, t) for i, t in enumerate(quic_times)] + [run("h1", i, t) for i, t in enumerate(tcp_times)]
    return atlas.compare_methods(records, records, "loss=1%", QUIC, TCP)


def test_quic_twice_as_fast_is_quic_faster_with_its_ratio_and_level() -> None:
    c = cell([10.0, 10.2, 10.4, 10.6, 10.8], [20.0, 20.4, 20.8, 21.2, 21.6])
    assert c.direction == "QUIC faster"
    assert c.ratio_value == pytest.approx(0.5, rel=0.03)
    assert c.ci is not None and c.ci.level >= 0.90
    assert (c.n_quic, c.n_tcp, c.quic_median, c.tcp_median) == (5, 5, Est(10.4), Est(20.8))


def test_equal_times_are_parity_and_overlapping_noise_is_no_verdict() -> None:
    assert cell([10.0, 10.1, 10.2, 10.3, 10.4], [10.05, 10.15, 10.25, 10.35, 10.45]).direction == "parity"
    assert cell([5.0, 9.0, 14.0, 20.0, 30.0], [6.0, 10.0, 15.0, 22.0, 28.0]).direction == "no verdict"


def test_a_timed_out_run_stays_in_the_sample_censored() -> None:
    records = [run("h3", i, 10.0 + i) for i in range(5)] + [run("h1", i, 50.0 + i) for i in range(4)]
    records.append(run("h1", 4, 0.0, status="timeout"))
    c = atlas.compare_methods(records, records, "loss=1%", QUIC, TCP)
    assert (c.n_tcp, c.censored_tcp) == (5, 1)  # not dropped: 5 results, one censored at its timeout
    assert c.direction == "QUIC faster"


def test_a_median_on_censored_runs_is_printed_as_its_bound_in_every_column() -> None:
    """Three of TCP's five runs failed (at 100, 101, 102 s, their own ends, before the 120 s timeout): its median is
    above 102 s (not "-", not 120), its goodput below size / 102 s, and the ratio's CI starts at a bound."""
    records = [run("h3", i, 10.0 + i) for i in range(5)] + [run("h1", i, 50.0 + i) for i in range(2)]
    records += [replace(run("h1", i, 0.0, status="failed"), total_s=100.0 + i) for i in range(2, 5)]
    c = atlas.compare_methods(records, records, "loss=1%", QUIC, TCP)
    assert c.tcp_median is not None and (c.tcp_median.value, c.tcp_median.bound) == (102.0, ">")
    assert c.quic_median is not None and (c.quic_median.value, c.quic_median.bound) == (12.0, "")
    arm = atlas.Arm(id="a", preset="p", label="l", quic=QUIC, tcp=TCP)
    exp = atlas.Experiment(id="e", title="t", conditions="c", lines="1", points=[], arms=[arm],
                           notes=["{quic:a:loss=1%} / {tcp:a:loss=1%}, {tcp_mbps:a:loss=1%}; {ratio:a:loss=1%}"])
    r = atlas.Renderer(Path("/nonexistent"))
    r._folders["p"] = atlas.Folder(Path("/nonexistent/p"), records, {})
    note = r.fill(exp.notes[0], exp)
    assert note.startswith("12.0 s / >102 s, <0.784 Mbit/s; <"), note
    assert atlas.fmt_ci(c.ci).startswith("<"), atlas.fmt_ci(c.ci)


def test_the_overview_keeps_opposite_apart_from_parity() -> None:
    assert atlas.same_direction("QUIC faster", "QUIC slower") == "no (opposite)"
    assert atlas.same_direction("QUIC faster", "parity") == "no (lab parity)"
    assert atlas.same_direction("parity", "QUIC slower") == "no (seed parity)"


def test_medians_pointing_the_other_way_from_the_ratio_are_marked() -> None:
    """docs/seeds.md's bolina same-cc row: medians 3.56 / 2.57 s beside a ratio of 0.917."""
    c = atlas.LabCell(quic_median=Est(3.56), tcp_median=Est(2.57), ratio_value=0.917)
    assert atlas.medians_disagree(c)
    assert not atlas.medians_disagree(replace(c, ratio_value=1.3))
    assert not atlas.medians_disagree(atlas.LabCell(quic_median=Est(17.7), tcp_median=Est(18.1), ratio_value=1.003))


def test_a_missing_method_says_which() -> None:
    records = [run("h3", i, 10.0) for i in range(5)]
    c = atlas.compare_methods(records, records, "loss=1%", QUIC, TCP)
    assert "HTTP/1.1 curl→nginx at loss=1%" in c.missing


def test_side_points_and_arm_points_map_the_seed_point() -> None:
    records = [replace(run("h3", i, 10.0), point_label="size=250kB rtt=20ms cc=reno") for i in range(5)]
    records += [replace(run("h1", i, 20.0), point_label="size=250kB rtt=20ms cc=cubic") for i in range(5)]
    q = atlas.Side(protocol="h3", point="size=250kB {point} cc=reno")
    t = atlas.Side(protocol="h1", point="size=250kB {point} cc=cubic")
    assert atlas.compare_methods(records, records, "rtt=20ms", q, t).direction == "QUIC faster"
    arm = atlas.Arm(id="a", preset="p", label="l", quic=q, tcp=t, points={"loss=5% rtt=20ms": "rtt=20ms"})
    assert arm.applies("loss=5% rtt=20ms") and not arm.applies("loss=0% rtt=20ms")
    assert arm.lab_point("loss=5% rtt=20ms") == "rtt=20ms"


@pytest.mark.parametrize(("quic", "tcp", "want"), [(18.59, 18.288, "parity"), (25.157, 18.282, "QUIC slower"),
                                                    (186.784, 290.036, "QUIC faster")])
def test_the_seeds_direction_uses_the_same_ten_percent_band(quic: float, tcp: float, want: str) -> None:
    p = atlas.SeedPoint(condition="c", point="p", lines="1", quic_s=quic, tcp_s=tcp)
    assert p.seed_direction() == want


def test_same_direction_needs_a_verdict_on_both_sides() -> None:
    assert atlas.same_direction("QUIC faster", "QUIC faster") == "yes"
    assert atlas.same_direction("QUIC faster", "no verdict") == "-"


def test_a_note_naming_an_unknown_arm_is_a_usage_error(tmp_path: Path) -> None:
    exp = atlas.Experiment(id="e", title="t", conditions="c", lines="1", points=[], arms=[],
                           notes=["{ratio:nope:loss=1%}"])
    with pytest.raises(UsageError, match="arm 'nope'"):
        atlas.Renderer(tmp_path).fill(exp.notes[0], exp)


def test_an_unmatched_generated_block_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no matching"):
        generated.fill_blocks("a\n<!-- generated: medians-x -->\nb\n", lambda n: "", tmp_path / "x.md")
    filled = generated.fill_blocks("a\n<!-- generated: medians-x -->\nold\n<!-- end generated: medians-x -->\n",
                                   lambda n: f"new {n}", tmp_path / "x.md")
    assert filled == "a\n<!-- generated: medians-x -->\nnew medians-x\n<!-- end generated: medians-x -->\n"


def _seeds_dir() -> Path:
    """../shared/seeds beside the clone (here and in CI); without it the test cannot run, and says what is missing
    (in CI, where it must be there, that is a failure)."""
    if not SEEDS_DIR.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the seed files are not at {SEEDS_DIR} (CI checks out ../shared beside the clone)")
        pytest.skip(f"the seed files are not at {SEEDS_DIR} (../shared beside the clone)")
    return SEEDS_DIR


def test_every_seed_number_is_on_the_line_it_cites_and_on_its_own_sides_line() -> None:
    """Each seed number on a cited line, QUIC's on a line that names QUIC and TCP's on one that does not (the
    seed's other method: HTTP over TCP): swapping the two numbers fails."""
    seeds = _seeds_dir()
    doc = atlas.load_atlas()
    checked = 0
    for seed in doc.seeds:
        path = seeds / seed.file
        assert path.is_file(), seed.file
        text = path.read_text(encoding="utf-8").splitlines()
        for exp in seed.experiments:
            for p in exp.points:
                if p.quic_s is None:
                    assert p.claim and p.direction, f"{exp.id} {p.condition}: a graph-only point needs its claim"
                    continue
                lines = [text[n - 1] for n in _line_numbers(p.lines)]
                assert p.quic_s in _numbers(lines) and p.tcp_s in _numbers(lines), (
                    f"{exp.id} {p.condition}: not on lines {p.lines}")
                quic = [line for line in lines if p.quic_s in _numbers([line])]
                tcp = [line for line in lines if p.tcp_s in _numbers([line])]
                assert any("QUIC" in line for line in quic), f"{exp.id} {p.condition}: QUIC's number {p.quic_s}"
                assert any("QUIC" not in line for line in tcp), f"{exp.id} {p.condition}: TCP's number {p.tcp_s}"
                checked += 1
    assert checked == 19  # Connectify's three tables: 6 + 6 + 7 points


def _line_numbers(lines: str) -> list[int]:
    out: list[int] = []
    for part in lines.split(","):
        lo, _, hi = part.strip().partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def _numbers(lines: list[str]) -> list[float]:
    return [float(x) for line in lines for x in re.findall(r"\d+(?:\.\d+)?", line)]


def test_an_arm_names_the_sender_its_own_points_ran_not_the_folders_most_common() -> None:
    """A folder that sweeps the sender (bolina: cc=reno and cc=cubic points) names, per arm, what ran at the arm's
    points (read back): the 0-RTT arm's TCP side once said reno where its points ran cubic."""
    records = [replace(run("h1", i, 1.0, point=f"rtt=20ms cc={cc}"), cc_sender=cc)
               for i, cc in enumerate(["reno", "reno", "reno", "cubic", "cubic"])]
    tcp = atlas.Side(protocol="h1", point="{point} cc=cubic")
    assert atlas.senders(records, tcp) == "reno"  # the folder's most common
    assert atlas.senders(records, tcp, {tcp.label("rtt=20ms")}) == "cubic"
    assert atlas.senders(records, tcp, {"rtt=50ms cc=cubic"}) == "?"
