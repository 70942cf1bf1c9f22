"""Issue 'sweeps': real sweeps through the real router: artifacts, Ctrl-C + resume, a forced failure."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import config, docker
from lab.link import linkem
from lab.link.model import Link
from lab.sweep import store
from lab.sweep.plan import plan
from lab.sweep.scenario import validate

pytestmark = pytest.mark.lab

SMALL = """
name = "{name}"
sizes = ["200kB"]
repeats = {repeats}
timeout = {timeout}
[link]
rtt = "10ms"
rate = "50mbit"
[sweep]
loss = ["0%", "1%"]
"""


def quiclab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=timeout)


def wait_for_rows(out: Path, rows: int, timeout_s: float = 120) -> Path:
    """The runs.csv of the one sweep writing into `out`, once it holds more than `rows` lines."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = list(out.glob("*/runs.csv")) if out.exists() else []
        if found and len(found[0].read_text().splitlines()) > rows:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("the sweep never got going")


def only_folder(out: Path) -> Path:
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def test_quick_preset_produces_every_artifact(lab_up, tmp_path):
    r = quiclab("sweep", "quick", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    folder = only_folder(tmp_path)
    for name in ("runs.csv", "manifest.json", "summary.md", "report.html", "plots/goodput.png", "plots/goodput.svg",
                 "plots/time.png", "plots/time.svg"):
        assert (folder / name).stat().st_size > 0, name
    runs = store.load_runs(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert len(runs) == manifest["planned_runs"] == 18 and all(r.status == "ok" for r in runs)
    assert manifest["status"] == "complete" and manifest["git"]["commit"]
    assert {"nginx", "curl", "openssl (client)", "kernel", "linkem"} <= set(manifest["versions"])
    assert manifest["self_check"]["rtt"]["measured_median_ms"] > 19
    assert linkem.current() == Link(), "a finished sweep leaves the link unimpaired"
    summary = (folder / "summary.md").read_text()
    for label in ("loss=0%", "loss=1%"):
        for method in ("HTTP/1.1", "HTTP/2", "HTTP/3"):
            assert sum(1 for ln in summary.splitlines() if ln.startswith(f"| {label} | {method}")) == 1
    r0 = runs[0]
    assert r0.wire_down_bytes and r0.wire_down_bytes > r0.size_bytes and r0.cc_server
    overheads = sorted(r.overhead_s for r in runs if r.overhead_s is not None)
    assert overheads[len(overheads) // 2] < 0.5, f"median per-run lab overhead {overheads[len(overheads) // 2]:.3f} s"


def test_interrupted_sweep_resumes_without_loss_or_duplicates(lab_up, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SMALL.format(name="resume", repeats=4, timeout=30))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs_csv = wait_for_rows(out, 6)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "--resume" in err, err
    folder = runs_csv.parent
    assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"
    partial = store.load_runs(folder)
    assert any(r.status == "interrupted" for r in partial)
    leftover = docker.client().container.execute(config.CLIENT_CONTAINER, ["sh", "-c", "pgrep -c curl || true"])
    assert leftover.strip() == "0", "a transfer was left running after Ctrl-C"

    r = quiclab("sweep", "--resume", str(folder))
    assert r.returncode == 0, r.stderr
    final = store.load_runs(folder)
    planned = {p.key for p in plan(validate(json.loads((folder / "manifest.json").read_text())["scenario"], "m"))}
    keys = [x.run_key for x in final]
    assert len(keys) == len(set(keys)), "duplicated runs after resume"
    assert set(keys) == planned and all(x.status == "ok" for x in final)
    kept_before = {x.run_key: x.started_at for x in partial if x.status != "interrupted"}
    assert all(x.started_at == kept_before[x.run_key] for x in final if x.run_key in kept_before)


def test_runs_failing_mid_sweep_are_recorded_and_excluded(lab_up, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SMALL.format(name="failing", repeats=6, timeout=3))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_rows(out, 4)
        docker.client().container.pause(config.SERVER_CONTAINER)  # the server stops answering mid-sweep
        time.sleep(8)
    finally:
        docker.client().container.unpause(config.SERVER_CONTAINER)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    folder = only_folder(out)
    runs = store.load_runs(folder)
    failed = [r for r in runs if r.status != "ok"]
    assert failed and all(r.failure for r in failed), "no failure recorded while the server was paused"
    assert len(runs) == 2 * 3 * 6
    summary = (folder / "summary.md").read_text()
    assert "Excluded runs" in summary and failed[0].status in summary
