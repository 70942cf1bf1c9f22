"""The calibration benchmark over parallel labs (lab/bench/schedule.py, lab/bench/calibration.py run; issue 35 item
3): which lab runs which job (never a link calibrated on the lab that measured it), waiting versus done, a failed
lab's job given back, an interrupted one not recorded, where a folder left half done stands (partial results
removed, finished ones kept), the time estimate; and the coordinator itself over two stand-in labs whose jobs are
small scripts (no Docker): every link scored once, each on the other lab, an interrupted benchmark resumed without
measuring a finished link again, a failing lab's link not recorded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab import instance
from lab.bench import calibration
from lab.bench.hidden import draw
from lab.bench.schedule import WAIT, Job, Schedule, from_folder, roles
from lab.run import parallel


def _simulate(s: Schedule, durations: dict[str, int], fail: dict[tuple[str, int], int] | None = None
              ) -> tuple[list[tuple[int, str, int, int]], int]:
    """Every lab asks for work whenever it is free (time in whole units); returns (start, kind, link, lab) of each
    job and the time the last one ended."""
    free = dict.fromkeys(s.labs, 0)
    busy: dict[int, tuple[int, Job]] = {}
    log: list[tuple[int, str, int, int]] = []
    done_labs: set[int] = set()
    t = 0
    while True:
        for lab in s.labs:
            if lab in busy or lab in done_labs or free[lab] > t:
                continue
            got = s.next(lab)
            if isinstance(got, Job):
                busy[lab] = (t + durations[got.kind], got)
                log.append((t, got.kind, got.link, lab))
            elif got is None:
                done_labs.add(lab)
        if not busy:
            return log, t
        t = min(e for e, _ in busy.values())
        for lab, (e, j) in list(busy.items()):
            if e == t:
                del busy[lab]
                ok = (fail or {}).get((j.kind, j.link)) != lab
                s.finished(j, lab, ok)
                free[lab] = t


def test_one_lab_per_role_the_hidden_lab_only_measures_and_the_other_calibrates_in_overlap() -> None:
    s = Schedule(list(range(4)), [0, 7], *roles([0, 7], 7, both=False))
    assert s.next(0) == WAIT  # nothing measured yet, but lab 7 will measure
    log, end = _simulate(s, {"hidden": 1, "calibrate": 14})
    assert {(kind, lab) for _, kind, _, lab in log} == {("hidden", 7), ("calibrate", 0)}
    assert s.scored == {0, 1, 2, 3} and s.left == []
    assert end == 1 + 4 * 14  # the hidden sides overlap the calibrations: only the first one is waited for


def test_two_labs_each_measure_and_calibrate_and_never_a_link_on_the_lab_that_measured_it() -> None:
    s = Schedule(list(range(10)), [0, 7], *roles([0, 7], 7, both=True))
    log, end = _simulate(s, {"hidden": 1, "calibrate": 14})
    hidden_on = {link: lab for _, kind, link, lab in log if kind == "hidden"}
    calibrated_on = {link: lab for _, kind, link, lab in log if kind == "calibrate"}
    assert sorted(calibrated_on) == list(range(10)) and len(log) == 20  # each job once
    assert all(calibrated_on[i] != hidden_on[i] for i in range(10))
    assert sorted(hidden_on.values()).count(0) == 5  # the hidden sides first, spread evenly
    assert end == 5 + 5 * 14  # the hidden sides over both labs, then five calibrations each
    assert end < 1 + 10 * 14  # against one lab per role


def test_the_estimate_is_what_the_schedule_does_with_the_jobs_expected_times() -> None:
    # per calibration: budget x 24 s per candidate + the held-out sender's 15 runs on the fitted link (~20 s each); a
    # hidden side 280 s (3 runs of each measured sender, the user's upload, 15 held-out runs)
    assert calibration.estimate_s(10, 1, 30) == 280 + 10 * 1020  # 2.9 h: one lab per role
    assert calibration.estimate_s(10, 2, 30) == 10 * 280 / 2 + 5 * 1020  # 1.8 h on two labs
    assert calibration.estimate_s(11, 2, 30) == 11 * 280 / 2 + 6 * 1020  # the odd link waits for a lab
    assert calibration.estimate_s(10, 2, 20) == 10 * 280 / 2 + 5 * 780  # 88 min


def test_three_labs_wait_for_a_link_in_flight_and_stop_when_nothing_can_come() -> None:
    s = Schedule([0], [0, 1, 2], None, None)
    assert s.next(0) == Job("hidden", 0)
    assert s.next(1) == WAIT and s.next(2) == WAIT  # either may calibrate it once measured
    s.finished(Job("hidden", 0), 0, True)
    assert s.next(0) is None  # lab 0 measured the only link: it can never calibrate it
    assert s.next(1) == Job("calibrate", 0)
    assert s.next(2) == WAIT  # the job comes back to it if lab 1 fails
    s.finished(Job("calibrate", 0), 1, True)
    assert [s.next(k) for k in (0, 1, 2)] == [None, None, None] and s.drained


def test_a_failed_lab_gives_its_job_back_and_takes_no_more() -> None:
    s = Schedule(list(range(4)), [0, 7], None, None)
    _simulate(s, {"hidden": 1, "calibrate": 14}, fail={("calibrate", 1): 0})
    assert 0 in s.gone and s.next(0) is None
    # lab 7 carries on: it calibrates what lab 0 measured, never what it measured itself
    assert all(s.measured[i] == 0 for i in s.scored)
    assert sorted(s.left) == sorted(i for i in range(4) if s.measured.get(i) == 7)
    assert s.drained and s.next(7) is None  # nothing left it could do: no deadlock


def test_an_interrupted_job_is_not_recorded_and_its_lab_not_blamed() -> None:
    s = Schedule([0], [0, 7], None, None)
    job = s.next(0)
    assert job == Job("hidden", 0)
    s.interrupted(job)
    assert s.measured == {} and s.gone == set() and s.next(7) == Job("hidden", 0)


def test_a_folder_left_half_done_keeps_what_finished_and_drops_the_rest(tmp_path: Path) -> None:
    def put(path: Path, text: str = "x") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    put(tmp_path / "link-0" / "hidden" / "done.json", json.dumps({"lab": 7}))
    put(tmp_path / "link-0" / "score.json", "{}")
    put(tmp_path / "link-1" / "hidden" / "done.json", json.dumps({"lab": 0}))
    put(tmp_path / "link-1" / "fit.partial-123" / "m" / "measurements.json")  # a calibration cut short
    put(tmp_path / "link-2" / "hidden.partial-99" / "ping.txt")  # a hidden side cut short
    put(tmp_path / "link-3" / "hidden" / "ping.txt")  # a hidden side without its record
    put(tmp_path / "link-3" / "score.json.partial-5")
    s = from_folder(tmp_path, range(5), [0, 7], None, None)
    assert s.measured == {0: 7, 1: 0} and s.scored == {0} and s.left == [1, 2, 3, 4]
    assert not list(tmp_path.glob("link-*/*.partial-*")) and not (tmp_path / "link-3" / "hidden").exists()
    assert s.next(0) == Job("hidden", 2) and s.next(7) == Job("hidden", 3)


def test_auto_counts_labs_by_the_sweeps_rule_over_the_links_rates() -> None:
    assert parallel.auto_for([50e6, 16.7e6], 10, cores=2) == 2
    assert parallel.auto_for([10e6] * 3, 10, cores=2) == 4  # slow links share a core: 2 x cores at most
    assert parallel.auto_for([10e6] * 3, 3, cores=2) == 3  # no more labs than links
    assert parallel.auto_for([None, 5e6], 10, cores=2) == 1  # an unlimited link: one lab


# --- the coordinator over stand-in labs -------------------------------------------------------------------------------

FAKE = r"""
import json, os, sys
from pathlib import Path
kind, spec = sys.argv[1], json.loads(sys.argv[2])
lab = os.environ["QUICLAB_INSTANCE"]
d = Path(spec["folder"])
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"{kind} {d.name} {lab}\n")
if lab in os.environ.get("FAKE_FAIL", "").split(","):
    print("the lab failed", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"say": f"{kind} on {lab}"}), flush=True)
