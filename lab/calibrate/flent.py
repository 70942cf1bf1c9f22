"""flent's data files (.flent.gz: gzipped JSON with `metadata`, `x_values`, `results`) of the tests that load
the downlink: tcp_download (one TCP download beside ICMP pings) and rrul (four downloads, four uploads, pings).

The pings before the downloads start (flent waits its DELAY, 5 s by default) are the idle RTT; the pings while
they run are the RTT under load. The downloads' rates are flent's per-step throughput (netperf's own intervals,
resampled by flent), so there are no retransmissions: flent does not record them."""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.calibrate.measurements import Flow
from lab.errors import UsageError

TESTS = ("tcp_download", "rrul")
MBIT = 1e6
MS = 1e-3


@dataclass(frozen=True)
class FlentRun:
    flow: Flow
    idle_rtts_s: list[float]
    test: str


def read(path: Path) -> FlentRun:
    name = str(path)
    try:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except OSError as e:
        raise UsageError(f"cannot read {name!r}: {e.strerror or e}") from None
    except (EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{name}: not a flent data file (gzipped JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict):
        raise UsageError(f"{name}: not a flent data file: no metadata")
    test = str(data["metadata"].get("NAME", ""))
    if test not in TESTS:
        raise UsageError(f"{name}: a flent {test or 'unnamed'!r} test: only {', '.join(TESTS)} load the downlink "
                         "with TCP downloads")
    return _run(data, name, test)


def _series(results: dict[str, Any], prefix: str, exclude: tuple[str, ...] = ()) -> dict[str, list[Any]]:
    return {k: v for k, v in results.items() if k.startswith(prefix) and isinstance(v, list)
            and not k.endswith(exclude)}


def _run(data: dict[str, Any], name: str, test: str) -> FlentRun:
    x = data.get("x_values") or []
    results = data.get("results") or {}
    downloads = _series(results, "TCP download", (" avg", " fairness", " totals"))
    total = downloads.pop("TCP download sum", None)
    if total is None and downloads:
        streams = list(downloads.values())
        total = [None if any(s[i] is None for s in streams) else sum(s[i] for s in streams)
                 for i in range(min(len(s) for s in streams))]
    if not total or not any(v for v in total if v is not None):
        raise UsageError(f"{name}: a flent {test} file without download throughput ('TCP download' series)")
    pings = results.get("Ping (ms) ICMP") or next(iter(_series(results, "Ping (ms)", (" avg",)).values()), [])
    loaded = [i for i, v in enumerate(total) if v and i < len(x)]
    first, last = loaded[0], loaded[-1]
    rate = []
    for i in range(first, last):
        v = total[i] if total[i] is not None else 0.0
        rate.append((round(x[i] - x[first], 6), round(x[i + 1] - x[first], 6), float(v) * MBIT))
    idle = [p * MS for i, p in enumerate(pings) if i < len(x) and i < first and p is not None and p > 0]
    rtt = [(round(x[i] - x[first], 6), p * MS) for i, p in enumerate(pings)
           if first <= i <= last and i < len(x) and p is not None and p > 0]
    meta = (data["metadata"].get("SERIES_META") or {}).get("TCP download") or {}
    cc = meta.get("CONG_CONTROL") if isinstance(meta, dict) else None
    duration = rate[-1][1] if rate else 0.0
    mean = sum((b - a) * r for a, b, r in rate) / duration if duration else 0.0
    streams = max(1, len(downloads))
    flow = Flow(source=name, label=f"flent {test}" + (f" ({streams} downloads)" if streams > 1 else ""),
                direction="down", cc=str(cc) if cc else None, duration_s=round(duration, 6),
                bytes=round(mean * duration / 8), rate=rate, rtt=rtt)
    return FlentRun(flow, idle, test)
