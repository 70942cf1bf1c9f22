"""Link specs as users write them (CLI flags, scenario files): key=value strings -> a validated Link.

Keys (each applies to both directions unless given in a `down`/`up` override):
  rate     bottleneck rate: 500kbit, 10mbit, 1gbit            delay   one-way delay: 20ms, 1.5s (plain = ms)
  rtt      round-trip time; sets delay = rtt/2 per direction   jitter  delay variation: 5ms
  dist     jitter distribution: uniform|normal|pareto|paretonormal
  reorder  yes|no: let jitter reorder packets (default no: order kept)
  loss     Bernoulli loss: 0.1%, 1%, 5%
  ge       Gilbert-Elliott loss "p,r[,loss_good,loss_bad]" in %: e.g. 1%,30% (p good->bad, r bad->good)
  queue    queue limit: 100p (packets), 64kB / 1MiB (bytes) or 1.5bdp (x the path's bandwidth-delay product);
           default one BDP (bytes: packets of different sizes get the same buffer)
  outage   "every:down[:offset]", e.g. 10s:200ms: link down for 200 ms every 10 s
  spikes   "every:duration:percent", e.g. 5s:200ms:10%: rate drops to 10 % for 200 ms every 5 s
  trace    a mahimahi packet-delivery trace file (one ms timestamp per 1500-byte opportunity)
  traces   a recorded pair of traces, both directions (whole link only): NAME of a pair in ../shared/traces beside
           the clone (NAME.down for the downlink, NAME.up for the uplink: mahimahi's naming), or a path stem with a
           "/" (./cell for cell.down and cell.up); e.g. traces = "TMobile-LTE-short"
  seed     random seed for loss and jitter (whole link only)
  keep_state  yes: applying the link continues the random streams in force (whole link only; linkem)
and the stage settings of lab/link/spec_stages.py (qdisc, duplicate, corrupt, reorder_prob, slot, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from lab import config
from lab.errors import UsageError, validation_line
from lab.link.model import Bernoulli, Direction, GilbertElliott, JitterDist, Link, NoLoss, Outage, RateSchedule
from lab.link.spec_stages import STAGE_KEYS, parse_stages
from lab.link.units import parse_duration, parse_percent, parse_rate
from lab.sizes import parse_size

DIRECTION_KEYS = ("rate", "delay", "jitter", "dist", "reorder", "loss", "ge", "queue", "outage", "spikes", "trace",
                  *STAGE_KEYS)
LINK_KEYS = ("rtt", "traces", "seed", "keep_state", *DIRECTION_KEYS)
_WHOLE_LINK_ONLY = ("rtt", "traces", "seed", "keep_state")
_TRUE = {"yes", "true", "on", "1"}
_FALSE = {"no", "false", "off", "0"}

Spec = Mapping[str, Any]


def parse_link(common: Spec, down: Spec | None = None, up: Spec | None = None) -> Link:
    _check_keys(common, LINK_KEYS, "link")
    _check_keys(down or {}, DIRECTION_KEYS, "downlink")
    _check_keys(up or {}, DIRECTION_KEYS, "uplink")
    base = {k: v for k, v in common.items() if k not in _WHOLE_LINK_ONLY}
    down, up = dict(down or {}), dict(up or {})
    if "traces" in common:
        if "trace" in base or "trace" in down or "trace" in up:
            raise UsageError("give either traces (a pair: both directions) or trace, not both")
        down["trace"], up["trace"] = (str(p) for p in trace_pair(str(common["traces"])))
    if "rtt" in common:
        if "delay" in common:
            raise UsageError("give either rtt or delay, not both (rtt sets delay = rtt/2 in each direction)")
        base["delay"] = f"{parse_duration(str(common['rtt']), 'rtt') / 2}s"
    seed = _int(common.get("seed", 1), "seed", 0, 2**64 - 1)
    keep = common.get("keep_state", False)
    keep_state = keep if isinstance(keep, bool) else _bool(str(keep), "keep_state")
    try:
        return Link(
            downlink=_direction({**base, **down}, "downlink"),
            uplink=_direction({**base, **up}, "uplink"),
            seed=seed,
            keep_state=keep_state,
        )
    except ValidationError as e:
        raise UsageError(_one_line(e)) from None


def parse_assignments(items: list[str], what: str) -> dict[str, str]:
    """['rate=5mbit', 'loss=1%'] or ['rate=5mbit,loss=1%'] -> {'rate': '5mbit', 'loss': '1%'}."""
    out: dict[str, str] = {}
    for item in items:
        for part in item.split(";") if ";" in item else _split_commas(item):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise UsageError(f"invalid {what} setting {part!r}: expected key=value, e.g. rate=5mbit")
            out[key.strip()] = value.strip()
    return out


def _split_commas(item: str) -> list[str]:
    # 'ge=1%,30%,rate=5mbit': a comma starts a new setting only when what follows looks like key=...
    parts: list[str] = []
    for chunk in item.split(","):
        if parts and "=" not in chunk:
            parts[-1] += "," + chunk
        else:
            parts.append(chunk)
    return parts


def _check_keys(spec: Spec, allowed: tuple[str, ...], where: str) -> None:
    for k in spec:
        if k not in allowed:
            raise UsageError(f"unknown {where} parameter {k!r}: allowed are {', '.join(allowed)}")


def _direction(spec: Spec, name: str) -> Direction:
    d: dict[str, Any] = {}
    s = {k: str(v) if not isinstance(v, bool) else ("yes" if v else "no") for k, v in spec.items()}
    if "rate" in s:
        d["rate_bps"] = parse_rate(s["rate"], f"{name} rate")
    if "delay" in s:
        d["delay_s"] = parse_duration(s["delay"], f"{name} delay")
    if "jitter" in s:
        d["jitter_s"] = parse_duration(s["jitter"], f"{name} jitter")
    if "dist" in s:
        d["jitter_dist"] = _dist(s["dist"], name)
    if "reorder" in s:
        d["reorder"] = _bool(s["reorder"], f"{name} reorder")
    if "loss" in s and "ge" in s:
        raise UsageError(f"give either loss or ge for the {name}, not both")
    if "loss" in s:
        p = parse_percent(s["loss"], f"{name} loss")
        d["loss"] = Bernoulli(p=p) if p > 0 else NoLoss()
    if "ge" in s:
        d["loss"] = _gilbert_elliott(s["ge"], name)
    if "queue" in s:
        d.update(_queue(s["queue"], name))
    if "outage" in s:
        d["outage"] = _outage(s["outage"], name)
    if "spikes" in s:
        d["rate_schedule"] = _spikes(s["spikes"], d.get("rate_bps"), name)
    if "trace" in s:
        d["trace_ms"] = read_trace(Path(s["trace"]))
    d.update(parse_stages(s, name, _gilbert_elliott))
    return Direction(**d)


def _dist(v: str, name: str) -> str:
    allowed = get_args(JitterDist)
    if v not in allowed:
        raise UsageError(f"invalid {name} dist {v!r}: allowed are {', '.join(allowed)}")
    return v


def _bool(v: str, what: str) -> bool:
    if v.lower() in _TRUE:
        return True
    if v.lower() in _FALSE:
        return False
    raise UsageError(f"invalid {what} {v!r}: expected yes or no")


def _int(v: object, what: str, lo: int, hi: int) -> int:
    try:
        n = int(str(v))
    except ValueError:
        raise UsageError(f"invalid {what} {v!r}: expected a whole number") from None
    if not lo <= n <= hi:
        raise UsageError(f"invalid {what} {v!r}: allowed is {lo}..{hi}")
    return n


def _gilbert_elliott(v: str, name: str) -> GilbertElliott:
    parts = [p for p in v.split(",") if p.strip()]
    if not 2 <= len(parts) <= 4:
        raise UsageError(f"invalid {name} ge {v!r}: expected p,r[,loss_good,loss_bad] in %, e.g. 1%,30%")
    nums = [parse_percent(p, f"{name} ge value") for p in parts]
    if nums[1] == 0:
        raise UsageError(f"invalid {name} ge {v!r}: r (bad->good) must be more than 0%")
    keys = ["p", "r", "loss_good", "loss_bad"]
    return GilbertElliott(**dict(zip(keys, nums, strict=False)))


def _queue(v: str, name: str) -> dict[str, int | float]:
    t = v.strip().lower()
    if t.endswith("bdp"):
        try:
            bdp = float(t[:-3])
        except ValueError:
            bdp = -1.0
        if not 0 < bdp <= 1000:
            raise UsageError(f"invalid {name} queue {v!r}: expected a multiple of the BDP above 0, e.g. 1bdp, 1.5bdp")
        return {"queue_bdp": bdp}
    if t.endswith("p") and t[:-1].isdigit():
        n = int(t[:-1])
        if n <= 0:
            raise UsageError(f"invalid {name} queue {v!r}: must be at least 1 packet")
        return {"queue_packets": n}
    try:
        n = parse_size(v)
    except UsageError:
        raise UsageError(f"invalid {name} queue {v!r}: expected packets (100p), bytes (64kB, 1MiB) "
                         "or BDPs (1.5bdp)") from None
    if n < 1500:
        raise UsageError(f"invalid {name} queue {v!r}: must hold at least one 1500-byte packet")
    return {"queue_bytes": n}


def _outage(v: str, name: str) -> Outage:
    parts = v.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"invalid {name} outage {v!r}: expected every:down[:offset], e.g. 10s:200ms")
    every, down = (parse_duration(p, f"{name} outage time") for p in parts[:2])
    offset = parse_duration(parts[2], f"{name} outage offset") if len(parts) == 3 else 0.0
    if every <= 0 or down > every:
        raise UsageError(f"invalid {name} outage {v!r}: the period must be > 0 and at least the down time")
    return Outage(period_s=every, down_s=down, offset_s=offset)


def _spikes(v: str, rate: int | None, name: str) -> RateSchedule:
    parts = v.split(":")
    if len(parts) != 3:
        raise UsageError(f"invalid {name} spikes {v!r}: expected every:duration:percent, e.g. 5s:200ms:10%")
    if rate is None:
        raise UsageError(f"{name} spikes need a rate to drop from: give rate too")
    every = parse_duration(parts[0], f"{name} spikes period")
    dur = parse_duration(parts[1], f"{name} spikes duration")
    frac = parse_percent(parts[2], f"{name} spikes level")
    if not 0 < dur < every:
        raise UsageError(f"invalid {name} spikes {v!r}: the duration must be > 0 and shorter than the period")
    return RateSchedule(period_s=every, steps=[(0.0, rate), (round(every - dur, 6), round(rate * frac))])


def trace_pair(value: str) -> tuple[Path, Path]:
    """`traces`: the (downlink, uplink) trace files of a recorded pair: NAME in config.TRACES_DIR, or a path stem
    (a value with a "/"). A name not recorded there is an error naming the pairs that are."""
    if "/" in value:
        stem = Path(value)
    else:
        stem = config.TRACES_DIR / value
        if value not in recorded_pairs():
            raise UsageError(f"unknown trace pair {value!r}: allowed are {', '.join(recorded_pairs()) or '(none)'} "
                             f"(recorded in {config.TRACES_DIR}), or a path stem with a '/', e.g. ./cell for "
                             "cell.down and cell.up")
    return stem.with_name(f"{stem.name}.down"), stem.with_name(f"{stem.name}.up")


def recorded_pairs() -> list[str]:
    """The NAMEs of config.TRACES_DIR that have both NAME.down and NAME.up."""
    d = config.TRACES_DIR
    return sorted(p.stem for p in d.glob("*.down") if p.with_suffix(".up").is_file()) if d.is_dir() else []


def read_trace(path: Path) -> list[int]:
    """A mahimahi trace: one whole millisecond per line, never decreasing, ending above 0; errors name the file."""
    try:
        lines = path.read_text().split()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not a text file"
        raise UsageError(f"cannot read trace file {str(path)!r}: {why}") from None
    bad = f"invalid trace file {str(path)!r}"
    times: list[int] = []
    for n, text in enumerate(lines, 1):
        try:
            t = int(text)
        except ValueError:
            raise UsageError(f"{bad}: entry {n} {text!r} is not a whole number of milliseconds") from None
        if t < 0 or (times and t < times[-1]):
            after = f" after {times[-1]}" if times else ""
            raise UsageError(f"{bad}: entry {n} ({t}{after}): timestamps must be >= 0 and never decrease")
        times.append(t)
    if not times or times[-1] <= 0:
        raise UsageError(f"{bad}: expected one millisecond timestamp per line, the last one above 0")
    return times


def _one_line(e: ValidationError) -> str:
    return validation_line(e, "link parameter")
