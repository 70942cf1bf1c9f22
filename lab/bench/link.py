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

import numpy as np

from lab import config, docker
from lab.bench import host
from lab.link import linkem, router, shaper
from lab.link.model import Link
from lab.link.spec import parse_link


@dataclass
class BenchResult:
    kernel_gbps: float        # median over the pairs used (see capacity_pairs_used)
    linkem_gbps: float
    linkem_vs_kernel: float   # median of the per-pair ratios
    capacity_pairs: list[dict[str, float]]  # every pair: kernel_gbps, linkem_gbps, steal_pct, ratio
    capacity_pairs_used: int  # pairs with <= host.MAX_STEAL_PCT steal (all pairs if none was undisturbed)
    rate_accuracy: dict[str, dict[str, float]]
    delay_error_ms: dict[str, Any]
    seconds_per_test: float
    host_before: dict[str, float]  # timer lateness and CPU steal before the benchmark (lab/bench/host.py)
    host_after: dict[str, float]

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


def percentile(xs: list[float], q: float) -> float:
    """The sample nearest to rank q*(n-1) (numpy's "nearest"): a value that was measured, never interpolated."""
    return float(np.quantile(np.asarray(xs, dtype=float), q, method="nearest"))


@dataclass
class CapacityPair:
    """One side-by-side pair: kernel-only and through-linkem forwarding, measured back to back."""

    kernel_gbps: float
    linkem_gbps: float
    steal_pct: float  # the most CPU the hypervisor took during either half (lab/bench/host.py)

    @property
    def ratio(self) -> float:
        return self.linkem_gbps / self.kernel_gbps if self.kernel_gbps else 0.0

    @property
    def disturbed(self) -> bool:
        return self.steal_pct > host.MAX_STEAL_PCT


def _measure_path(path: str, seconds: float) -> tuple[float, float]:
    """(goodput bit/s, CPU steal %) of one iperf3 run with the router forwarding by `path` (kernel | linkem)."""
    router.set_path(path)
    with host.StealMeter() as meter:
        goodput = _iperf(seconds)
    return goodput, meter.steal_pct


def capacity(seconds: float, rounds: int = 3) -> list[CapacityPair]:
    """Unshaped forwarding goodput, kernel-only vs through linkem, in `rounds` back-to-back pairs whose order
    alternates (kernel first, then linkem first, ...) so a drift of the host's speed does not favour either."""
    shaper.apply(Link(), "linkem")
    pairs = []
    try:
        for i in range(rounds):
            order = ("kernel", "linkem") if i % 2 == 0 else ("linkem", "kernel")
            got = {path: _measure_path(path, seconds) for path in order}
            pairs.append(CapacityPair(kernel_gbps=got["kernel"][0] / 1e9, linkem_gbps=got["linkem"][0] / 1e9,
                                      steal_pct=max(got["kernel"][1], got["linkem"][1])))
    finally:
        router.set_path("linkem")
    return pairs


def summarize_capacity(pairs: list[CapacityPair]) -> tuple[float, float, float, int]:
    """(kernel Gbit/s, linkem Gbit/s, median of the per-pair ratios, pairs used): over the pairs the hypervisor
    did not disturb, or over all of them when every pair was disturbed (the caller warns then)."""
    used = [p for p in pairs if not p.disturbed] or pairs
    return (statistics.median(p.kernel_gbps for p in used), statistics.median(p.linkem_gbps for p in used),
            statistics.median(p.ratio for p in used), len(used))


def rate_accuracy(rate_mbit: int, seconds: float) -> dict[str, float]:
    shaper.apply(parse_link({"rate": f"{rate_mbit}mbit", "rtt": "10ms"}), "linkem")
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


def delay_error(seconds: float, delay_ms: float = 20.0, load: str = "300M") -> dict[str, float]:
    """Ping RTT minus configured RTT while a constant-rate UDP flow (below linkem's capacity, no rate limit, so
    no queue builds) loads the emulator: the emulator's own timing error under load."""
    shaper.apply(parse_link({"delay": f"{delay_ms}ms"}), "linkem")
    loader = threading.Thread(target=_udp_load, args=(seconds + 1, load))
    loader.start()
    time.sleep(0.5)
    count = int(seconds / 0.005)
    out = docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(count), "-i", "0.005", config.SERVER_IP])
    loader.join()
    rtts = [float(x.split("time=")[1].split()[0]) for x in out.splitlines() if "time=" in x]
    errors = [r - 2 * delay_ms for r in rtts]
    return {"configured_rtt_ms": 2 * delay_ms, "load": f"UDP {load}bit/s downlink", "samples": len(errors),
            "p50": percentile(errors, 0.5), "p99": percentile(errors, 0.99), "max": max(errors),
            "mean": statistics.fmean(errors)}


def run(seconds: float = 5.0, rounds: int = 3) -> BenchResult:
    before = host.measure()
    try:
        pairs = capacity(seconds, rounds)
        rates = {f"{r}mbit": rate_accuracy(r, seconds) for r in (100, 500)}
        delay = delay_error(seconds)
    finally:
        shaper.apply(Link(), "linkem")
        linkem.current()
    after = host.measure()
    kernel, through, ratio, used = summarize_capacity(pairs)
    return BenchResult(kernel_gbps=kernel, linkem_gbps=through, linkem_vs_kernel=ratio,
                       capacity_pairs=[{**asdict(p), "ratio": p.ratio} for p in pairs], capacity_pairs_used=used,
                       rate_accuracy=rates, delay_error_ms=delay, seconds_per_test=seconds,
                       host_before=asdict(before), host_after=asdict(after))
