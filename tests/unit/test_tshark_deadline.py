"""tshark's deadline over a capture grows with the capture (lab/evidence/tshark.py deadline_s): a large QUIC capture
decrypts slowly, and an explanation cut off by a fixed 300 s left a censored run unexplained."""

from __future__ import annotations

from pathlib import Path

from lab.evidence import tshark


def test_a_small_capture_gets_the_floor_and_a_large_one_more(tmp_path: Path):
    small, large = tmp_path / "small.pcap", tmp_path / "large.pcap"
    small.write_bytes(b"\0" * 1000)
    with large.open("wb") as f:
        f.truncate(49_000_000)  # sparse: the size is what counts
    assert tshark.deadline_s(small) == tshark.TIMEOUT_S
    assert tshark.deadline_s(large) == tshark.SECONDS_PER_MB * 49 > tshark.TIMEOUT_S
    assert tshark.deadline_s(tmp_path / "missing.pcap") == tshark.TIMEOUT_S
