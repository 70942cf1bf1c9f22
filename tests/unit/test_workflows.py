"""The GitHub Actions workflows' structure: minimal permissions, actions pinned by commit, no expressions in
scripts, and the sweep workflow's hand-offs (plan -> shard matrix -> artifacts -> merge by pattern) fit together.
(actionlint and zizmor check the rest: scripts/lint-workflows.sh; tests/lab/test_shards.py runs the steps.)"""

from __future__ import annotations

import fnmatch
import re

import pytest

from tests import workflows as wf

NAMES = ("ci.yml", "sweep.yml")


@pytest.mark.parametrize("name", NAMES)
def test_permissions_pins_and_scripts(name):
    doc = wf.load(name)
    assert doc["permissions"] == {"contents": "read"}
    for job, spec in doc["jobs"].items():
        assert spec["runs-on"] == "ubuntu-24.04" and spec.get("timeout-minutes"), job
        assert "permissions" not in spec, f"{job} widens the permissions"
        for st in spec["steps"]:
            if "uses" in st:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", st["uses"]), f"{job}: {st['uses']} not pinned"
                if st["uses"].startswith("actions/checkout@"):
                    assert st["with"]["persist-credentials"] is False, job
            else:
                assert "${{" not in st["run"], f"{job}/{st.get('name')}: expression in a script"


def test_ci_runs_lint_unit_lab_tests_and_the_quick_sweep():
    doc = wf.load("ci.yml")
    assert set(doc["on"]) == {"push", "pull_request"}
    scripts = "\n".join(st.get("run", "") for job in doc["jobs"].values() for st in job["steps"])
    for needle in ("ruff check lab tests", "scripts/lint-workflows.sh", "pytest -q tests/unit", "modprobe sch_netem",
                   "scripts/test.sh tests/lab", "quiclab sweep quick", "shaper"):
        assert needle in scripts, needle
    upload = [st for st in doc["jobs"]["lab"]["steps"] if "upload-artifact" in st.get("uses", "")]
    assert upload and upload[0]["if"] == "always()"


def test_sweep_hands_over_images_shards_and_results():
    doc = wf.load("sweep.yml")
    assert set(doc["on"]) == {"workflow_dispatch"}
    assert set(doc["on"]["workflow_dispatch"]["inputs"]) == {"preset", "shards", "repeats"}
    jobs = doc["jobs"]
    assert jobs["shard"]["needs"] == "plan" and set(jobs["merge"]["needs"]) == {"plan", "shard"}
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert jobs["shard"]["strategy"]["fail-fast"] is False
    assert jobs["merge"]["if"].startswith("always()")
    # images: saved once by the plan job, loaded by every shard, never built there
    saved = [st for st in jobs["plan"]["steps"] if "upload-artifact" in st.get("uses", "")]
    loaded = [st for st in jobs["shard"]["steps"] if "download-artifact" in st.get("uses", "")]
    assert saved[0]["with"]["name"] == loaded[0]["with"]["name"] == "images"
    shard_scripts = "\n".join(st.get("run", "") for st in jobs["shard"]["steps"])
    assert "docker load" in shard_scripts and "QUICLAB_SETUP_NO_BUILD=1" in shard_scripts
    # each shard's artifact is found by the merge job's pattern, into a folder of its own
    ctx = {"needs.plan.outputs.sweep": "quick", "matrix.shard": "2", "env.RESULTS_DIR": "r", "env.SHARDS_DIR": "s",
           "env.MERGED_DIR": "m"}
    up = wf.step(doc, "shard", "upload the shard")
    down = next(st for st in jobs["merge"]["steps"] if "download-artifact" in st.get("uses", ""))
    assert up["if"] == "always()" and wf.expand(up["with"]["path"], ctx) == "r/"
    assert fnmatch.fnmatch(wf.expand(up["with"]["name"], ctx), wf.expand(down["with"]["pattern"], ctx))
    assert not down["with"].get("merge-multiple") and wf.expand(down["with"]["path"], ctx) == "s"
    assert wf.expand(wf.step(doc, "merge", "upload the report")["with"]["path"], ctx) == "m/"
