"""The open questions' answers (lab/docgen/answers*.py) on synthetic runs.csv folders: each computation, a censored
run in each, and a folder not committed yet ("not yet measured" and no number); then the section as it renders from
the committed folders, its numbers recomputed with this file's own arithmetic (csv, statistics)."""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

import pytest

from lab.docgen import answer_stats, answers, answers_connectify, answers_kth_survey, answers_yu
from lab.docgen.answer_stats import band, not_measured
from lab.docgen.atlas import Renderer, load_atlas
from lab.explain.model import Explanation, Timeline
from lab.results.schema import COLUMNS, RunRecord, to_row
from lab.stats.fmt import sig3
from lab.stats.stats import Est

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "results" / "reference"
ATLAS = load_atlas()


def run(preset: str, point: str, protocol: str, repeat: int, total_s: float, *, client: str = "curl",
        server: str = "nginx", size: int = 10_000_000, rtt_s: float = 0.0, loss_pct: float = 0.0,
        status: str = "ok", seed: int | None = None, handshake_s: float | None = 0.1, workload: str = "bulk",
        wire_overhead: float | None = None, cc: str = "cubic", point_index: int = 0) -> RunRecord:
    """One run; failed and timed-out runs end at total_s (censored there)."""
    ok = status == "ok"
    return RunRecord(
        sweep=preset, run_key=f"{point_index}/{protocol}/{client}/{server}/{repeat}", point=point_index,
        point_label=point, x_name="point", x=float(point_index), protocol=protocol, client=client, server=server,
        repeat=repeat, order=repeat, seed=seed if seed is not None else 1000 * point_index + repeat, shaper="linkem",
        rate_bps=10e6, rtt_s=rtt_s, loss_pct=loss_pct, jitter_s=0.0, link="{}", size_bytes=size, status=status,
        failure="" if ok else "client exit code 28: timed out", http_version="3" if protocol == "h3" else "1.1",
        bytes=size if ok else size // 2, sha256_ok=ok, handshake_s=handshake_s, ttfb_s=None, total_s=total_s,
        goodput_bps=size * 8 / total_s if ok else None, wall_s=total_s, overhead_s=0.1, wire_down_bytes=None,
        wire_up_bytes=None, wire_overhead=wire_overhead, cc_client="x", cc_server="y", started_at="t",
        timeout_s=60.0, workload=workload, cc_sender=cc)


