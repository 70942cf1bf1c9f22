"""The lab's own path: what the veths, the bridge, the router's forwarding (and, through linkem, its TUN hops) add
to every round trip, measured once per router start and subtracted from the configured delays, so that a
configured RTT is the RTT the endpoints measure.

Measured with the link unimpaired, on the path the shaper uses (`linkem` through the TUN devices, `kernel` for
netem): 100 pings client -> server 10 ms apart; the lower quartile of their RTTs is the base path (on a quiet host
within ~0.1 ms of the median; a busy host's bursts only lengthen the upper part, so the lower quartile does not
take them for the path and overcorrect), split evenly between the two directions (they cross the same hops).
Each backend then adds `delay - base/2` per direction (never below 0: a configured delay shorter than the lab's
own path cannot be had). The result is kept in `results/calibration.json` with the identity of the router's
start, and measured again after the router restarted. A measurement that another lab user's link change or a busy
host disturbed (a base path above 2 ms) is repeated, up to 3 times; then nothing is subtracted (said by `quiclab
shape --show`) and the next process measures again. QUICLAB_CALIBRATE=off turns the subtraction off.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.link import linkem, napi, netem, router
from lab.link.model import Direction, Link
from lab.quantiles import quantiles

ENV_CALIBRATE = "QUICLAB_CALIBRATE"  # "off": no base-path subtraction
STATE_FILE = config.ROOT / "results" / "calibration.json"
PINGS = 100
PING_INTERVAL_S = 0.01
ATTEMPTS = 3
#: A base path longer than this (lower quartile) is not the lab's own path but a busy host or another lab user's
#: link: it is not subtracted (a quiet host measures 0.15-0.4 ms).
MAX_BASE_RTT_S = 0.002

Path = Literal["linkem", "kernel"]


@dataclass(frozen=True)
class BasePath:
    """What the lab's own path adds, per round trip and per direction."""

    path: str             # linkem | kernel
    rtt_median_s: float
    rtt_min_s: float
    rtt_p90_s: float
    samples: int
    rtt_q25_s: float      # the base path: subtracted, half per direction
    down_s: float         # subtracted from the downlink's delay
    up_s: float           # subtracted from the uplink's delay
    measured_at: str      # ISO 8601, UTC
    router_start: str     # identity of the router's start it was measured in
    note: str = ""        # why nothing is subtracted, if so

    def line(self) -> str:
        ms = 1e3
        if self.note:
            return f"lab path ({self.path}): not subtracted: {self.note}"
        forwarding = self.router_start.split(" ", 1)[1] if " " in self.router_start else ""
        where = f"{self.path}, {forwarding} forwarding" if forwarding else self.path
        return (f"lab path ({where}, measured {self.measured_at}): base RTT lower quartile "
                f"{self.rtt_q25_s * ms:.3f} ms (min {self.rtt_min_s * ms:.3f}, median {self.rtt_median_s * ms:.3f}, "
                f"p90 {self.rtt_p90_s * ms:.3f}, {self.samples} pings); subtracted per direction: down "
                f"{self.down_s * ms:.3f} ms, up {self.up_s * ms:.3f} ms")


_cache: dict[str, BasePath] = {}
_cache_of = 0  # napi.changes() when _cache was filled


def enabled() -> bool:
    return config.setting(ENV_CALIBRATE, "on").strip().lower() not in ("off", "0", "no", "false")


def path_delays(path: Path) -> tuple[float, float]:
    """(downlink, uplink) seconds the lab's own path adds on `path`; (0, 0) when calibration is off."""
    if not enabled():
        return (0.0, 0.0)
    bp = ensure(path)
    return (bp.down_s, bp.up_s)


def identity(path: Path) -> str:
    """What a kept measurement must have been measured in: the router's current start and, through linkem, how
    its kernel forwards what linkem writes (lab/link/napi.py: a threaded NAPI hop is part of the lab's own path)."""
    start = router.start_identity()
    return f"{start} {napi.mode()}" if path == "linkem" else start


