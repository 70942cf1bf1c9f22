"""The newer link stages on real traffic through the router: duplication and corruption rates, the jitter mean under
load, CoDel against drop-tail under a bulk TCP flow, the base-path calibration, and netem's command lines for them.
Counted outside the emulator where possible (tcpdump in the router, the server's UDP counters, ping)."""

from __future__ import annotations

import math
import re
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

from lab import config, docker, lock
from lab.link import calibrate, counters, linkem, router, shaper
from lab.link.model import Link
from lab.link.spec import parse_link

from .conftest import on_quiet_host
from .probes import bulk_tcp_rtts, capture, median, ping_rtts_ms, still_in_force, udp_burst

pytestmark = pytest.mark.lab


@pytest.fixture(autouse=True)
def lab_held() -> Iterator[None]:
    """Hold the lab's lock (lab/lock.py) while a test measures, so no sweep, run or shape of another command changes
    the link meanwhile; skip, naming the holder, if one holds it."""
    try:
        with lock.holding("pytest tests/lab/test_link_stages.py"):
            yield
    except lock.LabBusy as e:
        pytest.skip(str(e))


def shape(**spec: object) -> Link:
    _, in_force = shaper.apply(parse_link(spec), "linkem")
    return in_force


def _binomial(n: int, p: float, z: float = 3.29) -> tuple[float, float]:
    """The 99.9 % interval of a binomial count."""
    sd = math.sqrt(n * p * (1 - p))
    return n * p - z * sd, n * p + z * sd


def _metric(name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in linkem.metrics_text().splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not in linkem's metrics")


def _server_udp_in_errors() -> int:
    """Udp InErrors of the server's network namespace (bad checksum or length: what a corrupted datagram counts as)."""
    lines = [ln.split() for ln in docker.exec_in(config.SERVER_CONTAINER, ["cat", "/proc/net/snmp"]).splitlines()
             if ln.startswith("Udp:")]
    head, values = lines[0], lines[1]
    return int(values[head.index("InErrors")])


def test_duplication_rate_inside_binomial_interval(clean_link):
    n, p = 20_000, 0.02
    link = shape(duplicate="2%", seed=11)
    with capture(router.interfaces().server_side) as cap:
        udp_burst(n)
    still_in_force(link)
    seqs = cap.seqs()
    assert set(seqs) == set(range(n)), "every datagram arrives at least once"
    dups = len(seqs) - n
    lo, hi = _binomial(n, p)
    assert lo <= dups <= hi, f"{dups} duplicates of {n} at 2 % (99.9 % interval {lo:.0f}..{hi:.0f})"


def _uplink_received() -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in linkem.metrics_text().splitlines()
               if line.startswith('quiclab_link_received_packets_total{direction="uplink"'))


def test_corruption_rate_counted_by_the_receiver(clean_link):
    """2 % corruption over 20,000 probe datagrams. The lab is shared, so other traffic may cross the link meanwhile:
    the rate is checked over every packet linkem received in that time, and the receiver (the server's UDP layer,
    which rejects a datagram with a bad checksum or length silently for the application) must have rejected at
    least as many datagrams as the probes alone make likely."""
    n, p = 20_000, 0.02
    link = shape(corrupt="2%", seed=12)
    before = (_metric("quiclab_link_corrupted_packets_total", direction="uplink"), _uplink_received(),
              _server_udp_in_errors())
    udp_burst(n)
    time.sleep(0.5)
    still_in_force(link)
    corrupted = _metric("quiclab_link_corrupted_packets_total", direction="uplink") - before[0]
    total = _uplink_received() - before[1]
    rejected = _server_udp_in_errors() - before[2]
    assert total >= n
    lo, hi = _binomial(round(total), p)
    assert lo <= corrupted <= hi, (
        f"{corrupted:.0f} corrupted of {total:.0f} at 2 % (99.9 % interval {lo:.0f}..{hi:.0f})")
    probes_lo, _ = _binomial(n, p)
    assert rejected >= probes_lo, (
        f"the server's UDP layer rejected {rejected} datagrams; linkem corrupted {corrupted:.0f} of {total:.0f}")


