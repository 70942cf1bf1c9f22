"""The calibrated link as a scenario file `quiclab sweep --scenario FILE` runs (lab/plan/scenario.py's keys):
[link] rtt and jitter (both directions), [link.down] the downlink's rate or trace, queue and random loss,
[link.up] the uplink's rate or trace when it was measured. A trace is written beside the scenario
(NAME.down.trace) and named by its absolute path (the scenario loader reads a trace path as given, from the working
directory). Comments say where each value came from."""

from __future__ import annotations

import re
from pathlib import Path

from lab.calibrate import trace
from lab.calibrate.estimate import Estimate
from lab.errors import UsageError

NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _ms(s: float) -> str:
    return f"{round(s * 1000, 3):g}ms"


def _rate(bps: float) -> str:
    return f"{round(bps / 1e6, 4):g}mbit" if bps >= 1e6 else f"{round(max(1.0, bps) / 1e3, 3):g}kbit"


def _pct(p: float) -> str:
    return f"{round(p * 100, 4):g}%"


def scenario_name(out: Path) -> str:
    stem = out.name.removesuffix(".toml")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-") or "calibrated"
    return name[:80]


def render(e: Estimate, name: str, source: str, traces: dict[str, Path], searched: str = "") -> str:
    """The scenario file's text; `searched`: what the lab search did (empty: first estimates only)."""
    head = (f"# Fitted in the lab by `quiclab calibrate {source} --search` (docs/calibrate.md): {searched}"
            if searched else
            f"# The first estimates of `quiclab calibrate {source}` (not yet searched in the lab: docs/calibrate.md).")
    what = "fitted in the lab" if searched else "first estimates"
    lines = [head,
             *(f"# {n}" for n in e.notes),
             f'name = "{name}"',
             f'description = "Calibrated from {_escape(source)}: {what}"',
             "[link]",
             f'rtt = "{_ms(e.rtt_s)}"']
    common, down, up = link_tables(e, traces)
    lines += [f'{k} = "{_escape(v)}"' for k, v in common.items() if k != "rtt"]
    lines += ["[link.down]", *(f'{k} = "{_escape(v)}"' for k, v in down.items())]
    if up:
        lines += ["[link.up]", *(f'{k} = "{_escape(v)}"' for k, v in up.items())]
    return "\n".join(lines) + "\n"


Table = dict[str, str]


def link_tables(e: Estimate, traces: dict[str, Path] | None = None) -> tuple[Table, Table, Table]:
    """The link of an estimate as scenario settings ([link], [link.down], [link.up]; lab/link/spec.py keys): what
    the scenario file holds, and what the lab search puts in force for a candidate (the same link)."""
    traces = traces or {}
    common = {"rtt": _ms(e.rtt_s), **({"jitter": _ms(e.jitter_s)} if e.jitter_s else {})}
    down: Table = {}
    if "down" in traces:
        down["trace"] = str(traces["down"].resolve())
    elif e.down_rate_bps:
        down["rate"] = _rate(e.down_rate_bps)
    if e.down_queue_bytes:
        down["queue"] = f"{e.down_queue_bytes}B"
    if e.down_loss:
        down["loss"] = _pct(e.down_loss)
    up: Table = {}
    if "up" in traces:
        up["trace"] = str(traces["up"].resolve())
    elif e.up_rate_bps:
        up["rate"] = _rate(e.up_rate_bps)
    return common, down, up


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def write(out: Path, e: Estimate, source: str, searched: str = "") -> list[Path]:
    """The scenario file and its traces; the paths written (`searched`: as render)."""
    name = scenario_name(out)
    base = out.with_name(name)
    traces = {way: base.with_name(f"{name}.{way}.trace") for way, t in (("down", e.down_trace_ms),
                                                                       ("up", e.up_trace_ms)) if t}
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot write {str(out)!r}: {err.strerror}") from None
    for way, path in traces.items():
        trace.write(path, e.down_trace_ms if way == "down" else e.up_trace_ms or [])
    try:
        out.write_text(render(e, name, source, traces, searched), encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot write {str(out)!r}: {err.strerror}") from None
    return [out, *traces.values()]