def ensure(path: Path) -> BasePath:
    """The base path of `path` for the router's current start and forwarding: kept, or measured now."""
    if _cache_of != napi.changes():  # the forwarding changed since: the lab's own path is another now
        forget()
    if path in _cache:
        return _cache[path]
    start = identity(path)
    stored = load().get(path)
    if stored is not None and stored.router_start == start:
        _cache[path] = stored
        return stored
    why = ""
    for _ in range(ATTEMPTS):
        try:
            return measure(path, start)
        except Disturbed as e:
            why = str(e)
    # Not kept: the next process measures again. Nothing is subtracted meanwhile.
    bp = BasePath(path=path, rtt_median_s=0.0, rtt_min_s=0.0, rtt_p90_s=0.0, samples=0, rtt_q25_s=0.0, down_s=0.0,
                  up_s=0.0, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), router_start=start,
                  note=f"{ATTEMPTS} measurements disturbed ({why}); run `quiclab shape --calibrate` on a quiet lab")
    _cache[path] = bp
    return bp


class Disturbed(EnvironmentProblem):
    """The measurement did not see the lab's own path (another user changed the link, or the host was too busy)."""


def measure(path: Path, router_start: str | None = None, restore: bool = False) -> BasePath:
    """Measure the base path of `path` now (the link unimpaired meanwhile) and keep it; `restore`: put the link
    that was in force back afterwards (with the new subtraction)."""
    previous = router.path(fresh=True)
    before = linkem.current_json() if restore else None
    unimpaired = linkem.apply(Link())
    router.set_path(path)
    through_netem = path == "kernel" and router.has_netem()
    if through_netem:
        _netem_probe(on=True)
    try:
        out = docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(PINGS), "-i", str(PING_INTERVAL_S),
                                                        "-W", "1", config.SERVER_IP])
    except docker.DockerError as e:
        raise EnvironmentProblem(f"cannot measure the lab's own path: ping client -> server failed "
                                 f"({e.reason()})") from None
    finally:
        if through_netem:
            _netem_probe(on=False)
        if previous != path:
            router.set_path(previous)
    probe = 2 * NETEM_PROBE_DELAY_S if through_netem else 0.0
    rtts = sorted(float(x) / 1e3 - probe for x in re.findall(r"time=([\d.]+) ms", out))
    if len(rtts) < PINGS // 2:
        raise Disturbed(f"{len(rtts)} of {PINGS} pings answered")
    if linkem.current() != unimpaired:
        raise Disturbed("another user of the lab changed the link during the measurement")
    q25, med, p90 = quantiles(rtts, (0.25, 0.5, 0.9))
    if q25 > MAX_BASE_RTT_S:
        raise Disturbed(f"lower quartile {q25 * 1e3:.2f} ms, more than the lab's own path can be "
                        f"({MAX_BASE_RTT_S * 1e3:g} ms): a busy host")
    bp = BasePath(path=path, rtt_median_s=med, rtt_min_s=rtts[0],
                  rtt_p90_s=p90, samples=len(rtts), rtt_q25_s=q25,
                  down_s=q25 / 2, up_s=q25 / 2,
                  measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  router_start=router_start or identity(path))
    save(bp)
    _cache[path] = bp
    if before is not None:
        before["keep_state"] = False
        before["downlink"]["path_delay_us"] = round(bp.down_s * 1e6) if path == "linkem" else 0
        before["uplink"]["path_delay_us"] = round(bp.up_s * 1e6) if path == "linkem" else 0
        linkem.put_json(before)
    return bp


#: The netem path is measured through netem itself, each direction delayed this much (then taken off again): a
#: delayed packet leaves when netem's timer fires, and how late that is belongs to the path (microseconds on real
#: hardware; in a VM under TCG ~0.5-1 ms per round trip, which made a configured 10 ms measure 10.6-11.3 ms).
NETEM_PROBE_DELAY_S = 0.001


def _netem_probe(*, on: bool) -> None:
    ifs = router.interfaces()
    probe = Link(downlink=Direction(delay_s=NETEM_PROBE_DELAY_S), uplink=Direction(delay_s=NETEM_PROBE_DELAY_S))
    commands = netem.plan(probe, ifs.client_side, ifs.server_side).commands if on else []
    router.run_script(netem.apply_script(commands, ifs.client_side, ifs.server_side),
                      "cannot measure the lab's own path through netem: tc failed")


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
    global _cache_of
    _cache.clear()
    _cache_of = napi.changes()
