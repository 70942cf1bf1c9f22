"""Issue 24 without a lab: the fidelity guard's arithmetic and verdicts (lab/run/hostload.py), `--parallel`'s
values and the auto rule, the groups a lab is handed, lab numbers picked beside labs in use, and the guard's
repeat-and-set-aside in runner.run_all; bad values exit 2 with one line naming them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab import config
from lab.errors import UsageError
from lab.plan import presets
from lab.plan.checks import validate
from lab.plan.plan import groups, plan
from lab.results.schema import RunRecord
from lab.run import hostload, parallel, runner
from tests.unit.test_stats import make_record

STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n"


def stat(user=0, system=0, idle=0, iowait=0, steal=0) -> hostload.CpuTimes:
    return hostload.parse_stat(STAT.format(user=user, system=system, idle=idle, iowait=iowait, steal=steal))


def test_proc_stat_is_read_from_its_aggregate_line():
    t = stat(user=100, system=50, idle=800, iowait=50, steal=0)
    assert (t.total, t.idle, t.steal) == (1000, 850, 0)
    with pytest.raises(ValueError, match="no aggregate cpu line"):
        hostload.parse_stat("cpu0 1 2 3\n")
    assert hostload.sample(Path("/nonexistent/stat")) is None
    assert hostload.sample() is not None  # this host's /proc/stat


def test_busy_and_steal_are_shares_of_the_time_between_two_samples():
    load = hostload.between(stat(user=100, idle=900), stat(user=250, idle=1000, steal=50))
    assert load == hostload.Load(busy=pytest.approx(0.6667, abs=1e-3), steal=pytest.approx(0.1667, abs=1e-3))
    assert hostload.between(None, stat()) is None
    assert hostload.between(stat(idle=5), stat(idle=5)) is None  # no tick between: cannot tell


@pytest.mark.parametrize(("load", "run_s", "drops", "why"), [
    (hostload.Load(0.5, 0.0), 4.0, 0, ""),
    (hostload.Load(0.96, 0.0), 4.0, 0, "host CPUs 96% busy during the run (>= 95%)"),
    (hostload.Load(0.5, 0.12), 4.0, 0, "CPU steal 12% of the run (>= 10%)"),
    (hostload.Load(1.0, 0.5), 0.3, 0, ""),  # too short to judge from 10 ms ticks
    (hostload.Load(0.1, 0.0), 0.3, 7, "the emulator dropped 7 packets it could not forward in time (TUN queue/write)"),
    (None, 4.0, None, ""),
])
def test_a_run_is_host_bound_when_the_emulator_or_the_cpus_could_not_keep_up(load, run_s, drops, why):
    assert hostload.verdict(load, run_s, drops) == why


def test_parallel_values():
    assert parallel.parse("3") == 3 and parallel.parse(" auto ") is None
    top = parallel.host_limit()
    assert parallel.parse(str(top)) == top
    for bad in ("0", "-1", "x", "2.5", str(top + 1), "", "99"):
        with pytest.raises(UsageError) as e:
            parallel.parse(bad)
        assert str(e.value).startswith(f"invalid --parallel {bad!r}: allowed is a number of labs 1..{top}")
    assert parallel.host_limit(1) == 4 and parallel.host_limit(2) == 8 and parallel.host_limit(64) == 10


def scenario(rate: str | None, repeats: int = 10, loss: tuple[str, ...] = ("0%", "2%")):
    link = {"rtt": "40ms", **({"rate": rate} if rate else {})}
    return validate({"name": "p", "sizes": ["2MB"], "repeats": repeats, "protocols": ["h2", "h3"], "seed": 24,
                     "link": link, "sweep": {"loss": list(loss)}}, "test")


@pytest.mark.parametrize(("rate", "cores", "repeats", "labs"), [
    ("4mbit", 2, 10, 4),    # 2 x 50 Mbit/s budget / 4 Mbit/s = 25, capped at 2 x cores
    ("40mbit", 2, 10, 2),   # 100 / 40 (4 labs at 40 Mbit/s were host-bound here)
    ("100mbit", 2, 10, 1),  # 100 / 100
    ("1gbit", 2, 10, 1),    # the budget is below one lab's rate: still one
    (None, 2, 10, 1),       # unlimited rate: one lab
    ("4mbit", 8, 10, 16),   # capped by 2 x cores = 16 (the host limit is 10, but 16 > 10)
    ("4mbit", 2, 1, 2),     # only 2 (point, repeat) groups
])
def test_auto_picks_labs_from_the_rates_and_cores(rate, cores, repeats, labs):
    runs = plan(scenario(rate, repeats))
    assert parallel.auto(runs, cores) == min(labs, parallel.host_limit(cores))


def test_a_lab_is_handed_whole_groups_in_the_plans_shuffled_order():
    runs = plan(scenario("4mbit"))
    queue = parallel._queue(runs)
    assert len(queue) == 20 and all(len(g) == 2 for g in queue)
    by_key = {r.key: r for r in runs}
    for g in queue:  # one (point, repeat): h2 and h3 at one link seed, in plan order
        a, b = (by_key[k] for k in g)
        assert (a.point.index, a.repeat, a.seed) == (b.point.index, b.repeat, b.seed) and a.order < b.order
    firsts = [by_key[g[0]].order for g in queue]
    assert firsts == sorted(firsts) and sorted(k for g in queue for k in g) == sorted(by_key)


def test_lab_numbers_in_use_are_skipped_and_too_many_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(parallel.lock, "lock_path", lambda: tmp_path / "lab.lock")  # (a real lab's may be held)
    names = ["quiclab-router", "quiclab-client", "quiclab-2-router", "quiclab-10-x", "quiclab-3-pki-1"]
    monkeypatch.setattr(parallel.docker, "container_names", lambda prefix: names)
    assert parallel.labs_in_use() == {0, 2, 3}
    assert parallel.pick_labs(3)[0] == config.INSTANCE.number
    assert parallel.pick_labs(3)[1:] == [n for n in range(10) if n not in (0, 2, 3, config.INSTANCE.number)][:2]
    with pytest.raises(UsageError, match=r"^invalid --parallel 9: only 8 labs can run here now"):
        parallel.pick_labs(9)


def test_a_sweep_whose_own_lab_is_held_is_refused_before_any_lab_starts(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path):
    monkeypatch.setattr(parallel.lock, "lock_path", lambda: tmp_path / "lab.lock")
    monkeypatch.setattr(parallel.docker, "container_names", lambda prefix: ["quiclab-router", "quiclab-4-router"])
    busy = r"^the lab is busy: `quiclab sweep other` \(pid \d+.*QUICLAB_INSTANCE=N, N free: not in \[0, 4\]\)$"
    with parallel.lock.holding("quiclab sweep other"), pytest.raises(parallel.lock.LabBusy, match=busy):
        parallel.pick_labs(2)
    assert parallel.pick_labs(2)[0] == parallel.config.INSTANCE.number  # free again once the holder is gone


class _Log:
    def __init__(self) -> None:
        self.rows: list[RunRecord] = []

    def append(self, rec: RunRecord) -> None:
        self.rows.append(rec)


@pytest.mark.parametrize(("guard", "attempts", "recorded_flag", "aside"), [
    ("repeat", 3, "busy", 2),  # repeated up to HOST_ATTEMPTS; the last kept, flagged
    ("flag", 1, "busy", 0),
    ("off", 1, "", 0),
])
def test_the_guard_repeats_a_host_bound_run_and_sets_its_attempts_aside(monkeypatch, guard, attempts,
                                                                        recorded_flag, aside):
    run = plan(scenario("4mbit", repeats=1, loss=("0%",)))[0]
    calls = []

    def execute(r, ctx):
        calls.append(r.key)
        return make_record(total_s=4.0)

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner.hostload, "verdict", lambda load, run_s, drops: "busy")
    set_aside, log, retries = _Log(), _Log(), []
    ctx = runner.Context(sweep="p", shaper="linkem", cc={}, timeout_for=lambda r: 60, host_guard=guard,
                         host_bound_log=set_aside.append)
    finish = runner.run_all([run], ctx, log, lambda rec: None, on_retry=lambda r, why: retries.append(why))
    assert finish.outcome == "complete" and len(calls) == attempts
    assert [r.host_bound for r in log.rows] == [recorded_flag] and len(set_aside.rows) == aside
    assert all(w == "the host was the bottleneck (busy)" for w in retries) and len(retries) == aside


def test_bad_parallel_options_exit_2_in_one_line(tmp_path: Path):
    cases = [(["sweep", "quick", "--parallel", "0"], "invalid --parallel '0'"),
             (["sweep", "quick", "--parallel", "99"], "invalid --parallel '99'"),
             (["sweep", "quick", "--parallel", "2", "--shard", "1/2"], "--parallel and --shard cannot be combined"),
             (["sweep", "quick", "--host-guard", "maybe"],
              "invalid --host-guard 'maybe': allowed are repeat, flag, off"),
             (["sweep", "--resume", str(tmp_path), "--parallel", "2"], "--parallel cannot be given with --resume")]
    for args, needle in cases:
        done = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=tmp_path,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DOCKER_HOST": "unix:///nonexistent"},
                              check=False)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.mark.parametrize(("units", "labs", "fewest"), [
    (5, 4, 3),    # a matrix's 5 (point, repeat) groups: two rounds on 4 labs or on 3
    (10, 4, 4),   # three rounds on 4 labs, four on 3: keep 4
    (9, 4, 3),    # three rounds either way
    (8, 4, 4), (3, 4, 3), (1, 1, 1), (7, 8, 7), (20, 8, 7),
])
def test_auto_takes_the_fewest_labs_that_finish_in_as_many_rounds(units, labs, fewest):
    assert parallel.fewest_for_rounds(units, labs) == fewest
    rounds = -(-units // labs)
    assert -(-units // fewest) == rounds and (fewest == 1 or -(-units // (fewest - 1)) > rounds)


def test_auto_on_five_groups_uses_three_labs_not_four():
    runs = plan(scenario("4mbit", repeats=5, loss=("0%",)))
    assert len(groups(runs)) == 5 and parallel.auto(runs, 2) == 3


def test_a_matrix_group_is_dealt_in_chunks_that_keep_its_seed():
    """The goodput matrix: 5 (point, repeat) groups of ~94 runs each become chunks of at most UNIT_RUNS runs, every
    run in exactly one, each chunk within one group (one link seed), in the plan's shuffled order; `auto` then
    plans on the chunks (4 labs on this 2-core host, not 3 for 5 whole groups)."""
    runs = plan(presets.get("matrix-goodput"))
    assert len(groups(runs)) == 5 and len(runs) > 5 * parallel.UNIT_RUNS
    units = parallel.units(runs)
    assert sorted(r.key for u in units for r in u) == sorted(r.key for r in runs)
    assert all(len(u) <= parallel.UNIT_RUNS for u in units) and len(units) == 5 * -(-len(runs) // 5 // 24)
    for u in units:
        assert len({(r.point.index, r.repeat, r.seed) for r in u}) == 1
        assert [r.order for r in u] == sorted(r.order for r in u)
    sizes = {}
    for u in units:
        sizes.setdefault(u[0].repeat, []).append(len(u))
    assert all(max(s) - min(s) <= 1 for s in sizes.values())  # near-equal chunks of one group
    firsts = [u[0].order for u in units]
    assert firsts == sorted(firsts)
    assert parallel.auto(runs, 2) == 4
    assert [[r.key for r in u] for u in units] == [list(g) for g in parallel._queue(runs)]


def test_a_sweeps_usual_groups_stay_whole():
    runs = plan(scenario("4mbit"))
    assert [sorted(r.key for r in u) for u in parallel.units(runs)] == [sorted(g) for g in parallel._queue(runs)]
    assert len(parallel.units(runs)) == len(groups(runs))
