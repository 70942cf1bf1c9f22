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


def test_tshark_reads_every_servers_quic_port_as_quic(tmp_path: Path, monkeypatch):
    # tshark finds QUIC by a heuristic tried after the UDP port table: a client port registered to another protocol
    # (34980, EtherCAT's) hid a resumed connection from the session check (CI 2026-11-27)
    calls: list[list[str]] = []
    monkeypatch.setattr(tshark.docker, "copy_to", lambda *a, **k: None)
    monkeypatch.setattr(tshark.docker, "exec_in", lambda c, argv, **k: calls.append(list(argv)) or "")
    pcap = tmp_path / "c.pcap"
    pcap.write_bytes(b"\0")
    tshark.run(pcap, None, ["-T", "fields"])
    argv = calls[0]
    decoded = {argv[i + 1] for i, a in enumerate(argv) if a == "-d"}
    assert {"udp.port==443,quic", "udp.port==4433,quic", "udp.port==4441,quic"} <= decoded
    assert argv.index("-d") < argv.index("-T")