def _udp_load(seconds: float, rate: str) -> None:
    docker.exec_in(config.CLIENT_CONTAINER, ["iperf3", "-c", config.SERVER_IP, "-R", "-u", "-b", rate, "-l", "1400",
                                             "-t", f"{seconds:g}", "--connect-timeout", "3000"])


def _rtts_under_load(seconds: float, rate: str) -> list[float]:
    loader = threading.Thread(target=_udp_load, args=(seconds + 1.5, rate))
    loader.start()
    try:
        time.sleep(1.0)
        return ping_rtts_ms(int(seconds / 0.01), 0.01)
    finally:
        loader.join()


def test_jitter_mean_within_5_percent_under_100_mbit_load(clean_link):
    """Order kept, 20 +- 5 ms uniform each way: the delay process does not depend on the packet rate, so the
    downlink carrying 100 Mbit/s of datagrams (one every ~112 us) adds the same mean delay as the sparse uplink,
    and the ping RTT's mean is the configured 40 ms (per-packet jitter held in order would add ~4 ms)."""
    link = shape(delay="20ms", jitter="5ms")
    runs = on_quiet_host(lambda: _rtts_under_load(8.0, "100M"),
                         lambda r: abs(statistics.fmean(r) - 40.0) <= 2.0)
    still_in_force(link)
    mean = statistics.fmean(runs[-1])
    assert len(runs[-1]) > 500
    assert abs(mean - 40.0) <= 2.0, f"mean RTT {mean:.2f} ms under 100 Mbit/s load for 40 ms configured"


def test_codel_keeps_the_standing_queue_near_its_target(clean_link):
    """20 Mbit/s, 20 ms RTT, 1 MB of buffer (400 ms at the rate) and a bulk cubic flow: drop-tail lets the flow
    fill the buffer, CoDel (target 5 ms) keeps the queueing delay the ping replies see behind the data near its
    target, at the rate."""
    link = shape(rate="20mbit", rtt="20ms", queue="1MB")
    tail, _ = bulk_tcp_rtts(6.0, 0.02)
    still_in_force(link)
    link = shape(rate="20mbit", rtt="20ms", queue="1MB", qdisc="codel")
    codel, goodput = bulk_tcp_rtts(6.0, 0.02)
    still_in_force(link)
    drops = _metric("quiclab_link_drops_total", direction="downlink", cause="aqm")
    t50, c50 = median(tail) - 20.0, median(codel) - 20.0
    assert t50 > 50.0, f"drop-tail: median queueing delay {t50:.1f} ms (expected the flow to fill the buffer)"
    assert c50 < 15.0, f"CoDel: median queueing delay {c50:.1f} ms, target 5 ms (drop-tail {t50:.1f} ms)"
    assert drops > 0
    assert goodput > 0.85 * 20e6, f"CoDel goodput {goodput / 1e6:.1f} Mbit/s of 20"


def test_configured_rtt_is_the_measured_rtt(clean_link):
    """The lab's own path is measured and subtracted: a 10 ms RTT pings at 10 ms (median) within 0.2 ms on a
    quiet host."""
    if not calibrate.enabled():
        pytest.skip(f"{calibrate.ENV_CALIBRATE}=off: the base path is not subtracted")
    link = shape(rtt="10ms")
    if calibrate.ensure("linkem").note:
        pytest.skip(calibrate.ensure("linkem").line())
    ping_rtts_ms(3, 0.05)
    runs = on_quiet_host(lambda: ping_rtts_ms(100, 0.02), lambda r: abs(median(r) - 10.0) <= 0.2)
    still_in_force(link)
    bp = calibrate.ensure("linkem")
    assert abs(median(runs[-1]) - 10.0) <= 0.2, (
        f"median RTT {median(runs[-1]):.3f} ms for 10 ms configured ({bp.line()})")


def _tun(*argv: str) -> str:
    return docker.exec_in(config.ROUTER_CONTAINER, list(argv))


