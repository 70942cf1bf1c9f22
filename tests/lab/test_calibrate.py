"""Issue 35 on the real lab: a user's capture of an iperf3 download (the calibration benchmark's, lab/bench) is joined
to that download's file by probe, and its packets make the rate trace at the millisecond: on a link whose rate
steps 12 <-> 4 Mbit/s every second (a schedule linkem holds), BBR's captured arrivals show both rates, the queue
never stood empty long enough to hide the link (no unseen stretch), and the trace's mean is the delivery's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.calibrate import trace
from lab.calibrate.estimate import estimate
from lab.calibrate.probe import probe
from lab.calibrate.senders import Sender
from lab.link import shaper
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.run import calibration

pytestmark = pytest.mark.lab


def test_a_captured_download_joins_its_file_and_makes_a_millisecond_trace(clean_link: None, tmp_path: Path):
    link = parse_link({"rtt": "40ms"}, {"rate": "12mbit", "spikes": "2s:1s:33%", "queue": "60kB"}, {"rate": "12mbit"})
    shaper.apply(link, "linkem")
    try:
        doc = calibration.user_download(Sender("bbr", "down", 10), None, tmp_path / "bbr.pcap")
    finally:
        shaper.apply(Link(), "linkem")
    (tmp_path / "bbr.json").write_text(doc)
    m = probe([tmp_path / "bbr.json", tmp_path / "bbr.pcap"])
    [flow] = m.flows  # one download: the capture and the file joined (the same ports), not two
    assert flow.cc == "bbr" and flow.ports is not None and flow.ports[0] == calibration.PORT
    assert flow.arrivals and flow.unseen == []
    delivered = sum(b for _, b in flow.arrivals)
    assert delivered >= json.loads(doc)["end"]["sum_received"]["bytes"]  # IP bytes: payload plus headers
    # per quarter second after the start-up: both steps, at the link's rates (the schedule's seconds are not the
    # download's: a quarter second straddles a step at most once in four)
    quarters = [sum(b for t, b in flow.arrivals if q / 4 <= t < (q + 1) / 4) * 8 * 4 / 1e6 for q in range(8, 36)]
    assert max(quarters) > 10.5 and min(quarters) < 5, quarters
    e = estimate(m, str(tmp_path), "trace")
    assert e.down_trace_ms == trace.from_capture(flow.arrivals)
    assert abs(trace.mean_rate(e.down_trace_ms) - delivered * 8 / flow.arrivals[-1][0]) < 0.05 * 8e6
