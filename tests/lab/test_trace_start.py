"""A recorded trace meets every protocol at the same moment: linkem restarts a trace whenever it is given a link,
and the runner gives a trace link again right before the transfer (lab/run/runner.py _restart_trace), after the
probes' set-up, which takes longer for TCP (the sender's socket watch) than for HTTP/3. Without that, TCP's first
packet left ~0.85 s into the trace and HTTP/3's ~0.2 s: different parts of the recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.evidence import delivered
from lab.results.schema import read_runs

SCENARIO = """
name = "trace-start"
protocols = ["h1", "h3"]
sizes = ["1MB"]
repeats = 2
capture = ["pcap"]
[link]
rtt = "40ms"
traces = "TMobile-LTE-short"
"""


def test_every_protocol_starts_at_the_beginning_of_the_trace(lab_up, tmp_path: Path):
    scenario = tmp_path / "trace.toml"
    scenario.write_text(SCENARIO)
    done = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    records = read_runs(folder / "runs.csv").records
    assert {r.status for r in records} == {"ok"}
    starts = {}
    for r in records:
        d = delivered.parse(r.delivered)
        assert d is not None and d.start_s is not None, r.run_key
        starts.setdefault(r.protocol, []).append(d.start_s)
    # the client's first packet leaves within a few hundred ms of the trace's start, whatever the protocol
    assert all(0 <= s < 0.4 for ss in starts.values() for s in ss), starts
    assert abs(min(starts["h1"]) - min(starts["h3"])) < 0.25, starts
