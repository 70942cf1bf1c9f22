"""`quic_window` on the real lab: gtlsclient's fixed flow-control window limits what its server has in flight, so
a download over a long round trip takes at least (size / window) round trips, while the same download without the
cap grows its window and is much faster; the TCP run beside it is not affected (lab/endpoints/quic_window.py)."""

from __future__ import annotations

from pathlib import Path

from tests.lab.scenario_sweep import sweep_records

SCENARIO = """
name = "window-check"
protocols = ["h1", "h3"]
clients = ["curl", "gtlsclient"]
servers = ["nginx", "ngtcp2"]
pairs = ["curl>nginx", "gtlsclient>ngtcp2"]
sizes = ["1MB"]
repeats = 1
[link]
rate = "100mbit"
rtt = "100ms"
[sweep]
quic_window = ["off", "50kB"]
"""


def test_a_fixed_window_caps_quic_per_round_trip_and_leaves_tcp_alone(lab_up, tmp_path: Path):
    records = sweep_records(tmp_path, "window", SCENARIO)
    ran = {(r.point_label, r.protocol): r for r in records if r.status != "unsupported"}
    assert {r.status for r in ran.values()} == {"ok"}, ran
    capped, free = ran[("quic_window=50kB", "h3")], ran[("quic_window=off", "h3")]
    assert capped.handshake_s and free.handshake_s  # the wrapper's inotify times are there for both
    # 1 MB through a 50 kB window: 20 windows, each at least one 100 ms round trip after the handshake
    assert capped.total_s - capped.handshake_s >= 0.9 * 20 * 0.1, capped
    assert free.total_s < capped.total_s / 2, (free.total_s, capped.total_s)
    tcp_capped, tcp_free = ran[("quic_window=50kB", "h1")], ran[("quic_window=off", "h1")]
    assert tcp_capped.total_s < capped.total_s / 2 and tcp_free.total_s < capped.total_s / 2
