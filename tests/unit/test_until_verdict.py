"""A sweep run until decided (`quiclab sweep --until-verdict`), without the lab: the rounds (lab/run/rounds.py over
lab/stats/until.py) driven by a fake run function that writes runs.csv as a sweep does, an interruption mid-round
and its resume, censored runs kept, the manifest section, the report's table, the baseline's resolution, the
parallel labs' queue fed by rounds, and the rule's error rates at its nominal level with the looks it uses."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lab.errors import UsageError
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan
from lab.report.html import report_html
from lab.report.summary import summary_markdown
from lab.results import store
from lab.results.folder import Manifest, UntilVerdict
from lab.results.schema import RunRecord
from lab.run import parallel, runner
from lab.run.lab_session import Callbacks
from lab.run.rounds import Rounds, drive
from lab.stats import replay, until
from lab.stats.sequential import boundaries, look_level
from tests.unit.test_sequential import _tolerance, simulate

MAX = 12
#: per point: time ratio of h2 and h3 to h1 (the baseline), and the per-pair noise of those ratios
EFFECTS = {0: (1.0, 0.5, 0.02),   # h2 equivalent, h3 twice as fast: decided at the first possible look
           1: (1.0, 1.1, 0.15),   # h3 at the band's edge, noisy: open until the most repeats
           2: (1.0, None, 0.02)}  # h3 always times out (censored at 30 s, h1 takes ~1 s): differs, never dropped


def scenario():
    return validate({"name": "uv", "repeats": MAX, "protocols": ["h1", "h2", "h3"], "timeout": 30,
                     "sweep": {"loss": ["0%", "1%", "2%"]}}, "test")


def fake_record(r: PlannedRun) -> RunRecord:
    """A finished run: h1 takes 1 s scaled 10x by the link seed (the loss pattern), the others their ratio times
    that with noise drawn from the seed and the method."""
    rng = np.random.default_rng([r.seed % 2**32, {"h1": 1, "h2": 2, "h3": 3}[r.protocol.value]])
    base = 1.0 * math.exp(np.random.default_rng(r.seed % 2**32).normal(0, 1.0))
    h2, h3, noise = EFFECTS[r.point.index]
    ratio = {"h1": 1.0, "h2": h2, "h3": h3}[r.protocol.value]
    status = "ok" if ratio is not None else "timeout"
    total = 30.0 if ratio is None else base * ratio * (1.0 if r.protocol.value == "h1"
                                                      else math.exp(rng.normal(0, noise)))
    return RunRecord(
        sweep="uv", run_key=r.key, point=r.point.index, point_label=r.point.label, x_name=r.point.x_name,
        x=r.point.x, protocol=r.protocol.value, client=r.client, server=r.server, repeat=r.repeat, order=r.order,
        seed=r.seed, shaper="linkem", rate_bps=2e7, rtt_s=0.02, loss_pct=r.point.x, jitter_s=0.0, link="{}",
        size_bytes=r.point.size, status=status, failure="" if status == "ok" else "timed out", http_version="",
        bytes=r.point.size if status == "ok" else 0, sha256_ok=status == "ok", handshake_s=0.01, ttfb_s=0.02,
        total_s=total, goodput_bps=r.point.size * 8 / total, wall_s=total + 0.1, overhead_s=0.1,
        wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None, cc_client="bbr", cc_server="bbr",
        started_at="2026-01-01T00:00:00Z", timeout_s=30.0)


class FakeLab:
    """A lab session's `run`: each run's record appended to runs.csv (as the sweep's callback does); `stop_after`
    runs in all, then the batch ends "interrupted" (Ctrl-C: the rest not recorded)."""

    def __init__(self, folder: Path, stop_after: int | None = None) -> None:
        self.log = store.RunLog(folder)
        self.stop_after = stop_after
        self.batches: list[list[PlannedRun]] = []
        self.ran = 0

    def run(self, runs: list[PlannedRun]) -> runner.Finish:
        self.batches.append(runs)
        for r in runs:
            if self.stop_after is not None and self.ran >= self.stop_after:
                return runner.Finish("interrupted")
            self.log.append(fake_record(r))
            self.ran += 1
        return runner.Finish("complete")


def manifest_put(folder: Path):
    m = Manifest(scenario={})

    def put(section: UntilVerdict) -> None:
        m.put(section)
        store.write_manifest(folder, m)

    return put


def rule() -> until.Rule:
    return until.Rule(baseline="h1/curl/nginx", max_repeats=MAX)


def run_to_end(folder: Path, stop_after: int | None = None) -> tuple[Rounds, FakeLab, runner.Finish]:
    rounds = Rounds(folder, plan(scenario()), rule(), manifest_put(folder))
    lab = FakeLab(folder, stop_after)
    finish = drive(rounds.next(), rounds.next, lab.run)
    lab.log.close()
    return rounds, lab, finish


def test_rounds_stop_each_point_when_decided_or_at_the_most_repeats(tmp_path):
    rounds, lab, finish = run_to_end(tmp_path)
    assert finish.outcome == "complete"
    pts = {p.index: p for p in rounds.state()}
    assert (pts[0].stop, pts[0].repeats) == ("decided", until.levels(rule()).first_look) == ("decided", 5)
    assert {until.method_name(c.method): c.verdict for c in pts[0].comparisons} == {
        "h2/curl/nginx": "equivalent", "h3/curl/nginx": "differs"}
    assert (pts[1].stop, pts[1].repeats) == ("most repeats", MAX), pts[1]
    assert pts[2].stop == "decided" and pts[2].repeats == 5
    h3 = next(c for c in pts[2].comparisons if c.method[0] == "h3")
    assert h3.verdict == "differs" and h3.n == 5 and h3.lo.startswith(">")  # the censored pairs in, as bounds
    records = store.load_runs(tmp_path)
    assert len(records) == 3 * (5 + MAX + 5) == sum(p.runs for p in pts.values())
    # each round: one repeat of each open point, all its methods, over that repeat's one link seed
    assert [len(b) for b in lab.batches] == [9] * 5 + [3] * (MAX - 5)
    for batch in lab.batches:
        by_point = {}
        for r in batch:
            by_point.setdefault(r.point.index, set()).add((r.repeat, r.seed))
        assert all(len(v) == 1 for v in by_point.values()), batch
        assert [r.order for r in batch] == sorted(r.order for r in batch)  # the plan's shuffled order
    assert not rounds.next()  # every point stopped
    doc = store.read_manifest(tmp_path).until_verdict
    rec = until.Record.model_validate(doc)
    assert rec.open == 0 and rec.runs == len(records) and rec.levels.nominal == 0.05
    assert 0 < rec.levels.spent <= 0.05 and rec.rule.baseline == "h1/curl/nginx"
    assert [(p.n, p.stop) for p in rec.points] == [(5, "decided"), (MAX, "most repeats"), (5, "decided")]


def test_an_interrupted_round_is_finished_first_by_the_resume(tmp_path):
    full = tmp_path / "full"
    cut = tmp_path / "cut"
    full.mkdir()
    cut.mkdir()
    whole, _, _ = run_to_end(full)
    rounds, lab, finish = run_to_end(cut, stop_after=9 * 4 + 4)  # round 5: 4 of its 9 runs recorded
    assert finish.outcome == "interrupted"
    pts = rounds.state()
    assert [(p.repeats, p.stop) for p in pts] == [(4, "open")] * 3 and sum(p.runs for p in pts) == 40
    assert until.Record.model_validate(store.read_manifest(cut).until_verdict).open == 3  # as round 5 began
    # the resume (a new process: a new Rounds over the same folder) hands out the rest of that round first
    again = Rounds(cut, plan(scenario()), rule(), manifest_put(cut))
    first = again.next()
    assert {r.repeat for r in first} == {4} and len(first) == 5
    assert {r.key for r in first} == {r.key for r in lab.batches[4]} - {r.run_key for r in store.load_runs(cut)}
    lab2 = FakeLab(cut)
    assert drive(first, again.next, lab2.run).outcome == "complete"
    lab2.log.close()
    assert sorted(r.run_key for r in store.load_runs(cut)) == sorted(r.run_key for r in store.load_runs(full))
    assert [(p.repeats, p.stop, p.comparisons) for p in again.state()] == [
        (p.repeats, p.stop, p.comparisons) for p in whole.state()]


def test_a_failed_baseline_or_broken_pairing_stops_the_point_and_says_why(tmp_path):
    s = scenario()
    runs = plan(s)
    slots = until.slots_of([(r.key, r.point.index, r.repeat) for r in runs])
    labels = {r.point.index: r.point.label for r in runs}
    recs = [fake_record(r) for r in runs if r.repeat < 5]
    # point 0: the baseline unsupported there
    recs = [rec if not (rec.point == 0 and rec.protocol == "h1") else
            RunRecord(**{**rec.__dict__, "status": "unsupported", "failure": "no h1 here", "total_s": None,
                         "goodput_bps": None}) for rec in recs]
    # point 2: one h2 run at another link seed (not a pair)
    recs = [rec if not (rec.point == 2 and rec.protocol == "h2" and rec.repeat == 3) else
            RunRecord(**{**rec.__dict__, "seed": 7}) for rec in recs]
    pts = until.states(slots, labels, recs, rule())
    assert pts[0].stop == "not comparable" and "h1/curl/nginx has no results here (unsupported)" in pts[0].reason
    assert pts[2].stop == "not comparable" and "link seeds differ" in pts[2].reason
    assert until.next_round(slots, pts, recs) == sorted(r.key for r in runs if r.point.index == 1 and r.repeat == 5)


def test_a_method_unsupported_at_a_point_is_not_compared():
    runs = plan(scenario())
    slots = until.slots_of([(r.key, r.point.index, r.repeat) for r in runs])
    recs = [fake_record(r) for r in runs if r.repeat < 5 and r.point.index == 0]
    recs = [rec if rec.protocol != "h2" else RunRecord(**{**rec.__dict__, "status": "unsupported",
                                                         "total_s": None, "goodput_bps": None}) for rec in recs]
    (p,) = until.states({0: slots[0]}, {}, recs, rule())
    assert p.stop == "decided" and [c.verdict for c in p.comparisons] == ["unsupported", "differs"]


def test_the_baseline_is_one_method_of_the_plan():
    methods = [("h1", "curl", "nginx"), ("h3", "curl", "nginx"), ("h3", "gtlsclient", "ngtcp2")]
    assert until.resolve_baseline("h1", methods) == ("h1", "curl", "nginx")
    assert until.resolve_baseline("gtlsclient", methods) == ("h3", "gtlsclient", "ngtcp2")
    assert until.resolve_baseline("h3/curl/nginx", methods) == ("h3", "curl", "nginx")
    with pytest.raises(UsageError, match=r"'h3': names 2 methods .*allowed: h1/curl/nginx, h3/curl/nginx"):
        until.resolve_baseline("h3", methods)
    with pytest.raises(UsageError, match=r"'h2': no method of the plan"):
        until.resolve_baseline("h2", methods)


def test_every_look_used_reaches_the_level_decide_requires():
    """The sequential look goes through verdict.decide, which needs a level >= 1 - 2 alpha: each look's own level
    is at least that (P(Bin(n, 1/2) <= k - 1) <= the probability spent by then <= alpha)."""
    for r in (rule(), until.Rule(baseline="a/b/c", max_repeats=40, alpha=0.1, rho=1.0)):
        for b in boundaries(r.plan()):
            if b.k is not None:
                assert look_level(b.n, b.k) >= 1 - 2 * r.alpha - 1e-12, b


@pytest.mark.parametrize("theta, seed", [(0.0, 11), (math.log(1.1), 12)])
def test_false_differs_with_the_rounds_looks_is_at_most_alpha(theta, seed):
    """The rule as --until-verdict uses it (a look after every round, 1..20 pairs, rho 0.3): a false "differs" on
    equal samples and at the band's edge at most alpha (plus simulation error)."""
    plan_ = until.Rule(baseline="a/b/c").plan()
    rates = simulate(theta, plan_, seed=seed, trials=1000)
    wrong = rates["differs up"] if theta > 0 else rates["differs up"] + rates["differs down"]
    assert wrong <= plan_.alpha + _tolerance(plan_.alpha, 1000), rates


@pytest.mark.parametrize("theta, seed", [(math.log(1.1), 13), (-math.log(1.1), 14), (math.log(1.2), 15)])
def test_false_equivalent_with_the_rounds_looks_is_at_most_alpha(theta, seed):
    plan_ = until.Rule(baseline="a/b/c").plan()
    rates = simulate(theta, plan_, seed=seed, trials=1000)
    assert rates["equivalent"] <= plan_.alpha + _tolerance(plan_.alpha, 1000), rates


def test_the_report_shows_n_needed_and_why_stopped(tmp_path):
    run_to_end(tmp_path)
    records = store.load_runs(tmp_path)
    manifest = store.read_manifest(tmp_path)
    md = summary_markdown(records, manifest)
    assert "## Runs until decided" in md
    assert "| parameter | n needed | runs | stopped | why | comparisons with the baseline |" in md
    assert "| loss=0% | 5 | 15 | decided | all 2 comparisons decided | h2/curl/nginx: equivalent at 5" in md
    assert f"| loss=1% | {MAX} | {3 * MAX} | most repeats |" in md
    assert "baseline h1/curl/nginx" in md and "at most 0.05 per comparison" in md
    html = report_html(records, manifest, tmp_path / "plots")
    assert "<h2>Runs until decided</h2>" in html and "most repeats" in html
    assert "Runs until decided" not in summary_markdown(records, {"name": "fixed"})


def test_parallel_labs_take_a_round_only_when_the_last_is_recorded():
    """lab/run/parallel.py's queue with rounds: a lab asking while a round is in flight waits; the next round is
    asked for once every group of the last one is settled; the labs stop when there is none."""
    runs = plan(scenario())
    rounds_left = [[r for r in runs if r.repeat == k] for k in (1, 2)]
    asked_with_in_flight: list[int] = []
    shared: parallel._Shared

    def more() -> list[PlannedRun]:
        asked_with_in_flight.append(shared.in_flight)
        return rounds_left.pop(0) if rounds_left else []

    shared = parallel._Shared(parallel._queue([r for r in runs if r.repeat == 0]), Callbacks(record=lambda _r: None),
                              more=more)
    taken: list[tuple[int, set[int]]] = []
    lock = threading.Lock()

    def lab(k: int) -> None:
        while (keys := shared.take()) is not None:
            with lock:
                taken.append((k, {int(key.split("/")[-1]) for key in keys}))
            time.sleep(0.01)
            shared.settle([])

    threads = [threading.Thread(target=lab, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    repeats = [next(iter(rs)) for _, rs in taken]
    assert repeats == sorted(repeats) and repeats.count(0) == repeats.count(1) == repeats.count(2) == 3
    assert asked_with_in_flight == [0, 0, 0] and shared.drained


def test_a_sweep_run_until_decided_against_its_own_first_5_repeats(tmp_path):
    """replay.versus_fixed, the acceptance check of a real run: the fixed design judged on the sweep's own first 5
    repeats (the seeds a fixed sweep would use)."""
    run_to_end(tmp_path)
    r = replay.versus_fixed(store.load_runs(tmp_path), rule())
    assert (r.sequential_decided, r.fixed_decided, r.repeats) == (2, 2, 5)
    assert r.runs_where_fixed_decided == (30, 30) and (r.sequential_runs, r.fixed_runs) == (3 * (10 + MAX), 45)
    assert r.disagreements == []
    text = replay.describe("uv", r, rule(), replayed=False)
    assert text.startswith("MEASURED") and "2 points decided with 66 runs" in text


class _Live:
    def __getattr__(self, _name):
        return lambda *a, **k: None


def _fake_lifecycle(monkeypatch, stop_after: int | None):
    """lab/run/sweep.py's start and resume with every lab part faked (no lab lock, no Docker, no push): the
    session records each run through the sweep's own callbacks; after `stop_after` runs in all it is Ctrl-C."""
    from lab.results.folder import Environment
    from lab.run import sweep

    ran = {"n": 0}

    class Session:
        def __init__(self, s, folder, facts, host_guard, calls):
            self.calls = calls

        def warm_up(self, runs):
            pass

        def run(self, runs):
            for r in runs:
                if stop_after is not None and ran["n"] >= stop_after:
                    raise KeyboardInterrupt
                self.calls.record(fake_record(r))
                ran["n"] += 1
            return runner.Finish("complete")

        def close(self, complete):
            pass

    monkeypatch.setattr(sweep, "_holding", lambda one_lab: __import__("contextlib").nullcontext())
    monkeypatch.setattr(sweep.lab, "require_up", lambda *a, **k: None)
    monkeypatch.setattr(sweep.lab, "ensure_available", lambda *a, **k: None)
    monkeypatch.setattr(sweep, "_facts", lambda book, s: Environment(shaper="linkem"))
    monkeypatch.setattr(sweep, "LabSession", Session)
    monkeypatch.setattr(sweep.Publisher, "for_sweep", classmethod(lambda cls, *a, **k: _Live()))
    monkeypatch.setattr(sweep, "build_report", lambda folder: [])
    monkeypatch.setattr(sweep.explain_folder, "after_sweep", lambda *a, **k: "")
    monkeypatch.setattr(sweep.environment, "git", lambda *a, **k: {"commit": "test"})
    return sweep


def test_the_sweep_lifecycle_runs_rounds_and_a_resume_continues_them(tmp_path, monkeypatch):
    """lab/run/sweep.py start -> Ctrl-C mid-round -> resume, with the lab faked: the manifest's section and End,
    and runs.csv end as an uninterrupted sweep's."""
    sweep = _fake_lifecycle(monkeypatch, stop_after=9 * 2 + 5)
    with pytest.raises(sweep.SweepInterrupted):
        sweep.start(scenario(), None, tmp_path, rule=rule())
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    m = store.read_manifest(folder)
    assert m.status == "interrupted" and len(store.load_runs(folder)) == 23
    rec = until.Record.model_validate(m.until_verdict)
    assert rec.runs == 23 and rec.open == 3 and [p.n for p in rec.points] == [2, 2, 2]  # from disk at the finish
    _fake_lifecycle(monkeypatch, stop_after=None)
    assert sweep.resume(folder) == (folder, True)
    m = store.read_manifest(folder)
    rec = until.Record.model_validate(m.until_verdict)
    assert m.status == "complete" and rec.open == 0
    assert [(p.n, p.stop) for p in rec.points] == [(5, "decided"), (MAX, "most repeats"), (5, "decided")]
    keys = [r.run_key for r in store.load_runs(folder)]
    assert len(keys) == len(set(keys)) == 3 * (5 + MAX + 5) == m.completed_runs
