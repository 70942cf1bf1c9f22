"""Sharded sweeps without the lab: slicing a plan, the CLI's --shard values, and merge validation on synthetic
shard folders (manifest + runs.csv as `quiclab sweep --shard` writes them)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.cli import main
from lab.errors import UsageError
from lab.plan import shard
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, groups, plan
from lab.plan.scenario import Scenario
from lab.report.merge import merge
from lab.results import store
from lab.results.schema import RunRecord

SCENARIOS = {
    "quick": {"name": "quick", "repeats": 3, "sweep": {"loss": ["0%", "1%"]}},
    "grid": {"name": "grid", "repeats": 2, "clients": ["curl", "gtlsclient"], "servers": ["nginx", "caddy"],
             "sweep": {"loss": ["0%", "1%"], "rtt": ["10ms", "50ms", "100ms"]}},
    "sizes": {"name": "sizes", "repeats": 5, "seed": 7, "protocols": ["h2", "h3"], "sweep": {"size": ["10kB", "1MB"]}},
}


def scenario(name: str = "quick", **changes: object) -> Scenario:
    return validate({**SCENARIOS[name], **changes}, name)


@pytest.mark.parametrize("name", SCENARIOS)
def test_shards_partition_the_plan_in_whole_groups(name):
    every = plan(scenario(name))
    by_key = {r.key: r for r in every}
    for n in range(1, len(groups(every)) + 1):
        parts = [shard.ShardSpec(i, n).select(every) for i in range(1, n + 1)]
        counts = Counter(r.key for p in parts for r in p)
        assert set(counts) == set(by_key) and set(counts.values()) == {1}, "every run in exactly one shard"
        for p in parts:
            assert p, "no empty shard"
            assert all(by_key[r.key] == r for r in p), "same keys, seeds, order numbers as the unsharded plan"
            assert [r.order for r in p] == sorted(r.order for r in p), "the plan's execution order"
            for g in groups(p):
                whole = [r.key for r in every if (r.point.index, r.repeat) == g]
                assert sorted(r.key for r in p if (r.point.index, r.repeat) == g) == sorted(whole), g
        sizes = [len(groups(p)) for p in parts]
        assert max(sizes) - min(sizes) <= 1, f"{n} shards: groups per shard {sizes}"


def test_shards_spread_every_point_over_the_shards():
    """3 shards of 5 repeats: each shard gets 1 or 2 repeats of every point (not whole points)."""
    every = plan(scenario("sizes"))
    for i in (1, 2, 3):
        per_point = Counter(p for p, _ in groups(shard.ShardSpec(i, 3).select(every)))
        assert set(per_point) == {0, 1} and set(per_point.values()) <= {1, 2}, per_point


def test_slicing_is_deterministic():
    a = [r.key for r in shard.ShardSpec(2, 3).select(plan(scenario("grid")))]
    b = [r.key for r in shard.ShardSpec(2, 3).select(plan(scenario("grid")))]
    assert a == b
    assert a != [r.key for r in shard.ShardSpec(2, 3).select(plan(scenario("grid", seed=2)))], "order follows seed"


def test_plan_id_names_scenario_seed_and_runs():
    s = scenario()
    pid = shard.plan_id(s, plan(s))
    assert pid == shard.plan_id(scenario(), plan(scenario())) and pid.startswith("sha256:")
    assert pid != shard.plan_id(scenario(seed=2), plan(scenario(seed=2)))
    assert pid != shard.plan_id(scenario(repeats=4), plan(scenario(repeats=4)))
    assert pid != shard.plan_id(scenario(timeout=30), plan(scenario(timeout=30))), "the whole scenario counts"


def test_too_many_shards_for_the_plan():
    every = plan(scenario())  # 2 points x 3 repeats = 6 groups
    shard.check(shard.ShardSpec(6, 6), every)
    with pytest.raises(UsageError, match=r"'1/7'.*6 \(point, repeat\) groups"):
        shard.check(shard.ShardSpec(1, 7), every)


def test_resume_of_a_shard_runs_only_its_slice():
    s = scenario()
    every = plan(s)
    manifest = shard.manifest_fields(s, every, shard.ShardSpec(2, 3))
    assert manifest["shard"] == {"index": 2, "count": 3, "runs": 6, "groups": 2}
    assert manifest["plan"]["runs"] == 18 and manifest["host_facts"]["kernel"]
    assert shard.restrict(manifest, every) == shard.ShardSpec(2, 3).select(every)
    assert shard.restrict({"shard": None}, every) == every


def quiclab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60)


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI's entry point in this process (exit code, stdout, stderr): the subprocess costs 1.5 s each."""
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("value", ["0/3", "4/3", "1/0", "x/y", "2", "1/11", "-1/3", ""])
def test_bad_shard_values_exit_2_naming_the_value(capsys, value):
    code, _, err = in_process(capsys, "sweep", "quick", "--shard", value, "--dry-run")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"'{value}'" in lines[0] and "Traceback" not in err, err
    assert "i/N" in lines[0] or "at most 10 shards" in lines[0]  # quick: 2 points x 5 repeats


