"""Link spec settings for the queue discipline and the netem-like stages (the rest is in lab/link/spec.py).

  jitter_interval  with order kept, how long each delay value holds: 25ms (default 5 x jitter, at least 1 ms)
  reorder_prob     netem reordering: this share of packets skips the delay: 25% (needs a delay)
  reorder_gap      ... only once gap-1 packets were delayed normally: 5 (default 1)
  duplicate        share of packets sent twice: 1%
  corrupt          share of packets with one bit flipped (the receiver drops them): 0.1%
  loss_after       Bernoulli loss after the link (the lost packet used link time): 1%
  ge_after         Gilbert-Elliott loss after the link, p,r[,loss_good,loss_bad] in %
  loss_ecn         yes: a loss event marks an ECN-capable packet CE instead of dropping it (netem `ecn`)
  qdisc            the queue discipline: drop_tail (default) | drop_head | codel | fq_codel | pie, with parameters
                   after colons, e.g. codel:target=5ms:interval=100ms:ecn=yes, fq_codel:flows=1024:quantum=1500,
                   pie:target=15ms:tupdate=15ms:alpha=0.125:beta=1.25:burst=150ms:ecn=no:bytemode=no
  slot             netem slots: DELAY[:JITTER[:DIST]][:packets=N][:bytes=SIZE], e.g. 5ms:1ms:packets=8
  overhead         bytes added to each packet for the rate (may be negative): 14
  mpu              minimum length a packet takes on the link, in bytes: 64
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

from lab.errors import UsageError
from lab.link.model import (
    QDISC_KINDS,
    Bernoulli,
    Codel,
    DropHead,
    DropTail,
    FqCodel,
    GilbertElliott,
    JitterDist,
    NoLoss,
    Pie,
    Slot,
)
from lab.link.units import parse_duration, parse_percent
from lab.sizes import parse_size

STAGE_KEYS = ("jitter_interval", "reorder_prob", "reorder_gap", "duplicate", "corrupt", "loss_after", "ge_after",
              "loss_ecn", "qdisc", "slot", "overhead", "mpu")
_TRUE = {"yes", "true", "on", "1"}
_FALSE = {"no", "false", "off", "0"}


def parse_stages(s: Mapping[str, str], name: str, gilbert_elliott: Callable[[str, str], GilbertElliott]
                 ) -> dict[str, Any]:
    """Direction fields for the stage keys in `s` (values already strings); `name` is the direction, for errors."""
    d: dict[str, Any] = {}
    if "jitter_interval" in s:
        d["jitter_interval_s"] = _positive_duration(s["jitter_interval"], f"{name} jitter_interval")
    if "reorder_prob" in s:
        d["reorder_prob"] = parse_percent(s["reorder_prob"], f"{name} reorder_prob")
    if "reorder_gap" in s:
        d["reorder_gap"] = _int(s["reorder_gap"], f"{name} reorder_gap", 1, 2**32 - 1)
    for key in ("duplicate", "corrupt"):
        if key in s:
            d[key] = parse_percent(s[key], f"{name} {key}")
    if "loss_after" in s and "ge_after" in s:
        raise UsageError(f"give either loss_after or ge_after for the {name}, not both")
    if "loss_after" in s:
        p = parse_percent(s["loss_after"], f"{name} loss_after")
        d["loss_after"] = Bernoulli(p=p) if p > 0 else NoLoss()
    if "ge_after" in s:
        d["loss_after"] = gilbert_elliott(s["ge_after"], name)
    if "loss_ecn" in s:
        d["loss_ecn"] = _bool(s["loss_ecn"], f"{name} loss_ecn")
    if "qdisc" in s:
        d["qdisc"] = parse_qdisc(s["qdisc"], name)
    if "slot" in s:
        d["slot"] = parse_slot(s["slot"], name)
    if "overhead" in s:
        d["overhead_bytes"] = _int(s["overhead"], f"{name} overhead", -1500, 65535)
    if "mpu" in s:
        d["mpu_bytes"] = _int(s["mpu"], f"{name} mpu", 0, 65535)
    return d


# qdisc parameter -> (model field, parser); parsers get (value, what).
_Parser = Callable[[str, str], Any]
_QDISC_PARAMS: dict[str, dict[str, tuple[str, _Parser]]] = {
    "drop_tail": {},
    "drop_head": {},
    "codel": {"target": ("target_s", lambda v, w: _positive_duration(v, w)),
              "interval": ("interval_s", lambda v, w: _positive_duration(v, w)),
              "ecn": ("ecn", lambda v, w: _bool(v, w))},
    "fq_codel": {"target": ("target_s", lambda v, w: _positive_duration(v, w)),
                 "interval": ("interval_s", lambda v, w: _positive_duration(v, w)),
                 "ecn": ("ecn", lambda v, w: _bool(v, w)),
                 "flows": ("flows", lambda v, w: _int(v, w, 1, 65536)),
                 "quantum": ("quantum", lambda v, w: _int(v, w, 256, 1 << 20))},
    "pie": {"target": ("target_s", lambda v, w: _positive_duration(v, w)),
            "tupdate": ("tupdate_s", lambda v, w: _duration_at_least(v, w, 0.001)),
            "alpha": ("alpha", lambda v, w: _float(v, w, 0.0, 2.0)),
            "beta": ("beta", lambda v, w: _float(v, w, 0.0, 2.0)),
            "burst": ("max_burst_s", lambda v, w: parse_duration(v, w)),
            "ecn": ("ecn", lambda v, w: _bool(v, w)),
            "bytemode": ("bytemode", lambda v, w: _bool(v, w))},
}
_QDISC_MODELS = {"drop_tail": DropTail, "drop_head": DropHead, "codel": Codel, "fq_codel": FqCodel, "pie": Pie}


def parse_qdisc(v: str, name: str) -> DropTail | DropHead | Codel | FqCodel | Pie:
    """'fq_codel', 'codel:target=5ms:ecn=yes', 'pie:target=20ms' -> the queue discipline."""
    kind, *params = v.strip().split(":")
    if kind not in QDISC_KINDS:
        raise UsageError(f"invalid {name} qdisc {v!r}: the kind must be one of {', '.join(QDISC_KINDS)}")
    allowed = _QDISC_PARAMS[kind]
    fields: dict[str, Any] = {}
    for p in params:
        key, sep, value = p.partition("=")
        if not sep or key not in allowed:
            hint = f"allowed are {', '.join(allowed)}" if allowed else f"{kind} takes none"
            raise UsageError(f"invalid {name} qdisc parameter {p!r}: expected key=value, {hint}")
        field, parse = allowed[key]
        fields[field] = parse(value, f"{name} qdisc {key}")
    return _QDISC_MODELS[kind](**fields)


def parse_slot(v: str, name: str) -> Slot:
    """'5ms', '5ms:1ms', '5ms:1ms:normal:packets=8:bytes=12kB' -> slots."""
    what = f"{name} slot"
    form = "expected DELAY[:JITTER[:DIST]][:packets=N][:bytes=SIZE], e.g. 5ms:1ms:packets=8"
    positional: list[str] = []
    kv: dict[str, str] = {}
    for part in v.strip().split(":"):
        key, sep, value = part.partition("=")
        if not sep:
            positional.append(part)
        elif key in ("jitter", "dist", "packets", "bytes"):
            kv[key] = value
        else:
            raise UsageError(f"invalid {what} setting {part!r}: {form}")
    if not 1 <= len(positional) <= 3:
        raise UsageError(f"invalid {what} {v!r}: {form}")
    fields: dict[str, Any] = {"delay_s": _positive_duration(positional[0], f"{what} delay")}
    jitter = kv.get("jitter", positional[1] if len(positional) > 1 else "0")
    fields["jitter_s"] = parse_duration(jitter, f"{what} jitter")
    dist = kv.get("dist", positional[2] if len(positional) > 2 else "uniform")
    allowed = get_args(JitterDist)
    if dist not in allowed:
        raise UsageError(f"invalid {what} dist {dist!r}: allowed are {', '.join(allowed)}")
    fields["dist"] = dist
    if "packets" in kv:
        fields["packets"] = _int(kv["packets"], f"{what} packets", 1, 2**32 - 1)
    if "bytes" in kv:
        fields["bytes"] = parse_size(kv["bytes"])
        if fields["bytes"] < 1:
            raise UsageError(f"invalid {what} bytes {kv['bytes']!r}: must be at least 1 byte")
    return Slot(**fields)


def _bool(v: str, what: str) -> bool:
    if v.strip().lower() in _TRUE:
        return True
    if v.strip().lower() in _FALSE:
        return False
    raise UsageError(f"invalid {what} {v!r}: expected yes or no")


def _int(v: str, what: str, lo: int, hi: int) -> int:
    try:
        n = int(v.strip())
    except ValueError:
        raise UsageError(f"invalid {what} {v!r}: expected a whole number") from None
    if not lo <= n <= hi:
        raise UsageError(f"invalid {what} {v!r}: allowed is {lo}..{hi}")
    return n


def _float(v: str, what: str, lo: float, hi: float) -> float:
    try:
        x = float(v.strip())
    except ValueError:
        raise UsageError(f"invalid {what} {v!r}: expected a number") from None
    if not lo <= x <= hi:
        raise UsageError(f"invalid {what} {v!r}: allowed is {lo:g}..{hi:g}")
    return x


def _positive_duration(v: str, what: str) -> float:
    return _duration_at_least(v, what, 1e-6)


def _duration_at_least(v: str, what: str, lo: float) -> float:
    s = parse_duration(v, what)
    if s < lo:
        raise UsageError(f"invalid {what} {v!r}: must be at least {lo * 1e6:g} us")
    return s
