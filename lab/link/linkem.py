"""The linkem backend: our userspace emulator in the router, configured over its HTTP control API.

The host reaches it on the management network (10.71.3.254:9100 in the default lab; each lab has its own address,
lab/instance.py); where the host cannot reach container addresses (e.g. a remote Docker), the same request goes
through `docker exec router curl`.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from typing import Any

from lab import config, docker
from lab.errors import EnvironmentProblem, UsageError
from lab.link.model import Codel, Direction, DropHead, DropTail, FqCodel, Link, Pie, Qdisc

CONTROL_URL = f"http://{config.ROUTER_MGMT_IP}:{config.LINKEM_PORT}"
LOCAL_URL = f"http://127.0.0.1:{config.LINKEM_PORT}"


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _ms(seconds: float) -> int:
    return round(seconds * 1e3)


def _qdisc_json(q: Qdisc) -> dict[str, Any]:
    if isinstance(q, Codel | FqCodel):
        extra = {"flows": q.flows, "quantum": q.quantum} if isinstance(q, FqCodel) else {}
        return {"kind": q.kind, "target_us": _us(q.target_s), "interval_us": _us(q.interval_s), "ecn": q.ecn, **extra}
    if isinstance(q, Pie):
        return {"kind": q.kind, "target_us": _us(q.target_s), "tupdate_us": _us(q.tupdate_s), "alpha": q.alpha,
                "beta": q.beta, "max_burst_us": _us(q.max_burst_s), "ecn": q.ecn, "bytemode": q.bytemode}
    return {"kind": q.kind}


def _qdisc_model(j: dict[str, Any] | None) -> Qdisc:
    j = j or {"kind": "drop_tail"}
    kind = j.get("kind", "drop_tail")
    if kind in ("codel", "fq_codel"):
        extra = {"flows": j["flows"], "quantum": j["quantum"]} if kind == "fq_codel" else {}
        return (Codel if kind == "codel" else FqCodel)(
            target_s=j["target_us"] / 1e6, interval_s=j["interval_us"] / 1e6, ecn=j["ecn"], **extra)
    if kind == "pie":
        return Pie(target_s=j["target_us"] / 1e6, tupdate_s=j["tupdate_us"] / 1e6, alpha=j["alpha"], beta=j["beta"],
                   max_burst_s=j["max_burst_us"] / 1e6, ecn=j["ecn"], bytemode=j["bytemode"])
    return DropHead() if kind == "drop_head" else DropTail()


def direction_json(d: Direction, queue_bytes: int | None, path_delay_s: float = 0.0) -> dict[str, Any]:
    """One direction of linkem's JSON; `queue_bytes` is the byte limit in force (`Link.queue_limit_bytes`),
    `path_delay_s` the part of the delay the lab's own path already adds (calibration, lab/link/calibrate.py)."""
    return {
        "rate_bps": d.rate_bps,
        "delay_us": _us(d.delay_s),
        "path_delay_us": min(_us(path_delay_s), _us(d.delay_s)),
        "jitter_us": _us(d.jitter_s),
        "jitter_dist": d.jitter_dist,
        "jitter_interval_us": None if d.jitter_interval_s is None else _us(d.jitter_interval_s),
        "reorder": d.reorder,
        "reorder_prob": d.reorder_prob,
        "reorder_gap": d.reorder_gap,
        "loss": d.loss.model_dump(),
        "loss_after": d.loss_after.model_dump(),
        "loss_ecn": d.loss_ecn,
        "duplicate": d.duplicate,
        "corrupt": d.corrupt,
        "queue_limit_packets": d.queue_packets,
        "queue_limit_bytes": queue_bytes,
        "qdisc": _qdisc_json(d.qdisc),
        "overhead_bytes": d.overhead_bytes,
        "mpu_bytes": d.mpu_bytes,
        "slot": None if d.slot is None else {
            "delay_us": _us(d.slot.delay_s), "jitter_us": _us(d.slot.jitter_s), "dist": d.slot.dist,
            "packets": d.slot.packets, "bytes": d.slot.bytes},
        "outages": None if d.outage is None else {
            "period_ms": _ms(d.outage.period_s), "down_ms": _ms(d.outage.down_s), "offset_ms": _ms(d.outage.offset_s)},
        "rate_schedule": None if d.rate_schedule is None else {
            "period_ms": _ms(d.rate_schedule.period_s),
            "steps": [[_ms(t), r] for t, r in d.rate_schedule.steps]},
        "trace_ms": d.trace_ms,
    }


#: Fields newer linkem versions added, and their defaults: left out of a PUT while at the default, so that a link
#: that uses none of them is also accepted by an older linkem (which rejects unknown fields).
_NEWER_FIELDS: dict[str, Any] = {
    "path_delay_us": 0, "jitter_interval_us": None, "reorder_prob": 0.0, "reorder_gap": 1,
    "loss_after": {"model": "none"}, "loss_ecn": False, "duplicate": 0.0, "corrupt": 0.0,
    "qdisc": {"kind": "drop_tail"}, "overhead_bytes": 0, "mpu_bytes": 0, "slot": None,
}


def _without_defaults(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in _NEWER_FIELDS or v != _NEWER_FIELDS[k]}