def test_bad_shard_value_exits_2_from_the_command_line():
    r = quiclab("sweep", "quick", "--shard", "0/3")
    assert r.returncode == 2 and r.stderr.strip() == "error: invalid --shard '0/3': expected i/N: shard i of N, " \
        "1 <= i <= N (e.g. 2/3)", r.stderr


def test_dry_run_shards_union_is_the_unsharded_plan(capsys):
    whole = json.loads(in_process(capsys, "sweep", "quick", "--dry-run")[1])
    parts = [json.loads(in_process(capsys, "sweep", "quick", "--shard", f"{i}/3", "--dry-run")[1]) for i in (1, 2, 3)]
    assert whole["runs"] == len(whole["run_keys"]) == 30 and whole["shard"] is None
    assert {p["plan_id"] for p in parts} == {whole["plan_id"]}
    assert sorted(k for p in parts for k in p["run_keys"]) == sorted(whole["run_keys"])
    assert [p["shard_runs"] for p in parts] == [12, 9, 9]  # 10 groups dealt in turn: 4, 3, 3


# --- merge validation on synthetic shard folders ---------------------------------------------------------------------

def record(r: PlannedRun, sweep: str, status: str = "ok") -> RunRecord:
    total = 0.5 + r.point.index * 0.1 + r.repeat * 0.01
    return RunRecord(
        sweep=sweep, run_key=r.key, point=r.point.index, point_label=r.point.label, x_name=r.point.x_name,
        x=r.point.x, protocol=r.protocol.value, client=r.client, server=r.server, repeat=r.repeat, order=r.order,
        seed=r.seed, shaper="linkem", rate_bps=2e7, rtt_s=0.02, loss_pct=r.point.x, jitter_s=0.0, link="{}",
        size_bytes=r.point.size, status=status, failure="" if status == "ok" else status, http_version="3",
        bytes=r.point.size, sha256_ok=True, handshake_s=0.01, ttfb_s=0.02, total_s=total,
        goodput_bps=r.point.size * 8 / total, wall_s=total + 0.1, overhead_s=0.1, wire_down_bytes=None,
        wire_up_bytes=None, wire_overhead=None, cc_client="bbr", cc_server="bbr", started_at="2026-01-01T00:00:00Z")


def make_shard(root: Path, s: Scenario, spec: shard.ShardSpec | None, *, commit: str = "abc123",
               records: list[RunRecord] | None = None, kernel: str = "6.8.0") -> Path:
    every = plan(s)
    mine = spec.select(every) if spec else every
    folder = store.new_folder(root, shard.folder_name(s.name, spec))
    manifest = {"name": s.name, "preset": None, "scenario": s.model_dump(), "seed": s.seed, "repeats": s.repeats,
                "planned_runs": len(mine), "x_name": "loss_pct", "started_at": "2026-01-01T00:00:00+00:00",
                "finished_at": "2026-01-01T00:05:00+00:00", "status": "complete",
                "git": {"commit": commit, "dirty": False}, "shaper": "linkem",
                "versions": {"kernel": kernel, "curl": "curl 8.14"}, "self_check": {"rtt": {"measured_median_ms": 20}},
                **shard.manifest_fields(s, every, spec)}
    manifest["host_facts"]["kernel"] = kernel
    store.write_json_atomic(folder / store.MANIFEST, manifest)
    store.rewrite_runs(folder, records if records is not None else [record(r, s.name) for r in mine])
    return folder


def shards(root: Path, s: Scenario, n: int = 3, **kw: object) -> list[Path]:
    return [make_shard(root / "in", s, shard.ShardSpec(i, n), **kw) for i in range(1, n + 1)]  # type: ignore[arg-type]


