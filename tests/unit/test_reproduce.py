"""Issue 24 point 2 without a lab: `quiclab reproduce` rebuilds a plan only from a manifest that holds it exactly
(refusals exit 2 naming why), lists what differs between the two labs, and judges a reproduction (equivalent /
shifted by 25 % / too few) into reproduce.md and reproduce.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.errors import UsageError
from lab.plan import presets, shard
from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.results.schema import csv_text
from lab.run import reproduce
from lab.stats.verdict import Margins
from tests.unit.test_stats import make_record


def preset_manifest(name: str = "parallel-check", **extra) -> dict:
    s = validate(presets.get(name).model_dump(), name)
    return {"name": s.name, "preset": name, "scenario": s.model_dump(mode="json"), "seed": s.seed,
            "plan": {"id": shard.plan_id(s, plan(s))}, "git": {"commit": "abc"}, **extra}


def folder_with(tmp_path: Path, manifest: dict | None, name: str = "orig") -> Path:
    f = tmp_path / name
    f.mkdir()
    if manifest is not None:
        (f / "manifest.json").write_text(json.dumps(manifest))
    return f


def test_a_manifest_with_its_plan_is_rebuilt_exactly(tmp_path: Path):
    o = reproduce.load_original(folder_with(tmp_path, preset_manifest(parallel={"labs": 3})))
    assert o.preset == "parallel-check" and o.labs == 3
    assert shard.plan_id(o.scenario, plan(o.scenario)) == preset_manifest()["plan"]["id"]


@pytest.mark.parametrize(("manifest", "needle"), [
    (None, "has no manifest.json: not a sweep folder"),
    ({"name": "x"}, "has no scenario"),
    (preset_manifest(preset="no-such-preset"), "names preset 'no-such-preset', which this quiclab does not know"),
    (preset_manifest(shard={"index": 1, "count": 2}), "is shard 1/2 of a sweep: reproduce the merged folder"),
    (preset_manifest(plan={"id": "sha256:" + "0" * 64}), "the plan cannot be rebuilt"),
    ({**preset_manifest(), "scenario": {"name": "x", "repeats": 0}}, "repeats"),
])
def test_a_plan_that_cannot_be_rebuilt_is_refused_naming_why(tmp_path: Path, manifest, needle):
    with pytest.raises(UsageError) as e:
        reproduce.load_original(folder_with(tmp_path, manifest))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_what_differs_between_the_two_labs_is_listed():
    then = {"git": {"commit": "a", "dirty": False}, "shaper": "linkem", "link_forwarding": "in-write",
            "versions": {"nginx": "nginx/1.26.3", "curl-sid": "curl 8.23.0", "kernel": "6.18"},
            "implementations": {"nginx": {"cc": {"tcp": "bbr"}}}}
    now = {"git": {"commit": "b", "dirty": False}, "shaper": "linkem", "link_forwarding": "threaded-napi",
           "versions": {"nginx": "nginx/1.26.3", "curl-sid": "curl 8.24.1", "kernel": "6.19"},
           "implementations": {"nginx": {"cc": {"tcp": "cubic"}}}}
    assert reproduce.differences(then, now) == [
        "git.commit: a -> b", "link_forwarding: in-write -> threaded-napi",
        "versions.curl-sid: curl 8.23.0 -> curl 8.24.1",
        "implementations.nginx.cc: {'tcp': 'bbr'} -> {'tcp': 'cubic'}"]
    assert reproduce.differences(then, then) == []


def sweep(tmp_path: Path, name: str, scale: dict[str, float], n: int = 10) -> Path:
    """Two points x h2/h3, n runs each; transfer times 4.0 s spread by a fixed pattern, scaled per protocol."""
    spread = [0.97, 1.01, 0.99, 1.03, 1.0, 0.98, 1.02, 0.995, 1.005, 1.015][:n]
    recs = [make_record(point=p, protocol=proto, repeat=i, total_s=4.0 * f * scale[proto])
            for p in (0, 2) for proto in ("h2", "h3") for i, f in enumerate(spread)]
    f = folder_with(tmp_path, {**preset_manifest(), "name": name, "repeats": n}, name)
    (f / "runs.csv").write_text(csv_text(recs))
    return f


def test_an_equal_reproduction_is_equivalent_and_exits_0(tmp_path: Path):
    a = sweep(tmp_path, "a", {"h2": 1.0, "h3": 1.0})
    b = sweep(tmp_path, "b", {"h2": 1.01, "h3": 0.99})
    r = reproduce.judge(a, b, Margins())
    assert r.share.points == 4 and r.share.equivalent == 4 and r.share.differ == 0 and r.exit_code == 0
    doc = json.loads((b / "reproduce.json").read_text())
    assert doc["share"] == {"points": 4, "equivalent": 4, "differ": 0}
    md = (b / "reproduce.md").read_text()
    assert "**4 of 4 points equivalent (100%)**" in md and "nothing recorded differs" in md
    assert md.count("| equivalent |") >= 4


def test_a_slower_link_differs_everywhere_and_exits_1(tmp_path: Path):
    a = sweep(tmp_path, "a", {"h2": 1.0, "h3": 1.0})
    b = sweep(tmp_path, "b", {"h2": 4 / 3, "h3": 4 / 3})  # 3 Mbit/s instead of 4: every transfer 4/3 as long
    r = reproduce.judge(a, b, Margins())
    assert r.share.differ == 4 and r.share.equivalent == 0 and r.exit_code == 1
    assert all(row.verdict == "differs" for row in r.judgement.rows if row.metric == "goodput")


def test_too_few_runs_are_inconclusive_not_equivalent(tmp_path: Path):
    a = sweep(tmp_path, "a", {"h2": 1.0, "h3": 1.0}, n=3)
    b = sweep(tmp_path, "b", {"h2": 1.25, "h3": 1.25}, n=3)
    r = reproduce.judge(a, b, Margins())
    assert r.share.differ == 0 and r.exit_code == 0  # n = 3 per side: no difference can be shown
    assert all(row.too_few for row in r.judgement.rows if row.metric == "goodput")


def test_reproduce_refusals_exit_2_in_one_line(tmp_path: Path):
    bad = folder_with(tmp_path, preset_manifest(preset="no-such-preset"), "bad")
    for args, needle in ((["reproduce", str(tmp_path / "none")], "is not a sweep folder (no such directory)"),
                         (["reproduce", str(tmp_path)], "has no manifest.json"),
                         (["reproduce", str(bad)], "names preset 'no-such-preset'"),
                         (["reproduce", str(bad), "--parallel", "0"], "invalid --parallel '0'"),
                         (["reproduce", str(bad), "--margin", "0"], "--margin")):
        done = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=tmp_path,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                   "DOCKER_HOST": "unix:///nonexistent"}, check=False)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, done.stderr)
