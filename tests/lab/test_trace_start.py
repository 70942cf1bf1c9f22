"""A recorded trace meets every protocol at the same moment: linkem restarts a trace whenever it is given a link,
and the runner gives a trace link again right before the transfer (lab/run/runner.py _restart_trace), after the
probes' set-up, which takes longer for TCP (the sender's socket watch) than for HTTP/3. Without that, TCP's first
packet left ~0.85 s into the trace and HTTP/3's ~0.2 s: different parts of the recording."""

from __future__ import annotations

from pathlib import Path

from lab.evidence import delivered
from tests.lab.scenario_sweep import sweep_records

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
    records = sweep_records(tmp_path, "trace", SCENARIO)
    assert {r.status for r in records} == {"ok"}
    starts = {}
    for r in records:
        d = delivered.parse(r.delivered)
        assert d is not None and d.start_s is not None, r.run_key
        starts.setdefault(r.protocol, []).append(d.start_s)
    # the client's first packet leaves within a few hundred ms of the trace's start, whatever the protocol
    assert all(0 <= s < 0.4 for ss in starts.values() for s in ss), starts
    assert abs(min(starts["h1"]) - min(starts["h3"])) < 0.25, starts
