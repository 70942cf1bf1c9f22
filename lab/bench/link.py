"""Link emulator benchmark: forwarding capacity (kernel vs linkem), rate accuracy, delay error under load.

All measurements run side by side in one invocation (this machine is noisy: compare ratios, not absolutes).
Throughput comes from iperf3 (server -> client, i.e. the downlink) and from the router's kernel interface
counters; delay error from pings while iperf3 loads the link.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from lab import config, docker, lock
from lab.bench import host
from lab.link import calibrate, linkem, napi, router, shaper
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.quantiles import median, quantile

#: The paths a forwarding round measures: the kernel alone, through linkem (the kernel forwarding in linkem's
#: writes), and, when this process can switch it (lab/link/napi.py), through linkem with threaded NAPI.
KERNEL, LINKEM, THREADED = "kernel", "linkem", "linkem+threaded-napi"


@dataclass
class BenchResult:
    kernel_gbps: float        # median over the pairs used (see capacity_pairs_used)
    linkem_gbps: float
    linkem_vs_kernel: float   # median of the per-pair ratios
    capacity_pairs: list[dict[str, Any]]  # every round: kernel_gbps, linkem_gbps, threaded_gbps, steal_pct, ratios
    capacity_pairs_used: int  # pairs with <= host.MAX_STEAL_PCT steal (all pairs if none was undisturbed)
    rate_accuracy: dict[str, dict[str, float]]  # "100mbit" (linkem), "100mbit threaded-napi" (when measured)
    delay_error_ms: dict[str, Any]
    seconds_per_test: float
    host_before: dict[str, float]  # timer lateness and CPU steal before the benchmark (lab/bench/host.py)
    host_after: dict[str, float]
    forwarding: str = napi.IN_WRITE  # the router's forwarding as the benchmark found it (lab/link/napi.py)
    threaded_gbps: float | None = None  # through linkem with threaded NAPI, same rounds (None: not measured)
    threaded_vs_kernel: float | None = None
    delay_error_threaded_ms: dict[str, Any] | None = None
    threaded_not_measured: str = ""  # why threaded NAPI was not measured, when it was not

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _iperf(seconds: float) -> float:
    """Receiver goodput (bit/s) of one TCP iperf3 run from the server to the client."""
    out = docker.exec_in(config.CLIENT_CONTAINER, ["iperf3", "-c", config.SERVER_IP, "-R", "-J", "-t",
                                                   f"{seconds:g}", "--connect-timeout", "3000"])
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"])


def _tx(iface: str) -> tuple[int, int]:
    b = int(router.run("cat", f"/sys/class/net/{iface}/statistics/tx_bytes"))
    p = int(router.run("cat", f"/sys/class/net/{iface}/statistics/tx_packets"))
    return b, p


@dataclass
class CapacityPair:
    """One side-by-side round: kernel-only and through-linkem forwarding (and through linkem with threaded NAPI
    when the router has it), measured back to back."""

    kernel_gbps: float
    linkem_gbps: float
    steal_pct: float  # the most CPU the hypervisor took during any part (lab/bench/host.py)
    threaded_gbps: float | None = None

    @property
    def ratio(self) -> float:
        return self.linkem_gbps / self.kernel_gbps if self.kernel_gbps else 0.0

    @property
    def threaded_ratio(self) -> float | None:
        if self.threaded_gbps is None:
            return None
        return self.threaded_gbps / self.kernel_gbps if self.kernel_gbps else 0.0

    @property
    def disturbed(self) -> bool:
        return self.steal_pct > host.MAX_STEAL_PCT


_threaded_now: dict[str, bool] = {}  # the TUNs' NAPI state as this benchmark last wrote it


def use(path: str) -> None:
    """Make the router forward by `path` (KERNEL, LINKEM or THREADED); THREADED and LINKEM on a router with NAPI
    write the TUNs' `threaded` from the host (lab/link/napi.py) when it differs."""
    router.set_path(KERNEL if path == KERNEL else LINKEM)
    if path == THREADED or (path == LINKEM and _threaded_now):
        want = path == THREADED
        if _threaded_now.get("on") != want:
            napi.set_threaded(want)
            _threaded_now["on"] = want


def rotation(paths: list[str], i: int) -> list[str]:
    """Round i's order: the paths rotated by i, so over len(paths) rounds each path runs once in each position
    (a drift of the host's speed favours none); for two paths this alternates."""
    k = i % len(paths)
    return paths[k:] + paths[:k]


