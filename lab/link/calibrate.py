"""The lab's own path: what the veths, the bridge, the router's forwarding (and, through linkem, its TUN hops) add
to every round trip, measured once per router start and subtracted from the configured delays, so that a
configured RTT is the RTT the endpoints measure.

Measured with the link unimpaired, on the path the shaper uses (`linkem` through the TUN devices, `kernel` for
netem): 100 pings client -> server 10 ms apart; the median RTT is the base path, split evenly between the two
directions (they cross the same hops). Each backend then adds `delay - base/2` per direction (never below 0:
a configured delay shorter than the lab's own path cannot be had). The result is kept in
`results/calibration.json` with the identity of the router's start, and measured again after the router
restarted. QUICLAB_CALIBRATE=off turns the subtraction off (the measurement is then not made).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from python_on_whales.exceptions import DockerException

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.link import linkem, router
from lab.link.model import Link

ENV_CALIBRATE = "QUICLAB_CALIBRATE"  # "off": no base-path subtraction
STATE_FILE = config.ROOT / "results" / "calibration.json"
PINGS = 100
PING_INTERVAL_S = 0.01

Path = Literal["linkem", "kernel"]


@dataclass(frozen=True)
class BasePath:
    """What the lab's own path adds, per round trip and per direction."""

    path: str             # linkem | kernel
    rtt_median_s: float   # the base path
    rtt_min_s: float
    rtt_p90_s: float
    samples: int
    down_s: float         # subtracted from the downlink's delay
    up_s: float           # subtracted from the uplink's delay
    measured_at: str      # ISO 8601, UTC
    router_start: str     # identity of the router's start it was measured in

    def line(self) -> str:
        ms = 1e3
        return (f"lab path ({self.path}, measured {self.measured_at}): base RTT median {self.rtt_median_s * ms:.3f} ms "
                f"(min {self.rtt_min_s * ms:.3f}, p90 {self.rtt_p90_s * ms:.3f}, {self.samples} pings); subtracted "
                f"per direction: down {self.down_s * ms:.3f} ms, up {self.up_s * ms:.3f} ms")


_cache: dict[str, BasePath] = {}


def enabled() -> bool:
    return config.setting(ENV_CALIBRATE, "on").strip().lower() not in ("off", "0", "no", "false")


def path_delays(path: Path) -> tuple[float, float]:
    """(downlink, uplink) seconds the lab's own path adds on `path`; (0, 0) when calibration is off."""
    if not enabled():
        return (0.0, 0.0)
    bp = ensure(path)
    return (bp.down_s, bp.up_s)


def ensure(path: Path) -> BasePath:
    """The base path of `path` for the router's current start: kept, or measured now."""
    if path in _cache:
        return _cache[path]
    start = router.start_identity()
    stored = load().get(path)
    bp = stored if stored is not None and stored.router_start == start else measure(path, start)
    _cache[path] = bp
    return bp


def measure(path: Path, router_start: str | None = None, restore: bool = False) -> BasePath:
    """Measure the base path of `path` now (the link unimpaired meanwhile) and keep it; `restore`: put the link
    that was in force back afterwards (with the new subtraction)."""
    previous = router.path(fresh=True)
    before = linkem.current_json() if restore else None
    linkem.apply(Link())
    router.set_path(path)
    try:
        out = docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(PINGS), "-i", str(PING_INTERVAL_S),
                                                        "-W", "1", config.SERVER_IP])
    except DockerException as e:
        raise EnvironmentProblem(f"cannot measure the lab's own path: ping client -> server failed "
                                 f"({(e.stderr or '').strip() or e})") from None
    finally:
        if previous != path:
            router.set_path(previous)
    rtts = sorted(float(x) / 1e3 for x in re.findall(r"time=([\d.]+) ms", out))
    if len(rtts) < PINGS // 2:
        raise EnvironmentProblem(f"cannot measure the lab's own path: {len(rtts)} of {PINGS} pings answered")
    median = statistics.median(rtts)
    bp = BasePath(path=path, rtt_median_s=median, rtt_min_s=rtts[0], rtt_p90_s=rtts[int(0.9 * (len(rtts) - 1))],
                  samples=len(rtts), down_s=median / 2, up_s=median / 2,
                  measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  router_start=router_start or router.start_identity())
    save(bp)
    _cache[path] = bp
    if before is not None:
        before["keep_state"] = False
        before["downlink"]["path_delay_us"] = round(bp.down_s * 1e6) if path == "linkem" else 0
        before["uplink"]["path_delay_us"] = round(bp.up_s * 1e6) if path == "linkem" else 0
        linkem.put_json(before)
    return bp


def load() -> dict[str, BasePath]:
    try:
        doc = json.loads(STATE_FILE.read_text())
        return {k: BasePath(**v) for k, v in doc.items()}
    except (OSError, ValueError, TypeError):
        return {}


def save(bp: BasePath) -> None:
    doc = {k: asdict(v) for k, v in load().items()}
    doc[bp.path] = asdict(bp)
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(STATE_FILE)


def manifest_facts() -> dict[str, Any]:
    """For a sweep's manifest: whether the base path is subtracted, and each measured path (as kept)."""
    return {"enabled": enabled(), "paths": {k: asdict(v) for k, v in load().items()}}


def forget() -> None:
    """Drop what this process cached (the next use checks the router's start again)."""
    _cache.clear()
