"""Issue 'link emulation': real traffic through the router, measured outside the emulator where possible
(ping in the client, tcpdump and kernel interface counters in the router).

The checks that both backends must pass run once per shaper (`shaper` fixture): linkem everywhere, netem where the
kernel has sch_netem. This host's kernel has none, so scripts/test.sh runs the netem variants (marked `netem`) in a
VM with Debian's stock kernel (scripts/vm.sh run -- uv run pytest -m netem tests/lab); elsewhere they skip, saying
so. The VM's checks stay at rates an emulated CPU holds (5 Mbit/s of TLS under TCG: BULK_NETEM)."""

from __future__ import annotations

import itertools
import math
import time

import pytest

from lab.endpoints import get_client
from lab.link import linkem, router, shaper
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.protocols import Protocol
from lab.run.transfer import run_transfer

from .conftest import on_quiet_host
from .probes import capture, iface_tx, lower_quartile, median, ping_rtts_ms, ping_timed, udp_burst

pytestmark = pytest.mark.lab


def shape(backend: str = "linkem", **spec: object) -> Link:
    choice, in_force = shaper.apply(parse_link(spec), backend)
    assert choice.backend == backend
    return in_force


#: Both shapers; netem's variant is marked `netem` (scripts/test.sh runs that group in the VM).
SHAPERS = [pytest.param("linkem", id="linkem"), pytest.param("netem", id="netem", marks=pytest.mark.netem)]


@pytest.fixture
def backend(request: pytest.FixtureRequest, clean_link: None) -> str:
    """The shaper under test (parametrized with SHAPERS): netem skips where the kernel has no sch_netem."""
    name = getattr(request, "param", "linkem")
    if name == "netem" and not router.has_netem():
        pytest.skip("this kernel has no sch_netem: the netem variant runs in a VM with a stock kernel "
                    "(scripts/vm.sh; bash scripts/test.sh runs it there)")
    return name


# Noise on a small shared machine (a descheduled vCPU, another container's burst) only ever adds delay and takes
# throughput away: it never makes a packet early or a link faster than configured. So these checks hold *every*
# measurement to the bound noise cannot explain (RTT not below the configured one, goodput not above the rate) and
# take up to three measurements for the full tolerance; measurements taken while the hypervisor stole CPU are set
# aside (on_quiet_host, tests/lab/conftest.py).


@pytest.mark.parametrize(("backend", "rtt_ms"), [
    *[("linkem", r) for r in (10, 80, 160, 800)],
    *[pytest.param("netem", r, marks=pytest.mark.netem) for r in (10, 80, 160)]], indirect=["backend"])
def test_ping_rtt_matches_configured(backend, rtt_ms):
    """The RTT of the pings is their lower quartile: the statistic the lab's calibration defines its own path by
    (lab/link/calibrate.py), for the same reason: a busy or emulated CPU's late timers and wake-ups only lengthen
    the upper part. In the TCG VM (2026-11-27, 60 pings 20 ms apart) the upper half is the emulated CPU's: 10 ms
    measured q25 10.20, median 10.40, p90 11.61; 80 ms q25 80.78, median 81.95, p90 88.49; the median of three
    earlier attempts at 10 ms was 10.6-11.0. Without netem's own timer latency in the subtracted path (4790080) the
    lower quartile at 10 ms reads ~11.1 and fails."""
    shape(backend, rtt=f"{rtt_ms}ms")
    count, interval = (60, 0.02) if rtt_ms < 100 else (30, 0.1) if rtt_ms < 500 else (8, 0.2)
    tolerance = max(0.5, 0.02 * rtt_ms)
    ping_rtts_ms(3, 0.05)  # warm-up: neighbour entries along the path
    runs = on_quiet_host(lambda: ping_rtts_ms(count, interval), lambda r: abs(lower_quartile(r) - rtt_ms) <= tolerance)
    for rtts in runs:
        assert len(rtts) == count, f"{count - len(rtts)} of {count} pings lost on a lossless link"
        assert lower_quartile(rtts) >= rtt_ms - tolerance, \
            f"lower quartile {lower_quartile(rtts):.2f} ms is below {rtt_ms} ms ({rtts})"
    seen = ", ".join(f"{lower_quartile(r):.2f} (median {median(r):.2f})" for r in runs)
    assert abs(lower_quartile(runs[-1]) - rtt_ms) <= tolerance, \
        f"RTT lower quartile {seen} ms for {rtt_ms} ms (± {tolerance})"


