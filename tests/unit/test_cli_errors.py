"""Bad input: exit 2 and one line naming the value, no traceback (these never need the lab)."""

import subprocess
import sys

import pytest


def quiclab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "--protocol", "h4"], "'h4'"),
    (["run", "--size", "-5"], "'-5'"),
    (["run", "--size", "12XB"], "'12XB'"),
    (["run", "--client", "wget"], "'wget'"),
    (["run", "--server", "apache"], "'apache'"),
    (["run", "--timeout", "0"], "--timeout"),
    (["run", "--bogus"], "--bogus"),
    (["bench", "link", "--rounds", "0"], "--rounds 0"),
    (["bench", "disk"], "'disk'"),
    (["sweep", "quick", "--workload", "page:0x1kB"], "'page:0x1kB'"),
    (["sweep", "quick", "--workload", "bulk,pgae:1x1kB"], "'pgae:1x1kB'"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    r = quiclab(*args)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert needle in lines[0]
    assert "Traceback" not in r.stderr