def _tun_tx_dropped() -> dict[str, int]:
    """The kernel's own count of packets dropped at each TUN device (its queue toward linkem full), per direction:
    router.sh creates tun-down/tun-up afresh right before linkem starts, so the counts are all since its start."""
    out = _tun("cat", "/sys/class/net/tun-down/statistics/tx_dropped",
               "/sys/class/net/tun-up/statistics/tx_dropped").split()
    return {"downlink": int(out[0]), "uplink": int(out[1])}


def _exported_at_rest() -> tuple[dict[str, int], str]:
    """The TUN devices' counts and linkem's metrics read while neither moves (a ping first: linkem publishes counters
    that changed, and the pings change both directions')."""
    for _ in range(3):
        docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", "3", "-i", "0.05", config.SERVER_IP])
        time.sleep(0.3)  # linkem publishes changed counters within this
        before = _tun_tx_dropped()
        text = linkem.metrics_text()
        if _tun_tx_dropped() == before:
            return before, text
    pytest.fail(f"the TUN devices kept dropping at rest: {before}")


def test_tun_queue_drops_are_exported(clean_link):
    """The emulator's drops of the host's making (its TUN queue full) are exported per direction as the kernel
    counts them, and read per run by the fidelity guard (lab/run/hostload.py: `link_host_drops`) through the lab's
    own parser: the same totals. An overload makes some: the uplink TUN's queue cut to 2 packets (from 10000) under
    a UDP burst at 2 Gbit/s drops about half of it (measured: 46489 of 94421 in 1 s)."""
    shape()  # through linkem (its counters are what is read)
    kernel_before, _ = _exported_at_rest()
    qlen = _tun("cat", "/sys/class/net/tun-up/tx_queue_len").strip()
    try:
        _tun("ip", "link", "set", "dev", "tun-up", "txqueuelen", "2")
        docker.exec_in(config.CLIENT_CONTAINER, ["iperf3", "-c", config.SERVER_IP, "-u", "-b", "2G", "-l", "1400",
                                                 "-n", "30M"], timeout_s=60)
    finally:
        _tun("ip", "link", "set", "dev", "tun-up", "txqueuelen", qlen)
    kernel, text = _exported_at_rest()
    assert kernel["uplink"] > kernel_before["uplink"], "the overload made no TUN queue drops"
    exported = {}
    for d in ("downlink", "uplink"):
        found = re.search(rf'^quiclab_link_drops_total{{direction="{d}",cause="tun_queue"}} (\d+)$', text, re.M)
        assert found, f"no tun_queue drop counter for the {d} in linkem's metrics"
        exported[d] = int(found.group(1))
    assert exported == kernel, "linkem's tun_queue drops are the TUN devices' own (kernel) counts"
    snap = counters.parse_linkem(text)
    assert (snap.down.host_drops, snap.up.host_drops) == (exported["downlink"], exported["uplink"])


@pytest.mark.parametrize("spec", [
    {"rate": "100mbit", "rtt": "10ms", "qdisc": "fq_codel:target=3ms"},
    {"rate": "100mbit", "rtt": "10ms", "qdisc": "codel:ecn=yes"},
    {"rate": "100mbit", "rtt": "10ms", "qdisc": "pie:alpha=0.25:bytemode=yes"},
    {"rate": "50mbit", "queue": "100p", "qdisc": "drop_head", "overhead": "8", "mpu": "64"},
    {"delay": "20ms", "duplicate": "1%", "corrupt": "0.1%", "reorder_prob": "25%", "reorder_gap": "5"},
    {"delay": "5ms", "slot": "2ms:1ms:packets=4:bytes=6000"},
    {"delay": "5ms", "slot": "2ms:1ms:normal"},
    {"loss": "1%", "loss_ecn": "yes"},
])
def test_netem_command_lines_for_the_new_stages_parse_in_the_router(lab_up, spec):
    assert shaper.check_netem_syntax(parse_link(spec)) == []
