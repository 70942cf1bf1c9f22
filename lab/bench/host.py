"""How precise this host can be right now: timer lateness and hypervisor CPU steal.

A userspace link emulator holds each packet until its release time by sleeping on a timer; it can be no more
precise than the host's timers. On a virtual machine whose hypervisor takes CPU time away ("steal"), a 1 ms
timer can fire many milliseconds late. Benchmarks report this next to their figures, and the timing-accuracy
tests skip (saying so) when the host cannot support them at the moment.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass

from lab.quantiles import quantile

#: A 1 ms timer on a healthy machine of this kind fires ~0.1-0.2 ms late (p90).
MAX_TIMER_LATENESS_MS = 1.0


@dataclass(frozen=True)
class HostTiming:
    late_p90_ms: float  # how late a 1 ms timer fires (90th percentile)
    steal_pct: float    # CPU time the hypervisor took from this VM over the same window (all CPUs)
    load_1m: float = 0.0  # runnable tasks (1-minute load average): other work competing for the CPUs

    @property
    def precise(self) -> bool:
        return self.late_p90_ms <= MAX_TIMER_LATENESS_MS

    def describe(self) -> str:
        return (f"1 ms timers fire {self.late_p90_ms:.2f} ms late (p90), CPU steal {self.steal_pct:.0f} %, "
                f"load {self.load_1m:.1f}")


def _cpu() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def measure(samples: int = 200) -> HostTiming:
    """Sleep 1 ms `samples` times (~0.3 s) and see how late each wake-up is, and how much CPU was stolen."""
    steal0, total0 = _cpu()
    late = []
    for _ in range(samples):
        t = time.perf_counter()
        select.poll().poll(1)
        late.append(time.perf_counter() - t - 0.001)
    steal1, total1 = _cpu()
    return HostTiming(late_p90_ms=quantile(late, 0.9) * 1000,
                      steal_pct=100 * (steal1 - steal0) / max(1, total1 - total0), load_1m=load_average())


def load_average() -> float:
    """The 1-minute load average (0 where /proc/loadavg cannot be read)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


#: Above this share of CPU taken by the hypervisor during a measurement, the measurement shows the host, not the
#: emulator (a quiet machine of this kind shows 0-5 %).
MAX_STEAL_PCT = 10.0


class StealMeter:
    """`with StealMeter() as m: ...` then `m.steal_pct`: the CPU the hypervisor took while the block ran."""

    def __enter__(self) -> StealMeter:
        self._start = _cpu()
        self.steal_pct = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        steal1, total1 = _cpu()
        steal0, total0 = self._start
        self.steal_pct = 100 * (steal1 - steal0) / max(1, total1 - total0)

    @property
    def disturbed(self) -> bool:
        return self.steal_pct > MAX_STEAL_PCT