import time
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
if kind == "hidden":
    out = d / "hidden"
    out.mkdir()
    (out / "held_out.json").write_text(json.dumps({"throughput_bps": 8e6, "p50_rtt_s": 0.05}))
    (out / "done.json").write_text(json.dumps({"lab": int(lab or 0)}))
else:
    out = d / "fit"
    out.mkdir()
    if os.environ.get("FAKE_NOFIT"):
        sys.exit(0)
    (out / "fitted.json").write_text(json.dumps({"fitted_tput_bps": 8.4e6, "fitted_rtt_s": 0.05, "fitted": "f",
                                                 "error": 0.01, "candidates": 3, "why": ""}))
"""


@pytest.fixture
def fake_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake_job.py"
    script.write_text(FAKE)
    monkeypatch.setattr(calibration, "job_argv", lambda kind, spec: [sys.executable, str(script), kind,
                                                                      json.dumps(spec)])
    log = tmp_path / "jobs.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log


def _bench(n: int = 4) -> tuple[list, dict]:
    links = draw(n, 35, [])
    meta = {"seed": 35, "links": n, "budget": 3}
    return links, meta


def _jobs(log: Path) -> list[tuple[str, str, str]]:
    return [tuple(ln.split(" ")) for ln in log.read_text().splitlines()] if log.exists() else []  # type: ignore[misc]


def test_the_coordinator_scores_every_link_once_each_on_the_other_lab(tmp_path: Path, fake_jobs: Path) -> None:
    out = tmp_path / "bench"
    links, meta = _bench()
    said: list[str] = []
    got = calibration.run(out, links, meta, [1, 7], 7, True, {1, 7}, said.append)
    assert not got.interrupted and got.left == [] and got.errors == []
    assert [s.link.index for s in got.scores] == [0, 1, 2, 3]
    assert all(s.tput_error == pytest.approx(0.05) for s in got.scores)
    jobs = _jobs(fake_jobs)
    hidden_on = {d: lab for kind, d, lab in jobs if kind == "hidden"}
    calibrated_on = {d: lab for kind, d, lab in jobs if kind == "calibrate"}
    assert len(jobs) == 8 and set(hidden_on) == set(calibrated_on) == {f"link-{i}" for i in range(4)}
    assert all(calibrated_on[d] != hidden_on[d] for d in hidden_on)
    assert {instance.Instance(1).tag, instance.Instance(7).tag} == set(hidden_on.values())
    doc = json.loads((out / calibration.RESULTS).read_text())
    assert doc["not_done"] == [] and len(doc["scores"]) == 4 and (out / calibration.TABLE).is_file()
    assert any("hidden link 1/4: calibrate on" in line for line in said)  # each job's progress, per link
    assert any("(4/4 links scored)" in line for line in said)


def test_a_resumed_benchmark_measures_only_what_was_not_finished(tmp_path: Path, fake_jobs: Path) -> None:
    out = tmp_path / "bench"
    links, meta = _bench()
    calibration.run(out, links[:2], meta, [1, 7], 7, True, {1, 7}, lambda _s: None)  # "interrupted" after 2 links
    (out / "link-2" / "hidden.partial-1").mkdir(parents=True)  # and one hidden side cut short
    fake_jobs.unlink()
    got = calibration.run(out, links, meta, [1, 7], 7, True, {1, 7}, lambda _s: None)
    assert [s.link.index for s in got.scores] == [0, 1, 2, 3] and got.left == []
    assert sorted(d for _, d, _ in _jobs(fake_jobs)) == ["link-2", "link-2", "link-3", "link-3"]


def test_a_failing_lab_records_nothing_for_its_job_and_says_which(tmp_path: Path, fake_jobs: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", instance.Instance(7).tag)
    out = tmp_path / "bench"
    links, meta = _bench(2)
    got = calibration.run(out, links, meta, [1, 7], 7, False, {1, 7}, lambda _s: None)  # lab 7 holds the links
    assert got.scores == [] and got.left == [0, 1]
    assert got.errors == ["lab 7: hidden job of link 0: the lab failed"]
    assert not list(out.glob("link-*/score.json")) and not list(out.glob("link-*/hidden"))
    assert json.loads((out / calibration.RESULTS).read_text())["not_done"] == [0, 1]


def test_a_hidden_side_past_its_deadline_is_stopped_and_not_recorded(tmp_path: Path, fake_jobs: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "60")
    monkeypatch.setattr(calibration, "HIDDEN_TIMEOUT_S", 1.0)
    out = tmp_path / "bench"
    links, meta = _bench(1)
    got = calibration.run(out, links, meta, [1, 7], 7, False, {1, 7}, lambda _s: None)
    assert got.errors == ["lab 7: hidden job of link 0: did not finish within 1 s (stopped)"]
    assert got.left == [0] and not (out / "link-0" / "hidden").exists()


def test_a_result_that_cannot_be_read_stops_that_lab_without_hanging_the_others(tmp_path: Path, fake_jobs: Path,
                                                                                monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    monkeypatch.setenv("FAKE_NOFIT", "1")
    out = tmp_path / "bench"
    links, meta = _bench(2)
    got = calibration.run(out, links, meta, [1, 7], 7, False, {1, 7}, lambda _s: None)  # lab 1 calibrates
    assert got.left == [0, 1] and len(got.errors) == 1
    assert got.errors[0].startswith("lab 1: calibrate job of link 0: FileNotFoundError")
    assert not list(out.glob("link-*/score.json"))


def test_the_docs_block_says_how_many_runs_the_held_out_figures_are_the_median_of() -> None:
    from lab.bench import hidden

    doc = {"seed": 35, "links": 0, "budget": 20, "measured": ["cubic", "bbr"], "held_out": "reno", "scores": []}
    assert "median of" not in hidden.markdown_doc(doc)  # the committed run: one run each side
    assert "reno (the median of 3 runs on each side)" in hidden.markdown_doc({**doc, "held_out_runs": 3})


def test_the_users_files_are_every_run_there_is(tmp_path: Path) -> None:
    """A hidden link's repeated downloads (cc.json, cc-2.json, ...) all reach the calibration; a folder of one run
    each (the committed benchmarks before) still reads, and a missing first file is named, not skipped."""
    for name in ("ping.txt", "cubic.json", "cubic-2.json", "cubic-3.json", "bbr.json", "bbr-2.json", "upload.json"):
        (tmp_path / name).write_text("")
    assert [p.name for p in calibration.hidden_files(tmp_path)] == [
        "ping.txt", "cubic.json", "cubic-2.json", "cubic-3.json", "bbr.json", "bbr-2.json", "upload.json"]
    (tmp_path / "bbr.json").unlink()
    assert "bbr.json" in [p.name for p in calibration.hidden_files(tmp_path)]