def _measure_path(path: str, seconds: float) -> tuple[float, float]:
    """(goodput bit/s, CPU steal %) of one iperf3 run with the router forwarding by `path`."""
    use(path)
    with host.StealMeter() as meter:
        goodput = _iperf(seconds)
    return goodput, meter.steal_pct


def capacity(seconds: float, rounds: int = 3, paths: tuple[str, ...] = (KERNEL, LINKEM)) -> list[CapacityPair]:
    """Unshaped forwarding goodput of each path in `rounds` back-to-back rounds whose order rotates."""
    shaper.apply(Link(), "linkem")
    pairs = []
    try:
        for i in range(rounds):
            got = {path: _measure_path(path, seconds) for path in rotation(list(paths), i)}
            pairs.append(CapacityPair(kernel_gbps=got[KERNEL][0] / 1e9, linkem_gbps=got[LINKEM][0] / 1e9,
                                      steal_pct=max(v[1] for v in got.values()),
                                      threaded_gbps=got[THREADED][0] / 1e9 if THREADED in got else None))
    finally:
        router.set_path(LINKEM)
    return pairs


def _used(pairs: list[CapacityPair]) -> list[CapacityPair]:
    """The pairs the hypervisor did not disturb, or all of them when every pair was disturbed (the caller warns)."""
    return [p for p in pairs if not p.disturbed] or pairs


def summarize_capacity(pairs: list[CapacityPair]) -> tuple[float, float, float, int]:
    """(kernel Gbit/s, linkem Gbit/s, median of the per-pair ratios, pairs used) over `_used(pairs)`."""
    used = _used(pairs)
    return (median(p.kernel_gbps for p in used), median(p.linkem_gbps for p in used), median(p.ratio for p in used),
            len(used))


def summarize_threaded(pairs: list[CapacityPair]) -> tuple[float, float] | None:
    """(Gbit/s, median of the per-pair ratios to the kernel) through linkem with threaded NAPI, over the same
    pairs as summarize_capacity; None when it was not measured."""
    got = [(p.threaded_gbps, p.threaded_ratio) for p in _used(pairs)
           if p.threaded_gbps is not None and p.threaded_ratio is not None]
    if not got:
        return None
    return median(g for g, _ in got), median(r for _, r in got)


def rate_accuracy(rate_mbit: int, seconds: float) -> dict[str, float]:
    """TCP goodput and IP wire rate through a `rate_mbit` link, 10 ms RTT, a byte queue of one BDP."""
    shaper.apply(parse_link({"rate": f"{rate_mbit}mbit", "rtt": "10ms", "queue": "1bdp"}), "linkem")
    iface = router.interfaces().client_side
    b0, p0 = _tx(iface)
    t0 = time.monotonic()
    goodput = _iperf(seconds)
    elapsed = time.monotonic() - t0
    b1, p1 = _tx(iface)
    ip_bits = ((b1 - b0) - 14 * (p1 - p0)) * 8
    # The wire rate over the exec's wall time underestimates slightly (connection set-up is included).
    return {"configured_mbit": rate_mbit, "goodput_mbit": goodput / 1e6, "goodput_ratio": goodput / (rate_mbit * 1e6),
            "wire_mbit": ip_bits / elapsed / 1e6, "wire_ratio": ip_bits / elapsed / (rate_mbit * 1e6)}


def _udp_load(seconds: float, rate: str) -> None:
    docker.exec_in(config.CLIENT_CONTAINER, ["iperf3", "-c", config.SERVER_IP, "-R", "-u", "-b", rate, "-l", "1400",
                                             "-t", f"{seconds:g}", "--connect-timeout", "3000"])


