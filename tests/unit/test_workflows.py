"""The GitHub Actions workflows' structure: minimal permissions, actions pinned by commit, no expressions in
scripts, and the sweep workflow's hand-offs (plan -> shard matrix -> artifacts -> merge by pattern) fit together.
(actionlint and zizmor check the rest: scripts/lint-workflows.sh; tests/lab/test_shards.py runs the steps.)"""

from __future__ import annotations

import fnmatch
import re

import pytest

from lab.config import ROOT
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
                   "quiclab sweep quick", "shaper"):
        assert needle in scripts, needle
    upload = [st for st in doc["jobs"]["test"]["steps"] if "upload-artifact" in st.get("uses", "")]
    assert upload and upload[0]["if"] == "always()"


README_TEST = "bash scripts/test.sh"


def test_ci_runs_the_readmes_test_command_as_written():
    """Issue 27, 3: some CI job runs the README's test command unchanged (no path argument, no setting changed);
    as root, only where root finds the runner's tools is passed (PATH, rustup's and cargo's homes)."""
    assert f"{README_TEST}      #" in (ROOT / "README.md").read_text(), "the README's test command moved"
    doc = wf.load("ci.yml")
    found = [(job, st) for job, spec in wf.jobs(doc).items() for st in spec["steps"]
             for line in wf.lines(st.get("run", "")) if wf.runs_unchanged(line, README_TEST)]
    assert len(found) == 1, found
    job, st = found[0]
    assert "if" not in st and not st.get("continue-on-error") and "shell" not in st
    assert "defaults" not in doc["jobs"][job], "the job's shell is the runner's default (bash -eo pipefail)"
    assert st.get("env") is None, "no env for the suite set by the step"
    assert job not in {k for k, v in wf.jobs(doc).items() if v.get("env", {}).keys() - {"RESULTS_DIR"}}
    assert set(doc["env"]) == {"UV_VERSION", "GO_VERSION"}, "a workflow env value could change what the suite does"
    # as root: PATH is passed (sudo's secure_path would drop the runner's uv, Go and cargo) with rustup's homes
    assigned, _ = wf.root_prefix_and_command(wf.lines(st["run"])[0])
    assert assigned == {"PATH": "$PATH", "RUSTUP_HOME": "${RUSTUP_HOME:-$HOME/.rustup}",
                        "CARGO_HOME": "${CARGO_HOME:-$HOME/.cargo}"}
    # Go for actionlint (scripts/lint-workflows.sh), in the same job, before the suite
    steps = doc["jobs"][job]["steps"]
    go = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/setup-go@")]
    assert go and go[0] < steps.index(st)


@pytest.mark.parametrize("line", [
    "bash scripts/test.sh",
    'sudo env "PATH=$PATH" bash scripts/test.sh',
    'sudo --preserve-env=PATH env "PATH=$PATH" "CARGO_HOME=$HOME/.cargo" bash scripts/test.sh',
])
def test_runs_unchanged_accepts(line):
    assert wf.runs_unchanged(line, README_TEST)


@pytest.mark.parametrize("line", [
    "bash scripts/test.sh tests/lab",                  # a part of the suite
    "sudo -E bash scripts/test.sh -k link",
    'sudo env "PATH=/usr/bin" bash scripts/test.sh',   # not the runner's PATH
    'sudo env QUICLAB_SHAPER=netem bash scripts/test.sh',  # a setting changed
    "bash scripts/test.sh || true",
    "bash scripts/test.sh | tail",
    "uv run --frozen pytest -q tests/unit",
])
def test_runs_unchanged_rejects(line):
    assert not wf.runs_unchanged(line, README_TEST)


def test_one_pinned_uv_everywhere():
    """Issue 27, 3: every uv install is pinned, to one version in both workflows, and every job that runs uv (or a
    project script that does: scripts/setup.sh installs the newest where none is found) installs it first."""
    pins = [(name, job, pin) for name in NAMES for job, pin in wf.uv_pins(wf.load(name))]
    assert pins, "no uv install found"
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", pin or "") for _, _, pin in pins), pins
    assert len({pin for _, _, pin in pins}) == 1, pins
    for name in NAMES:
        doc = wf.load(name)
        for job, spec in wf.jobs(doc).items():
            steps = spec["steps"]
            users = [i for i, st in enumerate(steps) if wf.uses_uv(st)]
            installs = [i for i, st in enumerate(steps) if wf.installs_uv(st)]
            if users:
                assert installs and installs[0] < users[0], f"{name}/{job} runs uv before installing the pinned one"
            for i in installs:
                # root (a sudo shell or sudo, whose secure_path has /usr/local/bin) runs the same uv
                run = steps[i]["run"]
                assert "/usr/local/bin/uv" in run and '"$(sudo uv --version | cut -d\' \' -f2)" = "$UV_VERSION"' in run


def test_uv_pins_are_read():
    doc = {"env": {"V": "1.2.3"}, "jobs": {"a": {"steps": [
        {"run": 'pipx install "uv==$V"'}, {"run": "pip install -q uv rust-just"},
        {"uses": "astral-sh/setup-uv@" + "0" * 40, "with": {"version": "${{ env.V }}"}},
        {"run": "pipx install uvicorn"}]}}}
    assert wf.uv_pins(doc) == [("a", "1.2.3"), ("a", None), ("a", "1.2.3")]


@pytest.mark.parametrize("name", NAMES)
def test_apt_get_update_before_every_install(name):
    """Issue 27, 3: in every job, an `apt-get install` (or a project script that may install without updating,
    e.g. scripts/test.sh installing chromium) comes after an `apt-get update` in the same job."""
    unupdated = wf.apt_installers_without_update()
    doc = wf.load(name)
    for job, spec in wf.jobs(doc).items():
        updated = False
        for st in spec["steps"]:
            run = st.get("run", "")
            for m in re.finditer(r"\bapt(?:-get)?\s+(?:\S+\s+)*?(update|install)\b", run):
                if m[1] == "update":
                    updated = True
                assert updated, f"{name}/{job}: {m[0]!r} before any apt-get update"
            for script in unupdated:
                if script in run:
                    assert updated, f"{name}/{job}: {script} may apt-get install, and no apt-get update ran before it"


def test_apt_installers_are_found(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "a.sh").write_text("apt-get update -qq\napt-get install -y x\n")
    (tmp_path / "scripts" / "b.sh").write_text("apt-get install -y chromium\n")
    (tmp_path / "scripts" / "c.sh").write_text("echo no apt here\n")
    monkeypatch.setattr(wf, "ROOT", tmp_path)
    assert wf.apt_installers_without_update() == {"scripts/b.sh"}


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
