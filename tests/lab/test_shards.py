"""Issue 12 (shards): the sweep workflow's own plan, shard and merge step scripts (.github/workflows/sweep.yml), run
here on the real lab as GitHub would run them, three shards one after another (each in its own results folder,
as on its own runner), the artifacts handed over the way upload/download-artifact do it, then merged: the merged
run keys are the unsharded plan's, the report builds, and a missing shard makes the merge fail naming it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab.plan import presets
from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.plan.shard import ShardSpec
from lab.report.report import load_sweep
from lab.results import store
from tests import workflows as wf
from tests.lab.test_sweep import quiclab

pytestmark = pytest.mark.lab

N = 3
BUSY = "the lab is busy"  # another quiclab command holds the shared lab (lab/lock.py): nothing ran
WAIT_FOR_LAB_S = 1800


def when_free(start: Callable[..., subprocess.CompletedProcess[str]], *args: Any) -> subprocess.CompletedProcess[str]:
    """Run a lab command, again while another command holds the lab (only on a lab shared by several users:
    a refused command did nothing)."""
    deadline = time.monotonic() + WAIT_FOR_LAB_S
    while True:
        r = start(*args)
        if r.returncode == 0 or BUSY not in r.stderr or time.monotonic() > deadline:
            return r
        time.sleep(3)


def test_workflow_shards_merge_into_the_unsharded_plan(lab_up, tmp_path):
    doc = wf.load("sweep.yml")
    inputs = {"inputs.preset": "quick", "inputs.shards": str(N), "inputs.repeats": ""}
    every = plan(presets.get("quick"))

    r = wf.run_step(doc, "plan", "plan", inputs, {}, tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "groups, 3 shards" in (tmp_path / "step_summary").read_text()
    outputs = dict(line.split("=", 1) for line in (tmp_path / "github_output").read_text().splitlines())
    assert outputs == {"sweep": "quick", "shards": json.dumps(list(range(1, N + 1)))}
    needs = {"needs.plan.outputs.sweep": outputs["sweep"], "needs.plan.outputs.shards": outputs["shards"]}

    shards_dir, merged_dir = tmp_path / "shards", tmp_path / "merged"
    timings = {}
    for i in json.loads(outputs["shards"]):
        results = tmp_path / f"runner-{i}"  # each shard job's own workspace
        ctx = {**inputs, **needs, "matrix.shard": str(i)}
        t0 = time.monotonic()
        r = when_free(wf.run_step, doc, "shard", "sweep shard", ctx, {"RESULTS_DIR": str(results)}, tmp_path)
        timings[i] = time.monotonic() - t0  # (with any wait for the shared lab)
        assert r.returncode == 0, r.stderr[-2000:]
        [folder] = [p for p in results.iterdir() if p.is_dir()]
        manifest = store.read_manifest(folder)
        assert manifest["shard"]["index"] == i and manifest["shard"]["count"] == N and manifest["status"] == "complete"
        assert len(store.load_runs(folder)) == manifest["planned_runs"] == manifest["shard"]["runs"]
        assert (folder / "report.html").stat().st_size > 0, "a shard is a sweep folder of its own"
        r = wf.run_step(doc, "shard", "shaper and host", ctx, {"RESULTS_DIR": str(results)}, tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        runs = manifest["shard"]["runs"]
        assert f"shard {i}/{N}: complete, {runs} of {runs} runs, shaper {manifest['shaper']}, kernel" in r.stdout, \
            r.stdout
        # upload-artifact (path: RESULTS_DIR/, name results-<sweep>-<i>) then download-artifact by pattern: one
        # folder per artifact (tests/unit/test_workflows.py checks the names and paths match)
        shutil.copytree(results, shards_dir / wf.expand(wf.step(doc, "shard", "upload the shard")["with"]["name"], ctx))

    merge_env = {"SHARDS_DIR": str(shards_dir), "MERGED_DIR": str(merged_dir)}
    t0 = time.monotonic()
    r = wf.run_step(doc, "merge", "merge", {**inputs, **needs}, merge_env, tmp_path, timeout=300)
    merge_s = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    [merged] = list(merged_dir.iterdir())
    records, manifest = load_sweep(merged)
    assert sorted(rec.run_key for rec in records) == sorted(run.key for run in every), "the unsharded plan's runs"
    assert {(rec.run_key, rec.seed) for rec in records} == {(run.key, run.seed) for run in every}
    assert all(rec.status == "ok" for rec in records), [(rec.run_key, rec.failure) for rec in records
                                                        if rec.status != "ok"]
    assert {json.loads(rec.host)["shard"] for rec in records} == {f"{i}/{N}" for i in range(1, N + 1)}
    assert manifest["status"] == "complete" and len(manifest["shards"]) == N
    for name in ("summary.md", "report.html", "plots/goodput.svg", "plots/time.png"):
        assert (merged / name).stat().st_size > 0, name
    # the per-method table (the claims table above it has rows per point and method too)
    summary = (merged / "summary.md").read_text().split("## Transfer time and goodput per method", 1)[1]
    summary = summary.split("\n## ", 1)[0]
    for label in ("loss=0%", "loss=1%"):
        for method in ("HTTP/1.1", "HTTP/2", "HTTP/3"):
            rows = [ln for ln in summary.splitlines() if ln.startswith(f"| {label} | {method}")]
            n = str(presets.get("quick").repeats)  # every repeat, from 3 machines
            assert len(rows) == 1 and rows[0].split("|")[3].strip() == n, rows
    # every planned run ran once (in exactly one shard) and has its times; each shard and the merge took time
    assert len(records) == len(every) == len({rec.run_key for rec in records})
    untimed = [rec.run_key for rec in records if not (rec.total_s and 0 < rec.total_s <= rec.wall_s)]
    assert not untimed, f"runs without a positive transfer time within their wall time: {untimed}"
    assert sorted(timings) == list(range(1, N + 1)) and all(t > 0 for t in timings.values()) and merge_s > 0
    print(f"shards: {', '.join(f'{i}/{N} {s:.0f} s' for i, s in timings.items())}; merge {merge_s:.1f} s")

    # one shard's artifact missing: the merge fails and names it
    shutil.rmtree(shards_dir / "results-quick-2")
    r = wf.run_step(doc, "merge", "merge", {**inputs, **needs}, {**merge_env, "MERGED_DIR": str(tmp_path / "m2")},
                    tmp_path, timeout=300)
    assert r.returncode == 2 and f"missing shard 2/{N}" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "m2").exists() or not any((tmp_path / "m2").iterdir()), "nothing merged"


SMALL = """
name = "shard-resume"
sizes = ["2MB"]
repeats = 4
timeout = 30
[link]
rtt = "10ms"
rate = "20mbit"
[sweep]
loss = ["0%", "1%"]
"""


def wait_for_rows(out: Path, rows: int, exited: Callable[[], int | None], timeout_s: float = 180) -> Path | None:
    """The runs.csv of the one sweep writing into `out` once it holds more than `rows` lines; None if the sweep
    exited first (`exited()`: its exit code, None while it runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = list(out.glob("*/runs.csv")) if out.exists() else []
        if found and len(found[0].read_text().splitlines()) > rows:
            return found[0]
        if exited() is not None:
            return None
        time.sleep(0.1)
    raise AssertionError("the sweep never got going")


def test_an_interrupted_shard_resumes_its_own_slice_only(lab_up, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SMALL)
    out = tmp_path / "out"
    deadline = time.monotonic() + WAIT_FOR_LAB_S
    while True:
        proc = subprocess.Popen([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--shard", "2/3",
                                 "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                # Ctrl-C must reach it: under `nohup ... &` SIGINT arrives ignored, across exec too
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        runs_csv = wait_for_rows(out, 3, exited=proc.poll)
        if runs_csv is not None:
            break
        _, err = proc.communicate()
        assert BUSY in err and time.monotonic() < deadline, err  # refused: another command holds the lab
        shutil.rmtree(out, ignore_errors=True)
        time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "--resume" in err, err
    folder = runs_csv.parent
    assert folder.name.endswith("-shard-resume-shard2of3")
    # merging the interrupted shard names what it lacks, and the missing shards
    r = quiclab("merge", str(folder), "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "missing shards 1/3, 3/3" in r.stderr and "shard 2/3 in" in r.stderr, r.stderr

    r = when_free(quiclab, "sweep", "--resume", str(folder))
    assert r.returncode == 0, r.stderr
    manifest = store.read_manifest(folder)
    mine = ShardSpec(2, 3).select(plan(validate(manifest["scenario"], "m")))
    keys = [x.run_key for x in store.load_runs(folder)]
    assert len(keys) == len(set(keys)) == len(mine) == manifest["planned_runs"] == 9, keys
    assert set(keys) == {p.key for p in mine}, "a resumed shard runs its slice, not the whole plan"
    assert manifest["status"] == "complete"
