"""Issue 'sweeps': real sweeps through the real router: artifacts, Ctrl-C + resume, a forced failure."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import agent, config, docker, lab
from lab.link import linkem
from lab.link.model import Link
from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.results import store

from .conftest import quiclab_popen

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
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True,
                          timeout=config.deadline(timeout))


def wait_for_rows(out: Path, rows: int, timeout_s: float = 120) -> Path:
    """The runs.csv of the one sweep writing into `out`, once it holds more than `rows` lines."""
    deadline = time.monotonic() + config.deadline(timeout_s)
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
    assert len(runs) == manifest["planned_runs"] == 30
    # Every run ok, except that nginx 1.26's HTTP/3 sometimes stalls under loss until curl gives up (exit 56
    # "QUIC connection has been shut down" after its 60 s idle timeout: docs/seeds.md, the censored runs of
    # connectify-loss, yu, jitter-reorder). That is the endpoints' own failure, recorded as measured and censored:
    # at most one of the five HTTP/3 runs at 1 % loss, and nothing else.
    bad = [(r.run_key, r.status, r.failure) for r in runs if r.status != "ok"]
    stalls = [b for b in bad if b[0].startswith("1/h3/curl/nginx/") and b[1] in ("failed", "timeout")
              and b[2].startswith("client exit code")]
    assert bad == stalls and len(stalls) <= 1, bad
    assert manifest["status"] == "complete" and manifest["git"]["commit"]
    assert {"nginx", "curl", "openssl (client)", "kernel", "linkem"} <= set(manifest["versions"])
    assert manifest["self_check"]["rtt"]["measured_median_ms"] > 19
    assert linkem.current() == Link(), "a finished sweep leaves the link unimpaired"
    # the per-method table (the claims table above it has rows per point and method too)
    summary = (folder / "summary.md").read_text().split("## Transfer time and goodput per method", 1)[1]
    summary = summary.split("\n## ", 1)[0]
    for label in ("loss=0%", "loss=1%"):
        for method in ("HTTP/1.1", "HTTP/2", "HTTP/3"):
            assert sum(1 for ln in summary.splitlines() if ln.startswith(f"| {label} | {method}")) == 1
    r0 = next(r for r in runs if r.status == "ok")
    assert r0.wire_down_bytes and r0.wire_down_bytes > r0.size_bytes and r0.cc_server
    overheads = sorted(r.overhead_s for r in runs if r.overhead_s is not None)
    assert overheads[len(overheads) // 2] < 0.5, f"median per-run lab overhead {overheads[len(overheads) // 2]:.3f} s"


@pytest.mark.netem
def test_quick_sweep_under_netem_end_to_end(lab_up, tmp_path):
    """The quick preset (1 repeat: in the TCG VM a 12-run sweep with its report took over 9 min) with netem forced,
    on a kernel that has it (the VM of scripts/test.sh): every run ok and shaped by netem, netem's counters in every
    row (random-loss drops only where there is loss), the report and its plots written."""
    from lab.link import router
    if not router.has_netem():
        pytest.skip("this kernel has no sch_netem: the netem variant runs in a VM with a stock kernel "
                    "(scripts/vm.sh; bash scripts/test.sh runs it there)")
    r = quiclab("sweep", "quick", "--shaper", "netem", "--repeats", "1", "--out", str(tmp_path), timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    folder = only_folder(tmp_path)
    for name in ("runs.csv", "manifest.json", "summary.md", "report.html", "plots/goodput.png"):
        assert (folder / name).stat().st_size > 0, name
    runs = store.load_runs(folder)
    assert len(runs) == 6 and all(r.status == "ok" for r in runs), [(r.run_key, r.failure) for r in runs]
    assert {r.shaper for r in runs} == {"netem"}
    for run in runs:
        assert run.link_down_sent_pkts and run.link_up_sent_pkts and run.link_down_loss_drops is not None, run
        if run.loss_pct == 0:
            assert run.link_down_loss_drops == 0 and run.link_up_loss_drops == 0, run
    lossy = [run for run in runs if run.loss_pct]
    drops = sum(run.link_down_loss_drops or 0 for run in lossy)
    sent = sum(run.link_down_sent_pkts or 0 for run in lossy)
    assert 0.003 < drops / sent < 0.03, f"{drops} of {sent} packets toward the client dropped at 1 % loss"


def _planned(folder: Path) -> set[str]:
    return {p.key for p in plan(validate(json.loads((folder / "manifest.json").read_text())["scenario"], "m"))}


def _no_client_left() -> None:
    agent.close_all()  # this process's own client agent may keep a curl started for its next fetch: not counted
    leftover = docker.client().container.execute(config.CLIENT_CONTAINER, ["sh", "-c", "pgrep -c curl || true"])
    assert leftover.strip() == "0", "a transfer was left running after Ctrl-C"


def test_ten_interrupts_and_resumes_end_with_exactly_the_planned_runs(lab_up, tmp_path):
    """Ctrl-C at 10 random moments of a real quick sweep (start-up, transfers, recording), resuming after each: the
    folder ends with every planned run exactly once, all ok, and no run that an interrupt cut short."""
    out = tmp_path / "out"
    moments = random.Random(11).sample([x / 10 for x in range(5, 60)], 10)
    proc = quiclab_popen("sweep", "quick", "--out", str(out))
    folder: Path | None = None
    for i, moment in enumerate(moments):
        time.sleep(moment)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        found = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        folder = folder or (found[0] if found else None)
        if proc.returncode == 0:
            break
        last = err.strip().splitlines()[-1] if err.strip() else ""
        assert proc.returncode == 130 and "interrupted" in last and "Traceback" not in err, f"interrupt {i}: {err}"
        if folder is None:  # interrupted before the sweep had a folder: start it again
            proc = quiclab_popen("sweep", "quick", "--out", str(out))
            continue
        if "--resume" in last:  # the sweep itself was interrupted (not the CLI's start-up): the folder says so
            assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"
        assert all(r.status == "ok" for r in store.load_runs(folder)), f"interrupt {i}: a non-ok run was recorded"
        _no_client_left()
        proc = quiclab_popen("sweep", "--resume", str(folder))
    else:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert folder is not None
    final = store.load_runs(folder)
    keys = [x.run_key for x in final]
    assert len(keys) == len(set(keys)), "duplicated runs after resume"
    assert set(keys) == _planned(folder) and all(x.status == "ok" for x in final)
    assert json.loads((folder / "manifest.json").read_text())["status"] == "complete"


def test_a_router_stopped_mid_sweep_stops_the_sweep_and_resume_completes_it(lab_up, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SMALL.format(name="router-stop", repeats=2, timeout=20))
    out = tmp_path / "out"
    proc = quiclab_popen("sweep", "--scenario", str(scenario), "--out", str(out))
    try:
        runs_csv = wait_for_rows(out, 3)
        docker.client().container.stop(config.ROUTER_CONTAINER, time=1)
        _, err = proc.communicate(timeout=300)
    finally:
        docker.client().container.start(config.ROUTER_CONTAINER)
        lab.wait_ready()
    folder = runs_csv.parent
    assert proc.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert "the lab failed" in last and "--resume" in last and config.ROUTER_CONTAINER in last, last
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stopped_by"]
    partial = store.load_runs(folder)
    assert partial and all(r.status == "ok" for r in partial), "the lab's failure was recorded as a run"

    r = quiclab("sweep", "--resume", str(folder))
    assert r.returncode == 0, r.stderr
    final = store.load_runs(folder)
    assert sorted(x.run_key for x in final) == sorted(_planned(folder))
    assert all(x.status == "ok" for x in final)


def test_transfers_that_time_out_are_recorded_as_results(lab_up, tmp_path):
    """A transport's own failure is a result: a 200 kB object over 50 Mbit/s at 30 % loss with a 2 s timeout times
    out in some runs; those are recorded (status timeout, censored at 2 s in the statistics), not dropped."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(SMALL.format(name="timeouts", repeats=3, timeout=2).replace('"1%"', '"30%"'))
    r = quiclab("sweep", "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    folder = only_folder(tmp_path / "out")
    runs = store.load_runs(folder)
    assert len(runs) == 2 * 3 * 3
    timed_out = [x for x in runs if x.status == "timeout"]
    assert timed_out and all(x.failure and x.timeout_s == 2 and x.point_label == "loss=30%" for x in timed_out)
    assert "Excluded runs" in (folder / "summary.md").read_text() or "censored" in (folder / "summary.md").read_text()