def _bulk(protocol: Protocol, client: str, server: str, rate_mbit: int, seconds: float = 5.0,
          seen: list[str] | None = None) -> float:
    size = int(rate_mbit * 1e6 / 8 * seconds)
    r = run_transfer(get_client(client), server, protocol, size, timeout_s=120)
    if seen is not None:  # what each attempt's figure came from, for the failure message
        seen.append(f"{r.bytes} B, total {r.total_s} s, handshake {r.handshake_s} s, first byte {r.ttfb_s} s")
    assert r.ok, r.failure
    assert not r.client_rcvbuf_drops, \
        f"the client's own UDP receive buffer dropped {r.client_rcvbuf_drops} datagrams (net.core.rmem_default " \
        "too small on the host? scripts/setup.sh sets it): that is the endpoint, not the link"
    # Goodput of the data phase: payload bytes over first byte .. last byte (handshake and request excluded)
    # where the client reports its first byte (curl); else over the whole transfer (gtlsclient: a little lower).
    assert r.total_s
    return r.bytes * 8 / (r.total_s - (r.ttfb_s or 0.0))


# (protocol, client, server, rate, floor): TCP, and "a QUIC transfer with a large enough window": ngtcp2's
# gtlsclient -> gtlsserver (cubic, 16-24 MB windows; 1444-byte packets after PMTUD, so at most ~0.947 of the IP
# rate is stream data), measured 0.93 of 100 Mbit/s here on a quiet host. nginx's HTTP/3 too: it sends 1200-byte
# QUIC packets (at most ~0.936 of the IP rate is stream data) with NewReno and measured 0.90-0.92 of 100 Mbit/s,
# too close to 0.90 for a check that must not flake: held to 0.85 there (docs/benchmarks.md, "Bulk goodput at
# 100 Mbit/s, TCP and QUIC").
BULK = [
    *[(Protocol.H1, "curl", "nginx", r, 0.90) for r in (5, 20, 100)],
    *[(Protocol.H3, "gtlsclient", "ngtcp2", r, 0.90) for r in (5, 20, 100)],
    (Protocol.H3, "curl", "nginx", 5, 0.90), (Protocol.H3, "curl", "nginx", 20, 0.90),
    (Protocol.H3, "curl", "nginx", 100, 0.85),
]
# (Measured 0.78-0.85 for HTTP/3 curl -> nginx at 100 Mbit/s on three clean-clone CI runs of 2026-11-23: the lab's
# health checks then ran every second in eleven containers, a `docker exec` each, 0.77 of this host's 2 cores at
# idle. Every 30 s since (0.06 cores at idle), and it measures 0.9 again: docs/benchmarks.md.)


# netem (in the VM): 5 Mbit/s, TCP (HTTP/2) and QUIC. The VM runs under TCG here: its emulated CPU carried 8-15
# Mbit/s of TLS (20 Mbit/s runs of 2026-11-26, 2 vCPUs: HTTP/2 0.60-0.75, HTTP/3 0.40-0.67 of the rate), so the
# check stays at a rate the guest holds with room, not at the linkem variants' 20 and 100 Mbit/s.
BULK_NETEM = [(Protocol.H2, "curl", "nginx", 5, 0.90), (Protocol.H3, "curl", "nginx", 5, 0.90)]


def _bulk_param(backend: str, p: Protocol, c: str, s: str, r: int, floor: float) -> object:
    marks = [pytest.mark.netem] if backend == "netem" else []
    return pytest.param(backend, p, c, s, r, floor, id=f"{backend}-{p.value}-{c}-{s}-{r}mbit", marks=marks)


@pytest.mark.parametrize(("backend", "protocol", "client", "server", "rate_mbit", "floor"),
                         [_bulk_param("linkem", *b) for b in BULK] + [_bulk_param("netem", *b) for b in BULK_NETEM],
                         indirect=["backend"])
