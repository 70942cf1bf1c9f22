"""Execute a sweep's plan: set the link, run one verified transfer, record it, next. Failures are recorded
(never dropped) and the sweep goes on; Ctrl-C marks the current run interrupted and stops cleanly."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lab.endpoints import get_client
from lab.endpoints.registry import registry
from lab.errors import QuiclabError
from lab.evidence import capture
from lab.evidence.goodput import pcap_goodput
from lab.link import linkem, router, shaper
from lab.link.model import Link
from lab.protocols import Protocol
from lab.results.schema import RunRecord
from lab.sweep.plan import PlannedRun
from lab.sweep.store import RunLog
from lab.transfer import run_transfer, stop_clients

CURL_TIMEOUT_EXIT = 28
_BYTES = re.compile(r'^quiclab_link_bytes_total\{direction="(downlink|uplink)",protocol="[a-z]+"\} (\d+)$', re.M)


@dataclass
class Context:
    sweep: str
    shaper: str                # requested backend: auto | netem | linkem
    cc: dict[str, dict[str, str | None]]  # implementation -> {"tcp": ..., "quic": ...} (manifest "implementations")
    timeout_for: Callable[[PlannedRun], float]
    quic_cc: dict[str, str] = field(default_factory=dict)  # client -> chosen QUIC congestion control (scenario)
    capture: tuple[str, ...] = ()  # evidence kinds to keep per run (pcap, keylog, qlog)
    folder: Path | None = None     # the sweep folder (evidence goes to <folder>/evidence/<run>/)

    def cc_of(self, implementation: str, protocol: Protocol) -> str:
        """"unknown" if the manifest does not say; "none" if the implementation has no such transport."""
        if implementation not in self.cc:
            return "unknown"
        return self.cc[implementation].get("quic" if protocol is Protocol.H3 else "tcp") or "none"


def wire_counters(backend: str) -> tuple[int, int] | None:
    """IP bytes delivered (downlink, uplink) so far: linkem's counters, or the router's interface counters."""
    try:
        if backend == "linkem":
            totals = {"downlink": 0, "uplink": 0}
            for direction, value in _BYTES.findall(linkem.metrics_text()):
                totals[direction] += int(value)
            return totals["downlink"], totals["uplink"]
        ifs = router.interfaces()
        out = router.run("cat", *(f"/sys/class/net/{i}/statistics/{c}" for i in (ifs.client_side, ifs.server_side)
                                  for c in ("tx_bytes", "tx_packets")))
        cb, cp, sb, sp = (int(x) for x in out.split())
        return cb - 14 * cp, sb - 14 * sp
    except (QuiclabError, ValueError):
        return None


def _record(run: PlannedRun, ctx: Context, backend: str, link: Link, started: str) -> RunRecord:
    return RunRecord(
        sweep=ctx.sweep, run_key=run.key, point=run.point.index, point_label=run.point.label,
        x_name=run.point.x_name, x=run.point.x, protocol=run.protocol.value, client=run.client, server=run.server,
        repeat=run.repeat, order=run.order, seed=run.seed, shaper=backend,
        rate_bps=link.downlink.effective_rate_bps, rtt_s=link.rtt_s, loss_pct=link.downlink.loss.mean * 100,
        jitter_s=link.downlink.jitter_s, link=json.dumps(linkem.to_json(link), separators=(",", ":")),
        size_bytes=run.point.size, status="failed", failure="", http_version="", bytes=0, sha256_ok=False,
        handshake_s=None, ttfb_s=None, total_s=None, goodput_bps=None, wall_s=0.0, overhead_s=None,
        wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None,
        cc_client=ctx.cc_of(run.client, run.protocol), cc_server=ctx.cc_of(run.server, run.protocol),
        started_at=started, timeout_s=ctx.timeout_for(run))


def execute(run: PlannedRun, ctx: Context) -> RunRecord:
    """One run. Raises KeyboardInterrupt after recording nothing: the caller marks the run interrupted."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    t0 = time.monotonic()
    link = run.link()
    backend = ctx.shaper
    rec = _record(run, ctx, backend, link, started)
    why = registry().unsupported(run.client, run.server, run.protocol)
    if why:  # the registry says this combination cannot run: recorded as such, not run, not a failure
        rec.status, rec.failure = "unsupported", why
        return rec
    try:
        choice, _ = shaper.apply(link, ctx.shaper)
        rec.shaper = backend = choice.backend
        adapter = get_client(run.client)
        root = ctx.folder or Path.cwd()
        with capture.collecting(ctx.capture, root, root / "evidence" / run.key.replace("/", "_"), adapter.name,
                                adapter.container, registry().server(run.server)) as ev:
            before = wire_counters(backend)
            result = run_transfer(adapter, run.server, run.protocol, run.point.size, ctx.timeout_for(run),
                                  cc=ctx.quic_cc.get(run.client), env=ev.client_env, port=ev.server_port)
            after = wire_counters(backend)
    except QuiclabError as e:
        rec.failure = str(e)
        rec.wall_s = time.monotonic() - t0
        return rec
    rec.wall_s = time.monotonic() - t0
    rec.http_version, rec.bytes = result.http_version, result.bytes
    rec.sha256_ok = bool(result.sha256) and result.sha256 == result.sha256_expected
    rec.handshake_s, rec.ttfb_s, rec.total_s = result.handshake_s, result.ttfb_s, result.total_s
    rec.goodput_bps = result.goodput_bps
    rec.client_rcvbuf_drops = result.client_rcvbuf_drops
    rec.overhead_s = rec.wall_s - result.total_s if result.total_s else None
    if before and after:
        rec.wire_down_bytes, rec.wire_up_bytes = after[0] - before[0], after[1] - before[1]
        rec.wire_overhead = (rec.wire_down_bytes + rec.wire_up_bytes) / run.point.size if run.point.size else None
    rec.evidence = " ".join(ev.relative())
    rec.pcap_goodput_bps = pcap_goodput(ev, run.server, run.protocol, run.point.size) if result.ok else None
    if result.ok:
        rec.status = "ok"
    elif result.unsupported:  # the implementation said so itself (the contract's exit code 127)
        rec.status, rec.failure = "unsupported", result.failure
    else:
        rec.status = "timeout" if result.exit_code == CURL_TIMEOUT_EXIT else "failed"
        rec.failure = result.failure
    return rec


def interrupted(run: PlannedRun, ctx: Context) -> RunRecord:
    rec = _record(run, ctx, ctx.shaper, run.link(), dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"))
    rec.status, rec.failure = "interrupted", "interrupted by the user (Ctrl-C)"
    return rec


def stop_everything() -> None:
    """After Ctrl-C in a sweep: no transfer left running, the link back to unimpaired."""
    stop_clients()
    with contextlib.suppress(QuiclabError):
        shaper.apply(Link())


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block is done, then raise it: a record is never half written or written
    without being counted. Outside the main thread (where signals cannot be handled) the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def run_all(runs: list[PlannedRun], ctx: Context, log: RunLog,
            on_done: Callable[[RunRecord], None]) -> bool:
    """Run every planned run in order; returns False if interrupted (a run cut short is recorded as such; a
    Ctrl-C while a finished run is being recorded lets that record complete and starts no further run)."""
    for run in runs:
        try:
            rec = execute(run, ctx)
        except KeyboardInterrupt:
            with deferred_interrupt():
                rec = interrupted(run, ctx)
                log.append(rec)
                on_done(rec)
            return False
        try:
            with deferred_interrupt():
                log.append(rec)
                on_done(rec)
        except KeyboardInterrupt:
            return False
    return True
