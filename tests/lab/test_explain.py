"""Issue 25's first slice on the real lab: a captured sweep (h2 with sender cc cubic and h3 with nginx, 2 MB, 10 Mbit/s,
40 ms RTT (netem: 160 ms), loss 0 and 3 %, fixed seed) explained run by run with `quiclab explain --json`: every run
has a record; 2 round trips before the request over TCP, 1 over QUIC; at 3 % loss bytes retransmitted for both; the
emulator's drops counted from the two captures equal its counters; the TCP CUBIC run shows window reductions (and its
kernel, read with ss as the connection closed, retransmitted the bytes the capture counted) and the nginx QUIC run's
record says whether its sender's flight fell."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import config
from lab.link import router
from lab.results.schema import read_runs

pytestmark = pytest.mark.lab

BUSY_WAIT_S = 1200.0
SCENARIO = """name = "{name}"
protocols = ["{protocol}"]
clients = ["curl"]
servers = ["nginx"]
{cc}
sizes = ["2MB"]
repeats = 1
seed = 7
timeout = 120
shaper = "{shaper}"
capture = ["pcap", "keylog"]
[link]
rtt = "{rtt}"
rate = "10mbit"
[sweep]
loss = {losses}
"""


def quiclab(*args: str) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:  # the lab is shared: another command holding it is waited for, not a failure of this test
        done = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True,
                              timeout=config.deadline(900))
        if "the lab is busy" not in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(10)


#: The netem variant runs in the TCG VM, where curl's and nginx's TLS computing takes ~40 ms a step: at 40 ms RTT
#: that is a pause of a round trip's length, which the handshake count (client waits >= 0.8 RTT) cannot tell from
#: one (the VM run of 2026-11-26 counted 3 and 4 where TCP+TLS needs 2). At 160 ms the computing stays under it.
RTT = {"linkem": "40ms", "netem": "160ms"}
#: Under netem (the TCG VM, where one sweep with its report and explanation takes minutes) only what depends on the
#: shaper runs: one HTTP/2 sweep at 3 % loss, its counters filled and equal to the drops counted from the captures.
#: The handshake counts, the QUIC run and `--versus` do not depend on the shaper and run with linkem.
LOSSES = {"linkem": '["0%", "3%"]', "netem": '["3%"]'}
PROTOCOLS = {"linkem": (("h2", 'cc = "cubic"', 2), ("h3", "", 1)), "netem": (("h2", 'cc = "cubic"', 2),)}


def captured_sweep(tmp_path: Path, protocol: str, cc: str, backend: str = "linkem") -> Path:
    name = f"explain-{protocol}"
    scenario = tmp_path / f"{name}.toml"
    scenario.write_text(SCENARIO.format(name=name, protocol=protocol, cc=cc, shaper=backend, rtt=RTT[backend],
                                        losses=LOSSES[backend]))
    out = tmp_path / name
    done = quiclab("sweep", "--scenario", str(scenario), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    return next(p for p in out.iterdir() if p.is_dir())


def explain(folder: Path) -> dict[str, dict]:
    done = quiclab("explain", str(folder), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return {e["run_key"]: e for e in json.loads(done.stdout)}


@pytest.mark.parametrize("backend", ["linkem", pytest.param("netem", marks=pytest.mark.netem)])
def test_a_captured_h2_and_h3_sweep_is_explained_run_by_run(lab_up, tmp_path, backend):
    """With either shaper: under netem the emulator's counters are its qdiscs' (tc -s, lab/link/counters.py)."""
    if backend == "netem" and not router.has_netem():
        pytest.skip("this kernel has no sch_netem: the netem variant runs in a VM with a stock kernel "
                    "(scripts/vm.sh; bash scripts/test.sh runs it there)")
    folders: dict[str, Path] = {}
    for protocol, cc, rts in PROTOCOLS[backend]:
        folder = folders[protocol] = captured_sweep(tmp_path, protocol, cc, backend)
        records = read_runs(folder / "runs.csv").records
        assert {r.status for r in records} == {"ok"}
        for r in records:  # the counter columns are filled with either shaper
            assert r.shaper == backend
            assert r.link_down_sent_pkts and r.link_up_sent_pkts, r
            assert r.link_down_loss_drops is not None and r.link_down_queue_drops is not None, r
        got = explain(folder)
        assert set(got) == {r.run_key for r in records}  # every run has a record
        for r in records:
            e = got[r.run_key]
            assert e["status"] == "explained", e["why"]
            assert (folder / r.evidence.split()[0]).parent.joinpath("explain.json").is_file()
            assert e["handshake"]["round_trips"]["value"] >= rts
            if r.loss_pct == 0:
                assert e["handshake"]["round_trips"]["value"] == rts  # no loss: no extra round trip
            for d in ("down", "up"):  # drops counted from the captures = the emulator's counters (within 1 %)
                assert e["path"][d]["agree"] is True, e["path"][d]
            if r.loss_pct == 3:
                assert e["loss"]["bytes_retransmitted"]["value"] > 0
                assert e["loss"]["data_packets_lost"]["value"] > 0
                assert e["window"]["loss_episodes"]["value"] > 0
                if protocol == "h2":  # CUBIC reduces its window: the flight falls after some episode
                    assert e["window"]["flight_reductions"]["value"] > 0
                    # the sender's kernel (ss as the connection closed) retransmitted what the capture counted
                    k = e["sender_kernel"]
                    assert k is not None and k["cwnd"]["source"] == "ss", e
                    pcap_bytes = e["loss"]["bytes_retransmitted"]["value"]
                    assert abs(k["bytes_retransmitted"]["value"] - pcap_bytes) <= 0.1 * pcap_bytes, (k, pcap_bytes)
                else:  # the record says whether nginx's QUIC sender reduced (a number, not unknown)
                    assert e["window"]["flight_reductions"]["value"] is not None
    if "h3" in folders:
        versus_adds_up(tmp_path, folders["h2"], folders["h3"])


def versus_adds_up(tmp_path: Path, h2: Path, h3: Path) -> None:
    """`--versus h2,h3` at 3 % loss on the two sweeps' runs in one folder (h3's rows and evidence added to a copy
    of h2's): components that add up to the median time difference (within 5 %), and the curves written."""
    both = tmp_path / "versus"
    shutil.copytree(h2, both)
    head2, *_ = (h2 / "runs.csv").read_text().splitlines()
    head3, *rows3 = (h3 / "runs.csv").read_text().splitlines()
    assert head2 == head3
    with (both / "runs.csv").open("a") as f:
        f.write("".join(r + "\n" for r in rows3))
    for d in (h3 / "evidence").iterdir():
        shutil.copytree(d, both / "evidence" / d.name)
    point = next(r.point_label for r in read_runs(both / "runs.csv").records if r.loss_pct == 3)
    done = quiclab("explain", str(both), "--versus", "h2,h3", "--point", point, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    v = json.loads(done.stdout)
    parts = v["handshake_ms"] + v["loss_recovery_ms"] + v["rest_ms"]
    assert abs(parts - v["median_difference_ms"]) <= 0.05 * abs(v["median_difference_ms"]), v
    assert v["a"]["loss_recovery_ms"] > 0 and v["b"]["loss_recovery_ms"] > 0, v
    assert Path(v["curves_csv"]).is_file()


PAGES = """name = "explain-hol"
protocols = ["h2", "h3"]
clients = ["curl"]
servers = ["nginx"]
repeats = 2
seed = 25
timeout = 120
capture = ["pcap", "keylog"]
[link]
rtt = "40ms"
rate = "20mbit"
loss = "3%"
[sweep]
workload = ["page:20x50kB"]
"""


def test_a_page_load_under_loss_shows_http2_streams_held_behind_a_tcp_hole(lab_up, tmp_path):
    """Issue 25: head-of-line per stream. 20 objects over one HTTP/2 connection at 3 % loss: the TCP byte stream's
    holes hold streams above them (positive hole-fill delays, charged to the streams with data past the hole); over
    HTTP/3 the record is per QUIC stream."""
    scenario = tmp_path / "explain-hol.toml"
    scenario.write_text(PAGES)
    done = quiclab("sweep", "--scenario", str(scenario), "--out", str(tmp_path / "hol"))
    assert done.returncode == 0, done.stderr[-2000:]
    folder = next(p for p in (tmp_path / "hol").iterdir() if p.is_dir())
    records = read_runs(folder / "runs.csv").records
    assert len(records) == 4 and {r.status for r in records} == {"ok"}
    got = explain(folder)
    assert set(got) == {r.run_key for r in records}
    for key, e in got.items():
        assert e["status"] == "explained", e["why"]
        h = e["head_of_line"]
        assert h is not None and h["streams"]["value"] == 20, key
        assert h["level"] == ("tcp byte stream" if "/h2/" in key else "quic stream")
        held = [s for s in h["per_stream"] if s["bytes_held"] > 0]
        assert len(held) == h["streams_held"]["value"]
        if "/h2/" in key and e["loss"]["data_packets_lost"]["value"]:
            # a lost TCP segment with data behind it: streams held, each with a positive hole-fill delay
            assert held and all(s["hole_fill_delay_ms"] > 0 for s in held), h