def test_bulk_goodput_close_to_rate(backend, protocol, client, server, rate_mbit, floor):
    # Two bandwidth-delay products of buffer (at least 128 KiB): a loss-based sender (NewReno, cubic) halves or
    # cuts its window at each queue overflow and with a 1-BDP drop-tail queue leaves the link ~5 % idle
    # afterwards; with 2 BDP the transport keeps the link busy, so this measures the shaper's rate rather than
    # the congestion controller.
    queue = max(128 * 1024, int(rate_mbit * 1e6 / 8 * 0.010 * 2))
    shape(backend, rate=f"{rate_mbit}mbit", rtt="10ms", queue=str(queue))
    seen: list[str] = []
    ratios = on_quiet_host(lambda: _bulk(protocol, client, server, rate_mbit, seen=seen) / (rate_mbit * 1e6),
                           lambda x: x >= floor)
    label = f"{protocol.label} {client}->{server}"
    assert all(x <= 1.0 for x in ratios), f"{label} goodput {ratios} x the configured {rate_mbit} Mbit/s ({seen})"
    assert ratios[-1] >= floor, \
        f"{label} goodput {', '.join(f'{x:.3f}' for x in ratios)} x {rate_mbit} Mbit/s (want {floor}-1.00; {seen})"


def _binomial_99(n: int, p: float) -> tuple[float, float]:
    sd = math.sqrt(n * p * (1 - p))
    return n * p - 2.576 * sd, n * p + 2.576 * sd


# netem at 5 % only: its 1 % and 3 % are checked on real traffic by tests/lab/test_netem.py (the first packets
# after each shape; the counters against the captures), and each check costs minutes in the TCG VM
@pytest.mark.parametrize(("backend", "loss_pct"), [("linkem", 1), ("linkem", 5),
                                                  pytest.param("netem", 5, marks=pytest.mark.netem)],
                         indirect=["backend"])
def test_bernoulli_loss_inside_binomial_interval(backend, loss_pct):
    n = 20_000
    shape(backend, loss=f"{loss_pct}%", seed=loss_pct)
    server_if = router.interfaces().server_side
    with capture(server_if) as cap:
        udp_burst(n)
    lost = n - len(set(cap.seqs()))
    lo, hi = _binomial_99(n, loss_pct / 100)
    assert lo <= lost <= hi, f"{lost} of {n} lost at {loss_pct} % (99 % interval {lo:.0f}..{hi:.0f})"


@pytest.mark.parametrize("backend", SHAPERS, indirect=True)
def test_gilbert_elliott_mean_loss_and_burst(backend):
    n = 100_000
    link = shape(backend, ge="1%,30%", seed=7)
    model = link.uplink.loss
    server_if = router.interfaces().server_side
    with capture(server_if) as cap:
        udp_burst(n)
    got = set(cap.seqs())
    lost = [i not in got for i in range(n)]
    bursts, run = [], 0
    for x in lost:
        if x:
            run += 1
        elif run:
            bursts.append(run)
            run = 0
    mean_loss = sum(lost) / n
    mean_burst = sum(bursts) / len(bursts)
    assert abs(mean_loss - model.mean) <= 0.10 * model.mean, f"mean loss {mean_loss:.4f} vs {model.mean:.4f}"
    assert abs(mean_burst - model.mean_burst) <= 0.10 * model.mean_burst, f"burst {mean_burst:.2f}"


@pytest.mark.parametrize("backend", SHAPERS, indirect=True)
@pytest.mark.parametrize(("reorder", "expect_reordering"), [(False, False), (True, True)])
def test_jitter_keeps_order_unless_asked(backend, reorder, expect_reordering):
    shape(backend, delay="40ms", jitter="10ms", reorder=reorder)
    server_if = router.interfaces().server_side
    with capture(server_if) as cap:
        udp_burst(3000)
    seqs = cap.seqs()
    assert len(seqs) == 3000
    inversions = sum(1 for a, b in itertools.pairwise(seqs) if b < a)
    assert (inversions > 0) == expect_reordering, f"{inversions} inversions with reorder={reorder}"


def _schedule_mean(steps: list[tuple[float, float]], period: float, t0: float, t1: float) -> float:
    """Mean rate of a looping piecewise-constant schedule over [t0, t1] (seconds since it was applied)."""
    ends = [t for t, _ in steps[1:]] + [period]

    def integral(t: float) -> float:
        k, rem = divmod(t, period)
        full = sum((e - s) * r for (s, r), e in zip(steps, ends, strict=True))
        part = sum(max(0.0, min(e, rem) - s) * r for (s, r), e in zip(steps, ends, strict=True))
        return k * full + part

    return (integral(t1) - integral(t0)) / (t1 - t0)