def write(reference: Path, preset: str, records: list[RunRecord]) -> Path:
    folder = reference / preset
    folder.mkdir(parents=True)
    with (folder / "runs.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(to_row(r) for r in records)
    return folder


NUMBER = re.compile(r"\d+\.\d+|\d{2,}")


# ---------------------------------------------------------------------------------------------------------------
# 1. The capped QUIC window


def test_the_seeds_implied_window_is_its_size_over_time_per_rtt() -> None:
    exp = answers_connectify.experiment(ATLAS, "connectify-rtt")
    p320 = next(p for p in exp.points if p.point == "rtt=320ms")
    assert answers_connectify.seed_size(exp) == 10_000_000
    assert answers_connectify.seed_rtt_s(exp, p320) == 0.32
    moved = answers_connectify.per_rtt(10_000_000, 0.32, Est(15.41))
    assert moved.value == pytest.approx(207_657, rel=1e-4)  # the "207 kB at 320 ms"
    assert answers_connectify.per_rtt(10_000_000, 0.32, Est(15.41, ">")).bound == "<"  # a censored time: a bound
    rate = answers_connectify.experiment(ATLAS, "connectify-rate")
    assert answers_connectify.seed_rtt_s(rate, rate.points[0]) == 0.02  # "RTT 20 ms" from its conditions


def _window_folder(tmp_path: Path, factor: float, censor_last: bool = False) -> Path:
    """connectify-rtt-window: QUIC at `factor` x the seed's QUIC time, TCP at the seed's TCP time, 5 repeats."""
    exp = answers_connectify.experiment(ATLAS, "connectify-rtt")
    recs = []
    for i, p in enumerate(exp.points):
        assert p.quic_s and p.tcp_s
        for k in range(5):
            jitter = 1 + 0.002 * k
            status = "timeout" if censor_last and i == len(exp.points) - 1 and k == 4 else "ok"
            recs.append(run("connectify-rtt-window", p.point, "h3", k, p.quic_s * factor * jitter, client="gtlsclient",
                            server="ngtcp2", point_index=i, status=status))
            recs.append(run("connectify-rtt-window", p.point, "h1", k, p.tcp_s * jitter, point_index=i))
    return write(tmp_path, "connectify-rtt-window", recs)


def test_a_capped_quic_at_the_seeds_times_lands_on_its_curve(tmp_path: Path) -> None:
    _window_folder(tmp_path, 1.0, censor_last=True)
    text = "\n".join(answers_connectify.window_answer(Renderer(tmp_path), ATLAS, answers_connectify.RTT))
    # the censored run leaves its point's CI open above: undecided there, within at the other five (>= 2/3)
    assert ("within +-10 % of the seed's (the CI of its median inside the band) at 5 of 6 points (above at 0, "
            "below at 0, undecided at 1): lands on the seed's curve: **yes**") in text
    assert "QUIC/TCP goes the seed's way at 6 of 6 points" in text  # the seed: QUIC slower at every RTT
    assert "n 5 (1 censored)" in text  # the censored run is counted, not dropped
    # the uncapped folder is not in tmp_path: its columns say so and carry no number
    assert f"Uncapped (`results/reference/connectify-rtt-cubic/`): {not_measured('connectify-rtt-cubic')}." in text


def test_a_capped_quic_twice_as_slow_is_above_the_seeds_curve(tmp_path: Path) -> None:
    _window_folder(tmp_path, 2.0)
    text = "\n".join(answers_connectify.window_answer(Renderer(tmp_path), ATLAS, answers_connectify.RTT))
    assert "at 0 of 6 points (above at 6, below at 0, undecided at 0): lands on the seed's curve: **no**" in text


def test_without_the_capped_folder_the_answer_says_not_yet_measured_and_gives_no_lab_number(tmp_path: Path) -> None:
    text = "\n".join(answers_connectify.window_answer(Renderer(tmp_path), ATLAS, answers_connectify.RATE))
    assert f"Capped (QUIC window 200 kB) (`results/reference/connectify-rate-window/`): " \
           f"{not_measured('connectify-rate-window')}." in text
    assert "not yet measured: `bash scripts/atlas.sh connectify-rate-window`" in text
    rows = [line for line in text.splitlines() if line.startswith("| 2 Mbit/s")]
    assert rows and rows[0].split(" | ")[2] == "not yet measured"
    assert "The capped QUIC moved" not in text


def test_band_is_the_atlas_plus_minus_10_percent() -> None:
    assert band(Est(0.95), Est(1.05)) == "within"
    assert band(Est(1.2), Est(1.3)) == "above" and band(Est(1.2, ">"), Est(None, ">")) == "above"
    assert band(Est(0.5), Est(0.8)) == "below"
    assert band(Est(0.95), Est(1.2)) == "undecided"


# ---------------------------------------------------------------------------------------------------------------
# 2. The 0.1 % point from its captures


def _explained(folder: Path, r: RunRecord, stalled_ms: float, lost: int) -> None:
    ev = folder / "evidence" / r.run_key.replace("/", "_")
    ev.mkdir(parents=True)
    e = Explanation(run_key=r.run_key, protocol=r.protocol, transport="quic" if r.protocol == "h3" else "tcp",
                    status="explained",
                    timeline=Timeline(total_ms=(r.total_s or 0) * 1e3, handshake_ms=170.0,
                                      loss_recovery_ms=stalled_ms + 50, rest_ms=(r.total_s or 0) * 1e3 - stalled_ms
                                      - 220, stalled_ms=stalled_ms, resent_ms=50.0, episodes=2, resent_bytes=lost
                                      * 1200, last_byte_ms=None, rate_bps=5e6, curve_points=0))
    (ev / "explain.json").write_text(e.model_dump_json(), encoding="utf-8")


def test_the_captured_point_names_the_part_of_the_split_that_differs(tmp_path: Path) -> None:
    recs = []
    for server, h3_s in (("nginx", 17.0), ("nginx-sid", 23.0)):
        for k in range(5):
            recs.append(run("connectify-loss-captured", "loss=0.1%", "h3", k, h3_s + 0.1 * k, server=server))
            recs.append(run("connectify-loss-captured", "loss=0.1%", "h1", k, 17.5 + 0.1 * k, server=server))
    recs[-2] = run("connectify-loss-captured", "loss=0.1%", "h3", 4, 30.0, server="nginx-sid", status="failed")
    folder = write(tmp_path, "connectify-loss-captured", recs)
    for r in recs:
        if r.protocol == "h3":
            _explained(folder, r, 6000.0 if r.server == "nginx-sid" else 300.0, 40)
    text = "\n".join(answers_connectify.captured_answer(Renderer(tmp_path), ATLAS))
    assert "HTTP/3 to nginx-sid (nginx-sid) / to nginx (nginx): " in text and "paired: nginx-sid slower" in text
    assert "differ most in the time the link sat idle while a loss was not yet repaired (a hole open): 6000 ms " \
           "(nginx-sid) vs 300 ms (nginx)" in text
    assert "| HTTP/3 curl→nginx-sid (nginx-sid) | 5 (1 censored) |" in text
    assert "| 5 of 5 | 170 | 6000 | 50 |" in text


def test_without_the_captured_folder_no_number(tmp_path: Path) -> None:
    text = "\n".join(answers_connectify.captured_answer(Renderer(tmp_path), ATLAS))
    waiting = not_measured("connectify-loss-captured")
    assert text.strip() == ("The seed (lines 33-34): QUIC 25.157 s, TCP 18.282 s, QUIC/TCP 1.38 (QUIC slower). "
                            f"`results/reference/connectify-loss-captured/`: {waiting}.")


# ---------------------------------------------------------------------------------------------------------------
# 3. Yu's loss + delay cell per sender pair


def _senders_quic(tmp_path: Path) -> None:
    """QUIC CUBIC faster by a falling ratio with size; QUIC BBR faster at small sizes only."""
    ratios = {"cubic": (0.8, 0.7, 0.6, 0.5), "bbr": (0.5, 0.6, 1.0, 2.0)}
    recs = []
    i = 0
    for cc, rs in ratios.items():
        for size, ratio in zip(answers_yu.SIZES, rs, strict=True):
            label = f"size={size} cc={cc}"
            for k in range(5):
                t = 10.0 * (1 + 0.01 * k)
                st = "timeout" if (cc, size, k) == ("cubic", answers_yu.SIZES[0], 0) else "ok"
                recs.append(run("yu-senders-quic", label, "h2", k, t, server="nginx-sid", size=size, rtt_s=0.2,
                                loss_pct=5.0, cc=cc, point_index=i, status=st))
                recs.append(run("yu-senders-quic", label, "h3", k, t * ratio, client="gtlsclient", server="ngtcp2",
                                size=size, rtt_s=0.2, loss_pct=5.0, cc=cc, point_index=i))
            i += 1
    write(tmp_path, "yu-senders-quic", recs)


def test_the_claim_holds_only_for_the_pair_faster_at_every_size_and_more_so_with_size(tmp_path: Path) -> None:
    _senders_quic(tmp_path)
    text = "\n".join(answers_yu.senders_answer(Renderer(tmp_path)))
    lead = text.splitlines()[0]
    assert ("holds under QUIC cubic (HTTP/3 gtlsclient→ngtcp2 cc=cubic) vs TCP cubic (HTTP/2 curl→nginx-sid "
            "cc=cubic), `results/reference/yu-senders-quic/`; QUIC cubic (HTTP/3 gtlsclient→ngtcp2 cc=cubic) vs TCP "
            "bbr (HTTP/2 curl→nginx-sid cc=bbr), `results/reference/yu-senders-quic/`.") in lead
    assert "QUIC bbr" not in lead  # faster at small sizes only: parity at 1 MB, slower at 10 MB
    # yu and yu-senders are not in tmp_path: named with their command, no number
    assert "`results/reference/yu/` (`bash scripts/atlas.sh yu`)" in lead
    # the censored TCP run at 1 kB: bounded pair, still QUIC faster
    row = next(line for line in text.splitlines() if line.startswith("| QUIC cubic (HTTP/3 gtlsclient→ngtcp2 cc=cubic) "
                                                                     "vs TCP cubic"))
    assert row.count("QUIC faster") == 4 and row.endswith("| yes |") and "≥93.8 %" in row


def test_holds_needs_a_decided_faster_quic_at_every_size(tmp_path: Path) -> None:
    assert not answers_yu.holds([])
    assert not answers_yu.holds([None])


def _cell(ratio: float) -> answer_stats.Judged | None:
    """QUIC/TCP at one size over 5 paired runs whose QUIC/TCP time is `ratio` (a little spread)."""
    tcp = [run("p", "x", "h2", k, 1.0 + 0.01 * k) for k in range(5)]
    quic = [run("p", "x", "h3", k, (1.0 + 0.01 * k) * ratio * (1 + 0.002 * k)) for k in range(5)]
    return answer_stats.compare(quic, tcp)


def test_the_claim_can_hold_from_a_size_on_and_not_below_it() -> None:
    # parity at the two small sizes, QUIC faster at the two large ones and more so at the largest: from the third
    cells = [_cell(1.0), _cell(1.0), _cell(0.5), _cell(0.2)]
    assert not answers_yu.holds(cells) and answers_yu.holds_from(cells) == 2
    assert answers_yu.holds_from([_cell(0.8), _cell(0.6), _cell(0.5), _cell(0.2)]) == 0
    # faster at the largest only, or less so at the largest: not even from a size
    assert answers_yu.holds_from([_cell(1.0), _cell(1.0), _cell(1.0), _cell(0.2)]) is None
    assert answers_yu.holds_from([_cell(1.0), _cell(1.0), _cell(0.2), _cell(0.5)]) is None


# ---------------------------------------------------------------------------------------------------------------
# 4. Reuse savings


def test_the_reuse_saving_is_the_shift_per_request_with_its_interval(tmp_path: Path) -> None:
    recs = []
    for i, (kind, base) in enumerate((("new", 0.50), ("reuse", 0.25))):
        for protocol in ("h3", "h2"):
            for k in range(5):
                status = "failed" if (kind, protocol, k) == ("new", "h2", 4) else "ok"
                recs.append(run("yu-reuse", f"workload={kind}:5x1kB loss=0% rtt=35ms", protocol, k,
                                base + 0.01 * k if status == "ok" else 0.9, size=5000, rtt_s=0.035,
                                workload=f"{kind}:5x1kB", point_index=i, status=status))
    write(tmp_path, "yu-reuse", recs)
    text = "\n".join(answers_yu.reuse_answer(Renderer(tmp_path)))
    # every pairwise difference new - reuse is 0.25 + 0.01 (j - i): their median 0.25 s, / 5 requests = 50 ms
    assert "reuse saves 50.0 ms [" in text and "per request over HTTP/3" in text
    assert "0.520 s [0.500\u20130.540, 93.8 %], n 5 |" in text  # new over HTTP/3
    assert "n 5 (1 censored)" in text  # HTTP/2's failed new run, counted


def test_without_yu_reuse_no_number(tmp_path: Path) -> None:
    assert answers_yu.reuse_answer(Renderer(tmp_path))[0] == \
        f"`results/reference/yu-reuse/`: {not_measured('yu-reuse')}."


# ---------------------------------------------------------------------------------------------------------------
# 5. KTH's transfer-only throughput


def test_transfer_only_throughput_per_protocol_and_never_imputed(tmp_path: Path) -> None:
    recs = []
    i = 0
    for size in (10_000, 10_000_000):
        for loss in (0.0, 0.1, 1.0, 5.0):
            label = f"size={size} loss={loss:g}%"
            for k in range(5):
                span = 0.5 * size / 10_000_000 * (1 + 0.01 * k)
                status = "timeout" if (size, loss, k) == (10_000_000, 5.0, 4) else "ok"
                recs.append(run("kth-unshaped", label, "h1", k, 0.1 + span, size=size, loss_pct=loss, point_index=i,
                                status=status))
                recs.append(run("kth-unshaped", label, "h3", k, 0.1 + span, client="gtlsclient", server="ngtcp2",
                                size=size, loss_pct=loss, handshake_s=None, point_index=i))
            i += 1
    write(tmp_path, "kth-unshaped", recs)
    text = "\n".join(answers_kth_survey.kth_answer(Renderer(tmp_path)))
    # 10 MB over 0.50-0.52 s of transfer (the 0.1 s handshake left out): 154-160 Mbit/s, over 100 at both sizes
    assert "| 10 MB | 0 % | 157 Mbit/s [154\u2013160, 93.8 %], n 5 |" in text
    assert "TCP: \"over 100 Mbit/s for all sizes\" holds, \"little change from 0.1 to 1 %\" holds" in text
    assert "n 5 (1 censored)" in text
    assert "QUIC: \"over 100 Mbit/s for all sizes\" not computed" in text
    assert "not computed: 5 of 5 runs have no handshake_s" in text
    assert "not yet measured: `bash scripts/atlas.sh --rerun kth-unshaped`" in text
    quic_cells = [line.split(" | ")[3] for line in text.splitlines() if line.startswith("| 10 MB |")]
    assert quic_cells and not any(NUMBER.search(c.replace("5 of 5", "")) for c in quic_cells)


def test_kth_claims_fail_on_a_decided_drop() -> None:
    assert answers_kth_survey.claim(["over", "under"], "over", "under") == "fails"
    assert answers_kth_survey.claim(["over", "undecided"], "over", "under") == "undecided"
    assert answers_kth_survey.claim(["equivalent"] * 4, "equivalent", "differs") == "holds"
    assert answers_kth_survey.claim(["not computed"], "over", "under") == "not computed"


# ---------------------------------------------------------------------------------------------------------------
# 6. The survey's loss-based arm and its overhead


def test_the_survey_overhead_counts_its_censored_runs_and_waits_for_its_cubic_arm(tmp_path: Path) -> None:
    recs = []
    for i, point in enumerate(("rate=5mbit loss=5%", "rate=100mbit loss=0%")):
        for k in range(5):
            recs.append(run("survey-loss", point, "h1", k, 60.0 + k, size=33_600_000, wire_overhead=1.05 + k / 1000,
                            point_index=i))
            status = "failed" if (i, k) == (0, 4) else "ok"
            recs.append(run("survey-loss", point, "h3", k, 60.0 + k, size=33_600_000, wire_overhead=1.08 + k / 1000,
                            point_index=i, status=status))
    write(tmp_path, "survey-loss", recs)
    text = "\n".join(answers_kth_survey.survey_answer(Renderer(tmp_path)))
    assert "| `results/reference/survey-loss/` | all points |  |  | 1.05 [" in text
    assert "n 10 |" in text and "n 9 (1 censored, no figure)" in text
    assert f"`results/reference/survey-loss-cubic/`: {not_measured('survey-loss-cubic')}." in text
    assert "survey-loss-cubic/` |" not in text  # no row for the folder not committed


# ---------------------------------------------------------------------------------------------------------------
# The section from the committed folders

FOLDERS = ("connectify-rtt-window", "connectify-rate-window", "connectify-loss-captured", "yu-senders-quic",
           "yu-reuse", "kth-unshaped", "survey-loss-cubic", "connectify-rtt-cubic", "connectify-rate-cubic",
           "survey-loss", "yu", "yu-senders")


@pytest.fixture(scope="module")
def section() -> str:
    return "\n".join(answers.section(Renderer(REF), ATLAS))


def test_the_section_is_in_docs_seeds_md_as_generated(section: str) -> None:
    seeds = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    assert section.strip() in seeds
    assert [f"### {t}" for t, _ in answers.QUESTIONS] == re.findall(r"^### \d{3} .*$", section, re.M)
    assert "](#censored-runs)" in section and "](#004-bolina-vs-quic-part-ii-blog-2019)" in section
    assert "## Censored runs" in seeds and "## 004: Bolina vs QUIC, part II (blog, 2019)" in seeds


def test_every_folder_not_committed_says_not_yet_measured_and_every_committed_one_does_not(section: str) -> None:
    for name in FOLDERS:
        waiting = f"not yet measured: `bash scripts/atlas.sh {name}`"
        if (REF / name / "runs.csv").is_file():
            assert waiting not in section, name
            assert f"`results/reference/{name}/`" in section, name
        else:
            assert waiting in section, name


def test_the_committed_reuse_saving_and_overhead_recomputed_here(section: str) -> None:
    rows = list(csv.DictReader((REF / "yu-reuse" / "runs.csv").open(encoding="utf-8")))

    def times(kind: str, protocol: str) -> list[float]:
        return [float(r["total_s"]) for r in rows if r["protocol"] == protocol and r["status"] == "ok"
                and r["point_label"] == f"workload={kind}:5x1kB loss=0% rtt=35ms"]

    for protocol, name in (("h3", "HTTP/3"), ("h2", "HTTP/2")):
        new, reuse = times("new", protocol), times("reuse", protocol)
        assert len(new) == len(reuse) == 5  # no censored run here: the plain median of differences is the estimate
        ms = statistics.median(b - a for a in reuse for b in new) / 5 * 1000
        assert f"{sig3(ms)} ms [" in section and f"per request over {name}" in section, (protocol, ms)
    survey = list(csv.DictReader((REF / "survey-loss" / "runs.csv").open(encoding="utf-8")))
    for protocol, side in (("h1", "TCP"), ("h3", "QUIC")):
        med = statistics.median(float(r["wire_overhead"]) for r in survey if r["protocol"] == protocol)
        assert f"{side} {sig3(med)} [" in section, (side, med)


def test_a_point_is_picked_by_its_label_tokens_whatever_else_the_new_folder_sweeps() -> None:
    from lab.docgen.answer_stats import Pick, select

    recs = [run("w", "rtt=80ms quic_window=200kB", "h3", 0, 9.0, client="gtlsclient", server="ngtcp2"),
            run("w", "rtt=800ms quic_window=200kB", "h3", 0, 19.0, client="gtlsclient", server="ngtcp2"),
            run("w", "rtt=80ms quic_window=200kB", "h1", 0, 9.0)]
    got = select(recs, Pick("w", "h3", "gtlsclient", "ngtcp2"), tokens=["rtt=80ms"])
    assert [r.total_s for r in got] == [9.0]  # a token, not a substring: rtt=800ms is another point