def test_merge_puts_the_plan_together_and_builds_the_report(tmp_path):
    s = scenario()
    folders = shards(tmp_path, s)
    # another machine ran shard 3: its host facts are kept per run
    m3 = json.loads((folders[2] / store.MANIFEST).read_text())
    m3["host_facts"].update(kernel="6.18.0", cpu="Other CPU", cpus=4)
    m3["shaper"] = "netem"
    store.write_json_atomic(folders[2] / store.MANIFEST, m3)
    m2 = json.loads((folders[1] / store.MANIFEST).read_text())
    m2["git"]["dirty"] = True
    store.write_json_atomic(folders[1] / store.MANIFEST, m2)
    m = merge(list(reversed(folders)), tmp_path / "out")
    assert "git.dirty: uncommitted changes (shard 2/3)" in m.differences
    assert m.complete and m.runs == m.planned == 18
    runs = store.load_runs(m.folder)
    assert sorted(r.run_key for r in runs) == sorted(r.key for r in plan(s))
    assert [r.order for r in runs] == sorted(r.order for r in runs)
    facts = {json.loads(r.host)["shard"]: json.loads(r.host) for r in runs}
    assert set(facts) == {"1/3", "2/3", "3/3"} and facts["3/3"]["cpu"] == "Other CPU"
    assert facts["3/3"]["shaper"] == "netem" and facts["1/3"]["kernel"] == "6.8.0"
    manifest = json.loads((m.folder / store.MANIFEST).read_text())
    assert manifest["status"] == "complete" and manifest["planned_runs"] == manifest["completed_runs"] == 18
    assert [sh["index"] for sh in manifest["shards"]] == [1, 2, 3] and manifest["shaper"] == "linkem, netem"
    assert any(d.startswith("kernel:") for d in m.differences)
    for name in ("summary.md", "report.html", "plots/time.svg"):
        assert (m.folder / name).stat().st_size > 0
    summary = (m.folder / "summary.md").read_text()
    assert "| loss=1% | HTTP/3 curl→nginx | 3 |" in summary or "| loss=1% | HTTP/3 | 3 |" in summary, summary


@pytest.mark.parametrize("case", ["missing", "two-missing"])
def test_a_missing_shard_is_named(tmp_path, case):
    folders = shards(tmp_path, scenario())
    given = [folders[0], folders[2]] if case == "missing" else [folders[2]]
    with pytest.raises(UsageError) as e:
        merge(given, tmp_path / "out")
    want = "missing shard 2/3 " if case == "missing" else "missing shards 1/3, 2/3 "
    assert want in str(e.value) and str(folders[2]) in str(e.value)
    assert not (tmp_path / "out").exists(), "nothing is written"


