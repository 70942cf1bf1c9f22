"""Synthetic measurement files for the calibration's tests, in the formats the tools write: ping's text, irtt's
and iperf3's JSON, flent's .flent.gz (captures: tests/pathsim.py)."""

from __future__ import annotations

import gzip
import json
import random


def ping_text(rtts_ms: list[float], stamps: bool = False) -> str:
    lines = ["PING 192.0.2.1 (192.0.2.1) 56(84) bytes of data."]
    for i, r in enumerate(rtts_ms, 1):
        at = f"[{1700000000 + i * 0.2:.6f}] " if stamps else ""
        lines.append(f"{at}64 bytes from 192.0.2.1: icmp_seq={i} ttl=57 time={r:.3f} ms")
    lines += ["", "--- 192.0.2.1 ping statistics ---", f"{len(rtts_ms)} packets transmitted, {len(rtts_ms)} received"]
    return "\n".join(lines) + "\n"


def uniform_rtts(base_ms: float, jitter_ms: float, n: int, seed: int = 1) -> list[float]:
    """RTTs of a path whose two directions each add U(-J, J) around base/2 + J (never below the base)."""
    rnd = random.Random(seed)
    return [base_ms + 2 * jitter_ms + rnd.uniform(-jitter_ms, jitter_ms) + rnd.uniform(-jitter_ms, jitter_ms)
            for _ in range(n)]


def irtt_json(rtts_ms: list[float], lost: int = 0) -> str:
    trips = [{"seqno": i, "lost": "false", "delay": {"rtt": round(r * 1e6)}} for i, r in enumerate(rtts_ms)]
    trips += [{"seqno": len(trips) + i, "lost": "true"} for i in range(lost)]
    return json.dumps({"version": {"irtt": "0.9.1"}, "round_trips": trips, "stats": {}})


def iperf3_json(cc: str, rates_mbit: list[float], rtts_ms: list[float] | None = None,
                retransmits: list[int] | None = None, reverse: bool = False,
                connected: tuple[int, int] | None = None) -> str:
    """One TCP run of 1-second intervals, as the sending side writes it (rtt and retransmits per interval);
    `connected`: its data connection's (local port, remote port) in `start.connected`, as iperf3 writes it."""
    intervals = []
    for i, r in enumerate(rates_mbit):
        stream: dict[str, object] = {"socket": 5, "start": i, "end": i + 1, "seconds": 1, "bytes": round(r * 1e6 / 8),
                                     "bits_per_second": r * 1e6, "sender": not reverse}
        total: dict[str, object] = {"start": i, "end": i + 1, "seconds": 1, "bytes": round(r * 1e6 / 8),
                                    "bits_per_second": r * 1e6, "sender": not reverse}
        if rtts_ms is not None:
            stream["rtt"] = round(rtts_ms[i] * 1000)
        if retransmits is not None:
            stream["retransmits"] = total["retransmits"] = retransmits[i]
        intervals.append({"streams": [stream], "sum": total})
    moved = sum(round(r * 1e6 / 8) for r in rates_mbit)
    return json.dumps({
        "start": {"version": "iperf 3.16", "test_start": {"protocol": "TCP", "num_streams": 1, "duration":
                                                           len(rates_mbit), "reverse": int(reverse)},
                  **({"connected": [{"socket": 5, "local_host": "10.1.0.2", "local_port": connected[0],
                                     "remote_host": "10.2.0.2", "remote_port": connected[1]}]} if connected else {})},
        "intervals": intervals,
        "end": {"sum_sent": {"bytes": moved, "retransmits": sum(retransmits or [])},
                "sum_received": {"bytes": moved}, "sender_tcp_congestion": cc, "receiver_tcp_congestion": cc}})


def iperf3_failed() -> str:
    return json.dumps({"start": {"connected": [], "version": "iperf 3.16", "test_start": {}}, "intervals": [],
                       "end": {}, "error": "unable to connect to server - server may have stopped running or use a "
                                           "different port, firewall issue, etc.: Connection refused"})


def flent_gz(test: str, idle_ms: float, loaded_ms: float, rate_mbit: float, step: float = 0.2, delay_s: float = 5,
             length_s: float = 20) -> bytes:
    """A flent data file: pings throughout, a TCP download from `delay_s` for `length_s`."""
    n = round((delay_s + length_s + delay_s) / step)
    x = [round(i * step, 6) for i in range(n)]
    loaded = [delay_s <= t < delay_s + length_s for t in x]
    results: dict[str, list[float | None]] = {
        "Ping (ms) ICMP": [loaded_ms if on else idle_ms for on in loaded]}
    if test == "rrul":
        for tag in ("BE", "BK", "CS5", "EF"):
            results[f"TCP download {tag}"] = [rate_mbit / 4 if on else None for on in loaded]
        results["TCP download sum"] = [rate_mbit if on else None for on in loaded]
    else:
        results["TCP download"] = [rate_mbit if on else None for on in loaded]
    data = {"version": 4, "x_values": x, "results": results,
            "metadata": {"NAME": test, "LENGTH": length_s, "STEP_SIZE": step,
                         "SERIES_META": {"TCP download": {"CONG_CONTROL": "cubic"}}}}
    return gzip.compress(json.dumps(data).encode())
