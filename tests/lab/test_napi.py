"""Threaded NAPI on the router's TUN devices (QUICLAB_LINKEM_NAPI, lab/link/napi.py), on the real lab: `quiclab up`
and a sweep put the setting in force from the host and read it back through the router; real transfers pass
through it and the sweep's manifest says which forwarding measured them; the router keeps NET_ADMIN only and a
read-only /sys; and the lab is left as the setting says by default (off)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import config, docker
from lab.link import napi
from lab.report.report import load_sweep

pytestmark = pytest.mark.lab

SWEEP = """
name = "napi"
sizes = ["1MB"]
protocols = ["h1", "h3"]
repeats = 1
[link]
rtt = "20ms"
rate = "100mbit"
"""


def cli(napi_setting: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, config.ENV_LINKEM_NAPI: napi_setting}
    return subprocess.run([sys.executable, "-m", "lab", *args], env=env, capture_output=True, text=True,
                          timeout=1200)


def threaded() -> list[str]:
    return docker.exec_in(config.ROUTER_CONTAINER, ["cat", *(f"/sys/class/net/{t}/threaded"
                                                              for t in napi.TUNS)]).split()


@pytest.fixture
def host_step(lab_up: None) -> Iterator[None]:
    problem = napi.host_step_problem()
    if problem:
        pytest.skip(f"threaded NAPI is put in force by a host step, and {problem}")
    try:
        yield
    finally:
        r = cli("off", "up")
        assert r.returncode == 0, r.stderr[-2000:]
        assert threaded() == ["0", "0"], "the lab is left with the default forwarding"


def sweep(napi_setting: str, scenario: Path, out: Path) -> dict[str, object]:
    r = cli(napi_setting, "sweep", "--scenario", str(scenario), "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    records, manifest = load_sweep(next(out.iterdir()))
    assert sorted(rec.protocol for rec in records) == ["h1", "h3"], records
    assert all(rec.status == "ok" for rec in records), [(rec.protocol, rec.failure) for rec in records]
    return manifest


def test_threaded_napi_is_put_in_force_from_the_host_and_the_router_stays_unprivileged(host_step, tmp_path: Path):
    r = cli("on", "up")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "forwarding: threaded NAPI on tun-down, tun-up" in r.stdout + r.stderr
    assert threaded() == ["1", "1"]
    assert napi.state().mode == napi.THREADED
    shown = cli("on", "shape", "--show")
    assert "forwarding: threaded NAPI" in shown.stdout + shown.stderr

    spec = json.loads(subprocess.run(["docker", "inspect", config.ROUTER_CONTAINER], capture_output=True, text=True,
                                     check=True).stdout)[0]
    assert spec["HostConfig"]["CapAdd"] == ["NET_ADMIN"] and not spec["HostConfig"]["Privileged"]
    with pytest.raises(docker.DockerError, match="Read-only file system"):
        docker.exec_in(config.ROUTER_CONTAINER, ["sh", "-c", "echo 0 > /sys/class/net/tun-down/threaded"])

    # something left it otherwise (a router restart has new TUNs): the sweep puts the setting back in force,
    # measures through it and records it
    napi.set_threaded(False)
    scenario = tmp_path / "napi.toml"
    scenario.write_text(SWEEP)
    manifest = sweep("on", scenario, tmp_path / "on")
    assert manifest["link_forwarding"] == napi.THREADED and manifest["shaper"] == "linkem"
    assert threaded() == ["1", "1"]

    # and with the setting off, back to the forwarding in linkem's writes
    manifest = sweep("off", scenario, tmp_path / "off")
    assert manifest["link_forwarding"] == napi.IN_WRITE
    assert threaded() == ["0", "0"]
    shown = cli("off", "shape", "--show")
    assert "forwarding: in linkem's writes" in shown.stdout + shown.stderr
