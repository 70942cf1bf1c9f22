"""The linkem backend: our userspace emulator in the router, configured over its HTTP control API.

The host reaches it on the management network (10.71.3.254:9100); where the host cannot reach container
addresses (e.g. a remote Docker), the same request goes through `docker exec router curl`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from python_on_whales.exceptions import DockerException

from lab import config, docker
from lab.errors import EnvironmentProblem, UsageError
from lab.link.model import Direction, Link

CONTROL_URL = f"http://{config.ROUTER_MGMT_IP}:{config.LINKEM_PORT}"
LOCAL_URL = f"http://127.0.0.1:{config.LINKEM_PORT}"


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _ms(seconds: float) -> int:
    return round(seconds * 1e3)


def direction_json(d: Direction) -> dict[str, Any]:
    return {
        "rate_bps": d.rate_bps,
        "delay_us": _us(d.delay_s),
        "jitter_us": _us(d.jitter_s),
        "jitter_dist": d.jitter_dist,
        "reorder": d.reorder,
        "loss": d.loss.model_dump(),
        "queue_limit_packets": d.queue_packets,
        "queue_limit_bytes": d.queue_limit_bytes if d.queue_packets is None else d.queue_bytes,
        "outages": None if d.outage is None else {
            "period_ms": _ms(d.outage.period_s), "down_ms": _ms(d.outage.down_s), "offset_ms": _ms(d.outage.offset_s)},
        "rate_schedule": None if d.rate_schedule is None else {
            "period_ms": _ms(d.rate_schedule.period_s),
            "steps": [[_ms(t), r] for t, r in d.rate_schedule.steps]},
        "trace_ms": d.trace_ms,
    }


def to_json(link: Link) -> dict[str, Any]:
    """The exact JSON linkem's PUT /config takes (linkem/README.md, 'JSON contract')."""
    return {"seed": link.seed, "downlink": direction_json(link.downlink), "uplink": direction_json(link.uplink)}


def from_json(doc: dict[str, Any]) -> Link:
    """What linkem reports back, in the lab's model (for `quiclab shape --show`)."""

    def direction(j: dict[str, Any]) -> Direction:
        sched = j.get("rate_schedule")
        out = j.get("outages")
        return Direction(
            rate_bps=j.get("rate_bps"), delay_s=j.get("delay_us", 0) / 1e6, jitter_s=j.get("jitter_us", 0) / 1e6,
            jitter_dist=j.get("jitter_dist", "uniform"), reorder=j.get("reorder", False),
            loss=j.get("loss") or {"model": "none"},
            queue_packets=j.get("queue_limit_packets"), queue_bytes=j.get("queue_limit_bytes"),
            outage=None if not out else {"period_s": out["period_ms"] / 1e3, "down_s": out["down_ms"] / 1e3,
                                         "offset_s": out.get("offset_ms", 0) / 1e3},
            rate_schedule=None if not sched else {"period_s": sched["period_ms"] / 1e3,
                                                  "steps": [(t / 1e3, r) for t, r in sched["steps"]]},
            trace_ms=j.get("trace_ms"),
        )

    return Link(downlink=direction(doc["downlink"]), uplink=direction(doc["uplink"]), seed=doc.get("seed", 1))


def _request(method: str, path: str, body: bytes | None = None, timeout: float = 5.0) -> str:
    req = urllib.request.Request(CONTROL_URL + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read().decode()
    except urllib.error.HTTPError as e:
        message = e.read().decode(errors="replace").strip()
        if e.code == 400:
            raise UsageError(f"linkem rejected the link: {message}") from None
        raise EnvironmentProblem(f"linkem answered {e.code} to {method} {path}: {message}") from None
    except (urllib.error.URLError, OSError):
        return _request_via_exec(method, path, body)


def _request_via_exec(method: str, path: str, body: bytes | None) -> str:
    cmd = ["curl", "-sS", "--fail-with-body", "-X", method, LOCAL_URL + path]
    if body is not None:
        cmd[4:4] = ["-H", "Content-Type: application/json", "--data-binary", body.decode()]
    try:
        return docker.exec_in(config.ROUTER_CONTAINER, cmd)
    except DockerException as e:
        raise EnvironmentProblem(f"linkem in the router is not reachable ({(e.stderr or '').strip() or e}): "
                                 "is the lab up? (`quiclab status`)") from None


def apply(link: Link) -> Link:
    """Put the link in force (linkem answers once its loop has applied it) and return what is in force."""
    return from_json(json.loads(_request("PUT", "/config", json.dumps(to_json(link)).encode())))


def current() -> Link:
    return from_json(json.loads(_request("GET", "/config")))


def metrics_text() -> str:
    return _request("GET", "/metrics")