def to_json(link: Link, path_delay_s: tuple[float, float] = (0.0, 0.0)) -> dict[str, Any]:
    """The exact JSON linkem's PUT /config takes (linkem/README.md, 'JSON contract'); `path_delay_s` = (downlink,
    uplink) delay the lab's own path adds, which linkem then does not add again. Newer fields at their defaults
    are left out (same meaning, and an older linkem accepts the document)."""
    doc: dict[str, Any] = {"seed": link.seed}
    if link.keep_state:
        doc["keep_state"] = True
    doc["downlink"] = _without_defaults(direction_json(link.downlink, link.queue_limit_bytes(link.downlink),
                                                       path_delay_s[0]))
    doc["uplink"] = _without_defaults(direction_json(link.uplink, link.queue_limit_bytes(link.uplink),
                                                     path_delay_s[1]))
    return doc


def record_json(link: Link) -> dict[str, Any]:
    """to_json as a run's record keeps it (runs.csv `link`): a trace's entries (up to millions) as their count,
    period and SHA-256 (of the entries as mahimahi writes them, one per line), the rest as it is."""
    doc = to_json(link)
    for name, d in (("downlink", link.downlink), ("uplink", link.uplink)):
        if d.trace_ms:
            text = "".join(f"{t}\n" for t in d.trace_ms).encode()
            doc[name]["trace_ms"] = {"entries": len(d.trace_ms), "period_ms": d.trace_ms[-1],
                                     "sha256": hashlib.sha256(text).hexdigest()}
    return doc


def from_json(doc: dict[str, Any]) -> Link:
    """What linkem reports back, in the lab's model (for `quiclab shape --show`). Fields an older linkem does not
    report take their defaults."""

    def direction(j: dict[str, Any]) -> Direction:
        sched = j.get("rate_schedule")
        out = j.get("outages")
        slot = j.get("slot")
        interval = j.get("jitter_interval_us")
        return Direction(
            rate_bps=j.get("rate_bps"), delay_s=j.get("delay_us", 0) / 1e6, jitter_s=j.get("jitter_us", 0) / 1e6,
            jitter_dist=j.get("jitter_dist", "uniform"), reorder=j.get("reorder", False),
            jitter_interval_s=None if interval is None else interval / 1e6,
            reorder_prob=j.get("reorder_prob", 0.0), reorder_gap=j.get("reorder_gap", 1),
            loss=j.get("loss") or {"model": "none"}, loss_after=j.get("loss_after") or {"model": "none"},
            loss_ecn=j.get("loss_ecn", False), duplicate=j.get("duplicate", 0.0), corrupt=j.get("corrupt", 0.0),
            queue_packets=j.get("queue_limit_packets"), queue_bytes=j.get("queue_limit_bytes"),
            qdisc=_qdisc_model(j.get("qdisc")),
            overhead_bytes=j.get("overhead_bytes", 0), mpu_bytes=j.get("mpu_bytes", 0),
            slot=None if not slot else {"delay_s": slot["delay_us"] / 1e6, "jitter_s": slot.get("jitter_us", 0) / 1e6,
                                        "dist": slot.get("dist", "uniform"), "packets": slot.get("packets"),
                                        "bytes": slot.get("bytes")},
            outage=None if not out else {"period_s": out["period_ms"] / 1e3, "down_s": out["down_ms"] / 1e3,
                                         "offset_s": out.get("offset_ms", 0) / 1e3},
            rate_schedule=None if not sched else {"period_s": sched["period_ms"] / 1e3,
                                                  "steps": [(t / 1e3, r) for t, r in sched["steps"]]},
            trace_ms=j.get("trace_ms"),
        )

    return Link(downlink=direction(doc["downlink"]), uplink=direction(doc["uplink"]), seed=doc.get("seed", 1),
                keep_state=doc.get("keep_state", False))


def path_delays_in_force(doc: dict[str, Any]) -> tuple[float, float]:
    """(downlink, uplink) path delay linkem subtracts, s (0 from an older linkem)."""
    return (doc["downlink"].get("path_delay_us", 0) / 1e6, doc["uplink"].get("path_delay_us", 0) / 1e6)


def _request(method: str, path: str, body: bytes | None = None, timeout: float = 5.0) -> str:
    req = urllib.request.Request(CONTROL_URL + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=config.deadline(timeout)) as resp:
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
    except docker.DockerError as e:
        why = e.reason()
        raise EnvironmentProblem(f"linkem in the router ({config.ROUTER_CONTAINER}) is not reachable ({why}): "
                                 "is the lab up? (`quiclab status`)") from None


def apply(link: Link, path_delay_s: tuple[float, float] = (0.0, 0.0)) -> Link:
    """Put the link in force (linkem answers once its loop has applied it) and return what is in force."""
    body = json.dumps(to_json(link, path_delay_s)).encode()
    return from_json(json.loads(_request("PUT", "/config", body)))


def put_json(doc: dict[str, Any]) -> dict[str, Any]:
    """PUT a configuration document as it is (linkem's JSON); returns what is in force."""
    return json.loads(_request("PUT", "/config", json.dumps(doc).encode()))


def current() -> Link:
    return from_json(current_json())


def current_json() -> dict[str, Any]:
    """linkem's GET /config, as JSON."""
    return json.loads(_request("GET", "/config"))


def metrics_text() -> str:
    return _request("GET", "/metrics")
