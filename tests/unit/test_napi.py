"""lab/link/napi.py's pure logic: the router's read-back, the host step's script and who may run it."""

from __future__ import annotations

import subprocess

import pytest

from lab import config
from lab.errors import EnvironmentProblem, UsageError
from lab.link import napi


def test_read_back_modes(monkeypatch):
    monkeypatch.setenv(config.ENV_LINKEM_NAPI, "off")
    assert napi.parse_state("0x1011\n0x1011\n1\n1\n").mode == napi.THREADED
    s = napi.parse_state("0x1011 0x1011 0 0")
    assert s.attached and s.mode == napi.IN_WRITE and "QUICLAB_LINKEM_NAPI=off" in s.line()
    # without IFF_NAPI (0x0010) a `threaded` of 1 forwards nothing in a thread: still in linkem's writes
    s = napi.parse_state("0x1001 0x1001 1 1")
    assert not s.attached and s.mode == napi.IN_WRITE
    s = napi.parse_state("0x1011 0x1011 1 0")
    assert s.mode == napi.IN_WRITE and "tun-down threaded, tun-up not threaded" in s.line()


@pytest.mark.parametrize("text", ["", "0x1011 0x1011 1", "zz 0x1011 0 0"])
def test_unreadable_read_back_is_the_labs_problem(text):
    with pytest.raises(EnvironmentProblem):
        napi.parse_state(text)


def run_host_script(tmp_path, on: bool, mount: str,
                    umount: str = "") -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """napi.host_script(on) run by a real shell with `mount` (and `umount`) stubbed by these shell bodies; returns
    the run and the stubbed mount's arguments, one call per line."""
    (tmp_path / "bin").mkdir()
    log = tmp_path / "mounts.log"
    for name, body in (("mount", f'echo "$@" >> {log}\n{mount}'), ("umount", umount)):
        if body:
            stub = tmp_path / "bin" / name
            stub.write_text(f"#!/bin/sh\n{body}\n")
            stub.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    r = subprocess.run(["sh", "-c", napi.host_script(on)], env=env, capture_output=True, text=True)
    return r, log.read_text().splitlines()


@pytest.mark.parametrize("on", [True, False])
def test_host_script_writes_each_tun_and_leaves_sysfs_read_only(tmp_path, on):
    """It writes every TUN's file with the value asked and remounts read-only on the way out."""
    written = tmp_path / "written"
    r, calls = run_host_script(
        tmp_path, on,
        mount='if [ "$1" = -t ]; then for t in tun-down tun-up; do mkdir -p "$4/class/net/$t"; done; fi',
        umount=f'for t in tun-down tun-up; do cat "$1/class/net/$t/threaded" >> {written}; done; rm -rf "$1/class"')
    assert r.returncode == 0, r.stderr
    assert written.read_text().split() == ["1" if on else "0"] * 2
    assert calls[0].startswith("-t sysfs sysfs ") and calls[1].startswith("-o remount,rw ")
    assert calls[-1].startswith("-o remount,ro ")


def test_host_script_restores_read_only_when_a_write_fails(tmp_path):
    r, calls = run_host_script(tmp_path, True, mount="")  # no class/net/...: the first write fails
    assert r.returncode != 0
    assert calls[-1].startswith("-o remount,ro ")


def test_setting_on_without_root_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setenv(config.ENV_LINKEM_NAPI, "on")
    monkeypatch.setattr(napi.os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError, match=r"QUICLAB_LINKEM_NAPI=on: .* needs root"):
        napi.check_setting()
    monkeypatch.setenv(config.ENV_LINKEM_NAPI, "off")
    napi.check_setting()  # off needs nothing


def test_a_change_needs_root(monkeypatch):
    monkeypatch.setattr(napi.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(napi, "state", lambda: napi.State(attached=True, threaded=(False, False)))
    with pytest.raises(UsageError, match="host step and it needs root"):
        napi.set_threaded(True)
    monkeypatch.setenv(config.ENV_LINKEM_NAPI, "off")
    assert napi.apply_setting().mode == napi.IN_WRITE  # already as the setting says: nothing to change
    monkeypatch.setenv(config.ENV_LINKEM_NAPI, "on")
    with pytest.raises(UsageError, match="run `quiclab up` as root"):
        napi.apply_setting()


def test_auto_is_threaded_where_the_host_step_can_be_made(monkeypatch):
    """Issue 24 point 5: the faster forwarding by default where quiclab runs as root (as the set-up does)."""
    monkeypatch.delenv(config.ENV_LINKEM_NAPI, raising=False)
    monkeypatch.setattr(config, "_lookup", lambda name: None)  # no .env value either: the default
    monkeypatch.setattr(napi, "host_step_problem", lambda: None)
    assert config.linkem_napi() is None and napi.wanted() is True
    assert napi.setting_said() == "QUICLAB_LINKEM_NAPI=auto: root here"
    monkeypatch.setattr(napi, "host_step_problem", lambda: "it needs root on the host (nsenter ...)")
    assert napi.wanted() is False
    assert napi.setting_said() == "QUICLAB_LINKEM_NAPI=auto: off, it needs root on the host (nsenter ...)"
    napi.check_setting()  # auto never refuses: it falls back to in-write
    for value, want in (("on", True), ("off", False), ("auto", False), ("1", True), ("no", False)):
        monkeypatch.setattr(config, "_lookup", lambda name, v=value: (v, "environment"))
        assert napi.wanted() is want, value