def _loop_counters() -> dict[str, float]:
    """linkem's loop facts: packets dropped in the TUN queues, and the read-wait histogram (cumulative buckets)."""
    out: dict[str, float] = {}
    for line in linkem.metrics_text().splitlines():
        if line.startswith("quiclab_link_drops_total{") and 'cause="tun_queue"' in line:
            out["tun_queue_drops"] = out.get("tun_queue_drops", 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("quiclab_link_read_wait_seconds_bucket{"):
            le = line.split('le="')[1].split('"')[0]
            out[f"read_wait_le_{le}"] = float(line.rsplit(" ", 1)[1])
    return out


def _read_wait_summary(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Packets read during the load, and how many may have waited unread more than 0.1 / 1 / 10 ms."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = d.get("read_wait_le_+Inf", 0.0)
    return {"packets_read": total, "tun_queue_drops": d.get("tun_queue_drops", 0.0),
            "read_wait_over_0.1ms": total - d.get("read_wait_le_0.0001", 0.0),
            "read_wait_over_1ms": total - d.get("read_wait_le_0.001", 0.0),
            "read_wait_over_10ms": total - d.get("read_wait_le_0.01", 0.0)}


def delay_error(seconds: float, delay_ms: float = 20.0, load: str = "300M") -> dict[str, Any]:
    """Ping RTT minus configured RTT while a constant-rate UDP flow (below linkem's capacity, no rate limit, so
    no queue builds) loads the emulator: the emulator's own timing error under load (the lab's own path is
    subtracted by the calibration, lab/link/calibrate.py), with linkem's loop facts over the same time."""
    shaper.apply(parse_link({"delay": f"{delay_ms}ms"}), "linkem")
    before = _loop_counters()
    loader = threading.Thread(target=_udp_load, args=(seconds + 1, load))
    loader.start()
    time.sleep(0.5)
    count = int(seconds / 0.005)
    out = docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(count), "-i", "0.005", config.SERVER_IP])
    loader.join()
    rtts = [float(x.split("time=")[1].split()[0]) for x in out.splitlines() if "time=" in x]
    errors = [r - 2 * delay_ms for r in rtts]
    return {"configured_rtt_ms": 2 * delay_ms, "load": f"UDP {load}bit/s downlink", "samples": len(errors),
            "p50": quantile(errors, 0.5), "p99": quantile(errors, 0.99), "max": max(errors),
            "mean": statistics.fmean(errors), "loop": _read_wait_summary(before, _loop_counters()),
            "calibration": calibrate.ensure("linkem").line() if calibrate.enabled() else "off"}


def threaded_plan(found: napi.State) -> str:
    """Why threaded NAPI cannot be measured in this run ("" when it can)."""
    if not found.attached:
        return "the router's linkem attached without NAPI (an older router image: `quiclab build`, `quiclab up`)"
    problem = napi.host_step_problem()
    return f"switching it is a host step and {problem}" if problem else ""


def run(seconds: float = 5.0, rounds: int = 3) -> BenchResult:
    """The whole benchmark, holding the lab (no sweep, run or shape of another command meanwhile: they would change
    the link under the measurement). On a router with NAPI, every figure is measured with linkem's forwarding in
    its writes and with threaded NAPI, in turn; the router is left as it was found."""
    with lock.holding("quiclab bench link"):
        found = napi.state()
        why_not = threaded_plan(found)
        modes = [LINKEM] if why_not else [LINKEM, THREADED]
        _threaded_now.clear()  # empty: this run does not switch (the linkem figures are of the forwarding found)
        if not why_not:
            _threaded_now["on"] = found.mode == napi.THREADED
        before = host.measure()
        delay_threaded = None
        try:
            pairs = capacity(seconds, rounds, (KERNEL, *modes))
            rates = {}
            for r in (100, 500):
                for mode in modes:
                    use(mode)
                    rates[f"{r}mbit" + (" threaded-napi" if mode == THREADED else "")] = rate_accuracy(r, seconds)
            use(LINKEM)
            delay = delay_error(seconds)
            if THREADED in modes:
                use(THREADED)
                delay_threaded = delay_error(seconds)
        finally:
            shaper.apply(Link(), "linkem")
            if _threaded_now and _threaded_now["on"] != (found.mode == napi.THREADED):
                napi.set_threaded(found.mode == napi.THREADED)
            linkem.current()
        after = host.measure()
    kernel, through, ratio, used = summarize_capacity(pairs)
    threaded = summarize_threaded(pairs)
    return BenchResult(kernel_gbps=kernel, linkem_gbps=through, linkem_vs_kernel=ratio,
                       capacity_pairs=[{**asdict(p), "ratio": p.ratio, "threaded_ratio": p.threaded_ratio}
                                       for p in pairs], capacity_pairs_used=used,
                       rate_accuracy=rates, delay_error_ms=delay, seconds_per_test=seconds,
                       host_before=asdict(before), host_after=asdict(after), forwarding=found.mode,
                       threaded_gbps=threaded[0] if threaded else None,
                       threaded_vs_kernel=threaded[1] if threaded else None,
                       delay_error_threaded_ms=delay_threaded, threaded_not_measured=why_not)
