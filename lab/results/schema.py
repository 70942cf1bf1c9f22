"""One row of runs.csv per run. The column list is documented in docs/results.md; keep the two in step."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import TypeAdapter, ValidationError

from lab.errors import UsageError

Status = Literal["ok", "failed", "timeout", "interrupted", "unsupported"]  # "interrupted": legacy rows only


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
    # workloads (lab/workloads; docs/results.md "Workloads"): empty in files written before them (= bulk)
    workload: str = ""      # canonical workload string: bulk, page:50x20kB, reuse:10x100kB, resume:100kB, ...
    objects: int | None = None        # objects the run fetched (and verified)
    page_time_s: float | None = None  # the workload's time: page load (first request to last byte), sum of
                                      # sequential requests, or the resumed connection's request (= total_s)
    object_p50_s: float | None = None  # median per-object completion time from the first request (objects.csv)
    connections: int | None = None    # connections the client opened
    handshakes: int | None = None     # TLS/QUIC handshakes the client made (full or resumed)
    resumed: bool | None = None       # resume/0rtt: the measured connection resumed the first one's session
    early_data: bool | None = None    # 0rtt: the request went as 0-RTT early data and was accepted
    wire_connections: int | None = None  # connections in the router's client-side capture (with --capture pcap)
    # the sender's congestion control (downloads: the server's), read back per run from the server (lab/run/sender.py);
    # empty for runs that did not run
    cc_sender: str = ""
    cc_sender_source: str = ""  # how it is known: netns sysctl, process command line, server default, registry claim
    # the link's own counters over the run (linkem's, or netem's qdisc statistics): packets that entered the emulator
    # (what the sender put on the wire) and drops by cause, per direction
    link_down_sent_pkts: int | None = None
    link_down_loss_drops: int | None = None
    link_down_queue_drops: int | None = None
    link_up_sent_pkts: int | None = None
    link_up_loss_drops: int | None = None
    link_up_queue_drops: int | None = None
    # the sender's loss response from the run's evidence (--capture; lab/evidence/loss_response.py)
    sender_data_pkts: int | None = None  # data-carrying packets the server sent
    sender_data_bytes: int | None = None  # their data bytes (TCP payload; QUIC STREAM frame bytes)
    sender_retx_bytes: int | None = None  # data bytes sent again
    loss_response_source: str = ""  # server qlog | pcap (TCP sequence numbers) | pcap decrypted with the key log
    # adverse conditions (lab/adverse, docs/adverse.md): empty unless the run had them
    faults_actual: str = ""  # JSON list: per fault its spec, state, actual start/end (s from the transfer's start, UTC)
    competing: str = ""      # JSON: per flow (measured first) bytes, share and Mbit/s in the shared interval, series
    jain_index: float | None = None  # Jain's fairness index over all flows in the shared interval
    probe_rtt_ms_p50: float | None = None  # ping RTT during the run (queueing delay = this - rtt_s)
    probe_rtt_ms_p95: float | None = None
    path_change: str = ""    # JSON: kind, when applied, outcome (survived | broken + reason), PATH_* frames seen
    # the fidelity guard (lab/run/hostload.py): was the host, not the link, the bottleneck during the run?
    lab_instance: int | None = None  # the lab that ran it (QUICLAB_INSTANCE; 0 = the default lab)
    cpu_busy: float | None = None    # share of the host's CPU time busy during the run (all cores; steal included)
    cpu_steal: float | None = None   # share stolen by the hypervisor
    link_host_drops: int | None = None  # packets the emulator dropped because the host could not keep up
    host_bound: str = ""             # why the host was the bottleneck (empty: it was not): flagged, see docs
    # the bytes the server delivered per time bin since the link was applied, from the client-side pcap (JSON:
    # bin_s, bytes per bin, start_s = the client's first packet to the server; lab/evidence/delivered.py); empty
    # without a pcap
    delivered: str = ""


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
_OPTIONAL = frozenset(f.name for f in fields(RunRecord) if "None" in str(f.type))
_ADAPTER: TypeAdapter[RunRecord] = TypeAdapter(RunRecord)
#: statuses a row may have (legacy "interrupted" rows are read, and ignored by every consumer)
STATUSES: tuple[str, ...] = get_args(Status)


class BadRunsFile(UsageError):
    """runs.csv has a row that is not a run record (other than a torn last line): names the file and line."""


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


def from_row(row: dict[str, str]) -> RunRecord:
    """One CSV row -> a RunRecord, typed and checked by pydantic (columns missing in older files: defaults)."""
    data: dict[str, Any] = {}
    for k in COLUMNS:
        if k not in row or row[k] is None:
            continue
        data[k] = None if (row[k] == "" and k in _OPTIONAL) else row[k]
    return _ADAPTER.validate_python(data)


@dataclass(frozen=True)
class RunsFile:
    records: list[RunRecord]
    torn_line: int | None = None  # the 1-based line number of an incomplete last line (a crash mid-write), ignored


def read_runs(path: Path) -> RunsFile:
    """The one reader of runs.csv. Rule: a torn last line (no newline at its end, or too few fields: a write cut
    short by a crash) is tolerated and reported in `torn_line`; any other bad row is a BadRunsFile error naming
    the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadRunsFile(f"cannot read {str(path)!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise BadRunsFile(f"{str(path)!r} is not UTF-8 text: not a runs.csv written by quiclab") from None
    lines = text.splitlines(keepends=True)
    if not lines:
        return RunsFile([])
    header = next(csv.reader([lines[0]]))
    if "run_key" not in header or "status" not in header:
        raise BadRunsFile(f"{str(path)!r} line 1: not a runs.csv header (no run_key/status columns)")
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise BadRunsFile(f"{str(path)!r} line 1: unknown column {unknown[0]!r}")
    records: list[RunRecord] = []
    torn: int | None = None
    for i, line in enumerate(lines[1:], start=2):
        last = i == len(lines)
        if not line.strip():
            if last:
                continue
            raise BadRunsFile(f"{str(path)!r} line {i}: empty line inside the file")
        values = next(csv.reader([line]))
        complete = line.endswith("\n") and len(values) == len(header)
        if last and not complete:
            torn = i
            break
        if len(values) != len(header):
            raise BadRunsFile(f"{str(path)!r} line {i}: {len(values)} fields, the header has {len(header)}")
        try:
            records.append(from_row(dict(zip(header, values, strict=True))))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "row"
            raise BadRunsFile(f"{str(path)!r} line {i}: invalid {field} {err.get('input')!r}: {err['msg']}") from None
    return RunsFile(records, torn)


def csv_text(records: list[RunRecord]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow(to_row(r))
    return buf.getvalue()
