"""A benchmark's sweep as the user runs it: `quiclab sweep PRESET ... --out OUT` in a subprocess (live push off), and
the new folder it wrote; a failed sweep is one EnvironmentProblem naming it and its last line of output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lab.errors import EnvironmentProblem


def sweep(preset: str, options: list[str], out: Path, what: str) -> Path:
    """Run `quiclab sweep PRESET OPTIONS --out OUT`; its folder (`what` names the sweep in an error)."""
    before = set(out.glob(f"*-{preset}"))
    done = subprocess.run([sys.executable, "-m", "lab", "sweep", preset, *options, "--out", str(out)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                          env={**os.environ, "QUICLAB_PUSHGATEWAY_URL": "off"})
    new = sorted(set(out.glob(f"*-{preset}")) - before)
    if done.returncode != 0 or not new:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentProblem(f"{what} failed (exit {done.returncode}): {tail[0]}")
    return new[-1]
