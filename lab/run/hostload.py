"""The fidelity guard: was the host, not the link, the bottleneck during a run?

A lab emulates the link in software on the host's CPUs; several labs on one host (`quiclab sweep --parallel N`)
share them. A run is *host-bound* when
- the emulator could not keep up: packets dropped at its TUN queue or failed writes (linkem's `tun_queue` and
  write-error counters rose during the run): the link did not hold its rate; or
- the host's CPUs were saturated or stolen for the run as a whole: busy >= BUSY_MAX of all cores, or steal >=
  STEAL_MAX (from /proc/stat, host-wide, judged only for runs of at least MIN_RUN_S: the kernel counts in 10 ms
  ticks, too coarse for shorter runs).
A host-bound run is flagged in runs.csv (`host_bound`: why); with `--host-guard repeat` (the default of a
`--parallel` sweep, where other labs share the host) it is run again (HOST_ATTEMPTS in all) and the flagged attempts
are kept in host-bound.csv, never counted as results. On one lab the default is `flag`: there the load is mostly the
run's own (a 100 Mbit/s QUIC transfer keeps a core busy), and running it again would meet the same host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BUSY_MAX = 0.95
STEAL_MAX = 0.10
MIN_RUN_S = 1.0
#: Attempts of a run while it is host-bound (the last one is recorded, flagged, if all were).
HOST_ATTEMPTS = 3
GUARDS = ("repeat", "flag", "off")


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all cores in USER_HZ ticks (/proc/stat's first line)."""

    total: int
    idle: int  # idle + iowait
    steal: int


def parse_stat(text: str) -> CpuTimes:
    """/proc/stat's aggregate `cpu` line: user nice system idle iowait irq softirq steal [guest guest_nice]."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:]]
            v += [0] * (8 - len(v))
            # guest time is already counted in user (and guest_nice in nice): not added twice
            return CpuTimes(total=sum(v[:8]), idle=v[3] + v[4], steal=v[7])
    raise ValueError("no aggregate cpu line in /proc/stat")


def sample(path: Path = Path("/proc/stat")) -> CpuTimes | None:
    try:
        return parse_stat(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Load:
    busy: float  # share of all cores' time not idle (steal included: time the cores were not ours)
    steal: float


def between(before: CpuTimes | None, after: CpuTimes | None) -> Load | None:
    if before is None or after is None:
        return None
    total = after.total - before.total
    if total <= 0:
        return None
    return Load(busy=1 - (after.idle - before.idle) / total, steal=(after.steal - before.steal) / total)


def verdict(load: Load | None, run_s: float, host_drops: int | None) -> str:
    """Why the host was the bottleneck during a run ("" when it was not, or cannot be told)."""
    if host_drops:
        return f"the emulator dropped {host_drops} packets it could not forward in time (TUN queue/write)"
    if load is None or run_s < MIN_RUN_S:
        return ""
    if load.steal >= STEAL_MAX:
        return f"CPU steal {load.steal:.0%} of the run (>= {STEAL_MAX:.0%})"
    if load.busy >= BUSY_MAX:
        return f"host CPUs {load.busy:.0%} busy during the run (>= {BUSY_MAX:.0%})"
    return ""