def test_cli_merge_without_a_shard_exits_2_naming_it(tmp_path):
    folders = shards(tmp_path, scenario())
    r = quiclab("merge", str(folders[0]), str(folders[1]), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "missing shard 3/3" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_partial_merge_says_what_is_missing(tmp_path):
    s = scenario()
    folders = shards(tmp_path, s)
    m = merge(folders[:2], tmp_path / "out", partial=True)
    assert not m.complete and m.runs == 12 and m.planned == 18
    manifest = json.loads((m.folder / store.MANIFEST).read_text())
    assert manifest["status"] == "partial" and "missing shard 3/3" in manifest["problems"][0]

def test_cli_partial_merge_exits_1(capsys, tmp_path):
    folders = shards(tmp_path, scenario("sizes", repeats=2), n=2)
    code, out, err = in_process(capsys, "merge", str(folders[0]), "--partial", "--out", str(tmp_path / "out"))
    assert code == 1 and "partial merge: missing shard 2/2" in err and "results: " in out, err


def test_an_incomplete_shard_is_named_with_how_to_go_on(tmp_path):
    s = scenario()
    every = plan(s)
    spec = shard.ShardSpec(2, 3)
    recs = [record(r, s.name) for r in spec.select(every)]
    recs[-1] = dataclasses.replace(recs[-1], status="interrupted")  # never a result
    folders = shards(tmp_path, s)
    folders[1] = make_shard(tmp_path / "in", s, spec, records=recs)
    with pytest.raises(UsageError, match=r"shard 2/3 in .* lacks 1 of its 6 runs .*quiclab sweep --resume"):
        merge(folders[:1] + folders[1:], tmp_path / "out")


def test_a_legacy_lab_failure_row_is_not_merged_as_a_result(tmp_path):
    # older versions recorded a lab failure as a failed run; the store never counts it (store.is_result), and
    # neither does merge: the shard lacks that run and says how to go on
    s = scenario()
    spec = shard.ShardSpec(2, 3)
    recs = [record(r, s.name) for r in spec.select(plan(s))]
    recs[-1] = dataclasses.replace(recs[-1], status="failed", failure="could not run curl: docker exec failed")
    folders = shards(tmp_path, s)
    folders[1] = make_shard(tmp_path / "in", s, spec, records=recs)
    with pytest.raises(UsageError, match=r"shard 2/3 in .* lacks 1 of its 6 runs"):
        merge(folders, tmp_path / "out")


def test_duplicates_and_foreign_runs_are_refused(tmp_path):
    s = scenario()
    every = plan(s)
    one, two = shard.ShardSpec(1, 3).select(every), shard.ShardSpec(2, 3).select(every)
    base = shards(tmp_path, s)
    cases = {
        "given twice": [*base, make_shard(tmp_path / "in", s, shard.ShardSpec(2, 3))],
        "is not in shard 1/3": [make_shard(tmp_path / "in", s, shard.ShardSpec(1, 3),
                                           records=[record(r, s.name) for r in [*one, two[0]]]), *base[1:]],
        "recorded twice": [make_shard(tmp_path / "in", s, shard.ShardSpec(1, 3),
                                      records=[record(r, s.name) for r in [*one, one[0]]]), *base[1:]],
        "the plan says seed": [make_shard(tmp_path / "in", s, shard.ShardSpec(1, 3),
                                          records=[dataclasses.replace(record(r, s.name), seed=5) for r in one]),
                               *base[1:]],
    }
    for needle, folders in cases.items():
        with pytest.raises(UsageError, match=needle):
            merge(folders, tmp_path / "out")


def test_shards_of_other_plans_commits_or_splits_are_refused(tmp_path):
    s = scenario()
    base = shards(tmp_path, s)
    cases = {
        "belongs to another plan": [*base[:2], make_shard(tmp_path / "in", scenario(seed=2), shard.ShardSpec(3, 3))],
        "at commit def456": [*base[:2], make_shard(tmp_path / "in", s, shard.ShardSpec(3, 3), commit="def456")],
        "split the plan the same way": [*base[:2], make_shard(tmp_path / "in", s, shard.ShardSpec(3, 4))],
        "another plan.*unsharded|another plan": [*base, make_shard(tmp_path / "in", scenario(repeats=4), None)],
    }
    for needle, folders in cases.items():
        with pytest.raises(UsageError, match=needle):
            merge(folders, tmp_path / "out")
    edited = json.loads((base[0] / store.MANIFEST).read_text())
    edited["plan"]["id"] = "sha256:0"
    store.write_json_atomic(base[0] / store.MANIFEST, edited)
    with pytest.raises(UsageError, match="is not the one its scenario makes"):
        merge(base, tmp_path / "out")
    with pytest.raises(UsageError, match="not a sweep folder"):
        merge([tmp_path / "nowhere"], tmp_path / "out")


def test_an_unsharded_sweep_merges_as_shard_1_of_1(tmp_path):
    s = scenario()
    m = merge([make_shard(tmp_path / "in", s, None)], tmp_path / "out")
    assert m.complete and m.runs == 18 and {json.loads(r.host)["shard"] for r in store.load_runs(m.folder)} == {"1/1"}


def test_reuse_tells_shards_apart(tmp_path):
    s = scenario()
    whole = make_shard(tmp_path, s, None)
    two = make_shard(tmp_path, s, shard.ShardSpec(2, 3))
    assert store.latest_matching(tmp_path, s.model_dump()) == whole
    assert store.latest_matching(tmp_path, s.model_dump(), {"index": 2, "count": 3}) == two
    assert store.latest_matching(tmp_path, s.model_dump(), {"index": 1, "count": 3}) is None
    m = merge([whole], tmp_path)  # a merged folder, the newest, is never resumed or shown by --reuse
    m.folder.rename(tmp_path / "99991231-235959-quick-merged")
    assert store.latest_matching(tmp_path, s.model_dump()) == whole
