"""scripts/vm.sh's bad inputs that need no QEMU run (issue 34): each exits non-zero with one line saying what
happened. The host's tools are replaced where the case needs it (PATH with stand-ins: no QEMU and no way to install
it, a disk with too little space); the paths that boot a guest are checked by running it (scripts/test.sh runs the
netem group in it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VM = ROOT / "scripts" / "vm.sh"
#: What vm.sh itself calls before it gets to QEMU (bash builtins aside).
TOOLS = ("bash", "dirname", "cat", "mkdir", "awk", "date", "sha256sum", "cut", "grep", "head", "seq", "sleep")


def stub_path(tmp_path: Path, fakes: dict[str, str]) -> str:
    """A PATH of the real TOOLS and the given stand-ins (name -> shell script body) and nothing else."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in TOOLS:
        real = shutil.which(tool)
        assert real, tool
        (bin_ / tool).symlink_to(real)
    for name, body in fakes.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    return str(bin_)


def vm(*args: str, env: dict[str, str] | None = None, path: str | None = None,
       tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUICLAB_VM_")}
    full |= {"QUICLAB_VM_CACHE": str((tmp or Path("/nonexistent")) / "cache")} | (env or {})
    if path is not None:
        full["PATH"] = path
    return subprocess.run(["/bin/bash", str(VM), *args], capture_output=True, text=True, env=full, timeout=60,
                          stdin=subprocess.DEVNULL)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "env", "needle"), [
    ((), {}, "usage: scripts/vm.sh check | build | run"),
    (("run", "ls"), {}, "usage:"),  # the command must follow --
    (("run", "--"), {}, "usage:"),
    (("check", "extra"), {}, "usage:"),
    (("check",), {"QUICLAB_VM_SMP": "0"}, "QUICLAB_VM_SMP=0: a positive number of vCPUs"),
    (("check",), {"QUICLAB_VM_MEM": "512"}, "QUICLAB_VM_MEM=512: MiB, at least 1024"),
    (("check",), {"QUICLAB_VM_ACCEL": "hvf"}, "QUICLAB_VM_ACCEL=hvf: allowed are auto, kvm, tcg"),
    (("check",), {"QUICLAB_VM_TIMEOUT": "1h"}, "QUICLAB_VM_TIMEOUT=1h"),
    (("check",), {"QUICLAB_VM_CPUS": "a"}, "QUICLAB_VM_CPUS=a"),
    (("check",), {"QUICLAB_VM_SLOW": "0"}, "QUICLAB_VM_SLOW=0: a whole number from 1 to 100"),
    (("check",), {"QUICLAB_VM_SLOW": "2.5"}, "QUICLAB_VM_SLOW=2.5"),
    (("run", "--", "true"), {"QUICLAB_VM_SLOW": "101"}, "QUICLAB_VM_SLOW=101"),
])
def test_a_bad_setting_or_usage_is_one_line_exit_2(tmp_path, args, env, needle):
    done = vm(*args, env=env, tmp=tmp_path)
    assert done.returncode == 2 and needle in one_line(done)
    assert not (tmp_path / "cache").exists()  # refused before anything is made


def test_no_qemu_and_no_way_to_install_it(tmp_path):
    path = stub_path(tmp_path, {"id": "echo 1000"})  # not root: apt-get cannot be used
    done = vm("check", path=path, tmp=tmp_path)
    assert done.returncode == 2
    assert one_line(done).endswith(
        "no QEMU here (missing: qemu-system-x86 qemu-utils debootstrap) and no way to install it (needs root and "
        "apt-get)")


def test_not_enough_disk(tmp_path):
    """QEMU's tools present (stand-ins), 3 GB free where the VM's cache is: run needs 4."""
    path = stub_path(tmp_path, {
        "qemu-system-x86_64": "exit 0", "qemu-img": "exit 0", "debootstrap": "exit 0",
        "df": 'printf "Filesystem 1024-blocks Used Available Capacity Mounted\\n/dev/x 9999999 1 3200000 1%% /\\n"'})
    done = vm("run", "--", "true", path=path, tmp=tmp_path)
    assert done.returncode == 2
    assert one_line(done) == f"error: not enough disk for the VM: 3 GB free under {tmp_path / 'cache'}, 4 GB needed"


def test_the_private_dockerd_cannot_touch_the_hosts_bridge():
    """vm.sh loads the guest's images with a private dockerd run with --bridge=none, and dockerd then deletes any
    interface named docker0 it can see (moby's removeDefaultBridgeInterface): on 2026-11-27 that was the host
    Docker's own bridge, and every later `docker run` on the default network failed. Each dockerd vm.sh starts runs
    in a network namespace of its own. (Checked on the host that day: docker0 kept its ifindex across a rebuild of
    the guest's Docker data root.)"""
    starts = [ln for ln in VM.read_text().splitlines()
              if re.search(r"(^|\s)dockerd --", ln) and not ln.lstrip().startswith("#")]
    assert starts, "vm.sh starts no private dockerd any more: update this test"
    assert all("unshare --net -- dockerd " in ln for ln in starts), starts
