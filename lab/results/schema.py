"""One row of runs.csv per run. The column list is documented in docs/results.md; keep the two in step."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

Status = Literal["ok", "failed", "timeout", "interrupted", "unsupported"]


@dataclass
class RunRecord:
    # identity: (point, protocol, client, server, repeat) is unique within a sweep
    sweep: str
    run_key: str            # "<point>/<protocol>/<client>/<server>/<repeat>"
    point: int              # index of the point in the scenario's matrix
    point_label: str        # e.g. "loss=1%" or "rate=5mbit delay=10ms loss=0% spikes=on"
    x_name: str             # the swept parameter plotted on the x axis, e.g. "loss_pct", "rtt_ms", "size_bytes"
    x: float                # its numeric value at this point
    protocol: str           # asked: h1 | h2 | h3
    client: str
    server: str
    repeat: int             # 0-based
    order: int              # position in the (seeded, shuffled) execution order
    seed: int               # the link's loss/jitter seed (same for every protocol at one point and repeat)
    # link in force (per direction values are equal unless the scenario set them apart)
    shaper: str             # linkem | netem
    rate_bps: float | None  # downlink rate (None = unlimited)
    rtt_s: float            # base RTT added by the link
    loss_pct: float         # mean downlink loss in percent
    jitter_s: float
    link: str               # compact JSON of the whole link in force
    size_bytes: int
    # outcome
    status: Status
    failure: str            # reason when status != ok
    http_version: str       # negotiated
    bytes: int
    sha256_ok: bool
    handshake_s: float | None
    ttfb_s: float | None
    total_s: float | None
    goodput_bps: float | None  # payload bits / total_s
    wall_s: float           # wall time of the run as the orchestrator saw it
    overhead_s: float | None  # wall_s - total_s: the lab's own per-run cost
    wire_down_bytes: int | None  # IP bytes the router delivered toward the client during the run
    wire_up_bytes: int | None    # ... toward the server
    wire_overhead: float | None  # (wire_down + wire_up) / size_bytes
    cc_client: str          # congestion control of the client's stack (e.g. "cubic", "bbr", "newreno (QUIC)")
    cc_server: str
    started_at: str         # ISO 8601 UTC
    # evidence (--capture): empty unless asked for
    pcap_goodput_bps: float | None = None  # size over first..last server data packet in the client-side pcap
    evidence: str = ""      # space-separated paths of the run's captures, relative to the sweep folder
    # datagrams the client's own full UDP receive buffers dropped during the run (an endpoint limit, not the link)
    client_rcvbuf_drops: int | None = None
    # the transfer's timeout in force (s): a run that timed out or failed is right-censored here in the statistics
    timeout_s: float | None = None
    # in a merged sweep (`quiclab merge`): the shard and machine that ran this run, as compact JSON; empty otherwise
    host: str = ""


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
_TYPES = {f.name: f.type for f in fields(RunRecord)}


def to_row(r: RunRecord) -> dict[str, str]:
    out = {}
    for k, v in asdict(r).items():
        if v is None:
            out[k] = ""
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, float):
            out[k] = repr(v)
        else:
            out[k] = str(v)
    return out


def _convert(name: str, text: str) -> Any:
    t = str(_TYPES[name])
    if text == "" and "None" in t:
        return None
    if t.startswith("bool"):
        return text == "true"
    if t.startswith("int"):
        return int(text)
    if t.startswith("float"):
        return float(text)
    return text


def from_row(row: dict[str, str]) -> RunRecord:
    return RunRecord(**{k: _convert(k, row.get(k, "")) for k in COLUMNS})


def read_runs(path: Path) -> list[RunRecord]:
    with path.open(newline="") as f:
        return [from_row(row) for row in csv.DictReader(f)]


def csv_text(records: list[RunRecord]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow(to_row(r))
    return buf.getvalue()