def _wire_rate_during_transfer(size: int) -> tuple[float, float, float]:
    """Downlink IP bit rate measured by the kernel counters of the router's client-side interface while a
    bulk HTTP/1.1 download runs; returns (rate, start, end) in host monotonic seconds."""
    client_if = router.interfaces().client_side
    b0, p0 = iface_tx(client_if)
    r = run_transfer(get_client("curl"), "nginx", Protocol.H1, size, timeout_s=120)
    end = time.monotonic()
    assert r.ok, r.failure
    b1, p1 = iface_tx(client_if)
    ip_bytes = (b1 - b0) - 14 * (p1 - p0)  # minus Ethernet headers: linkem's rate counts IP bytes
    data_start = end - (r.total_s - r.ttfb_s)
    return ip_bytes * 8 / (r.total_s - r.ttfb_s), data_start, end


def test_rate_schedule_spikes_average(clean_link):
    def measure() -> tuple[float, float]:
        t_apply = time.monotonic()
        link = shape(rate="20mbit", spikes="1s:200ms:10%", rtt="10ms")
        sched = link.downlink.rate_schedule
        assert sched is not None
        rate, start, end = _wire_rate_during_transfer(int(16.4e6 / 8 * 8))
        return rate, _schedule_mean(sched.steps, sched.period_s, start - t_apply, end - t_apply)

    rate, expected = on_quiet_host(measure, lambda r: abs(r[0] - r[1]) <= 0.05 * r[1])[-1]
    assert abs(rate - expected) <= 0.05 * expected, f"{rate / 1e6:.2f} vs {expected / 1e6:.2f} Mbit/s"


def test_mahimahi_trace_average(clean_link, tmp_path):
    # 100 ms period: 2 opportunities per ms for 50 ms, then 1 every 2 ms for 50 ms -> mean 15 Mbit/s
    lines = [t for t in range(50) for _ in range(2)] + list(range(50, 100, 2)) + [100]
    trace = tmp_path / "wobbly.trace"
    trace.write_text("\n".join(map(str, lines)) + "\n")
    link = shape(trace=str(trace), rtt="10ms")
    mean = link.downlink.effective_rate_bps
    assert mean is not None
    rate = on_quiet_host(lambda: _wire_rate_during_transfer(int(mean / 8 * 6))[0],
                         lambda r: abs(r - mean) <= 0.05 * mean)[-1]
    assert abs(rate - mean) <= 0.05 * mean, f"{rate / 1e6:.2f} vs {mean / 1e6:.2f} Mbit/s"


def test_runtime_change_takes_effect_within_100ms(clean_link):
    shape(delay="5ms")
    import threading
    samples: list[tuple[float, float]] = []
    pinger = threading.Thread(target=lambda: samples.extend(ping_timed(2.0)))
    pinger.start()
    time.sleep(1.0)
    t0 = time.time()
    linkem.apply(parse_link({"delay": "25ms"}))
    t_applied = time.time()
    pinger.join()
    assert t_applied - t0 < 0.1, f"the change took {1000 * (t_applied - t0):.0f} ms to apply"
    # A reply that arrived at ts was sent at ts - rtt. Every echo sent >= 100 ms after the request has the new
    # delay both ways (50 ms RTT); every echo whose reply was back before the request had the old (10 ms).
    after = [rtt for ts, rtt in samples if ts - rtt >= t0 + 0.1]
    before = [rtt for ts, rtt in samples if ts < t0]
    assert after and before
    assert all(rtt > 0.045 for rtt in after), "a packet sent 100 ms after the change still had the old delay"
    # (noise can only lengthen an RTT, so "before" is checked by its median, not by its worst sample)
    assert median(before) < 0.015, f"the old delay was not in force before the change: median {median(before)}"


def test_forcing_netem_without_netem_is_a_clear_error(lab_up):
    if router.has_netem():
        pytest.skip("this kernel has sch_netem: the error path for its absence cannot run here")
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "lab", "shape", "--rtt", "20ms", "--shaper", "netem"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "sch_netem" in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("spec", [
    {"rtt": "160ms", "rate": "5mbit", "loss": "1%"},
    {"delay": "40ms", "jitter": "10ms", "dist": "normal"},
    {"delay": "40ms", "jitter": "10ms", "reorder": True, "ge": "1%,30%,0%,100%"},
    {"rate": "100mbit", "queue": "200p", "delay": "5ms"},
])
def test_netem_command_lines_parse_in_the_router(lab_up, spec):
    """On a kernel without sch_netem the netem backend's tc lines are still checked (syntax, by tc itself)."""
    assert shaper.check_netem_syntax(parse_link(spec)) == []
