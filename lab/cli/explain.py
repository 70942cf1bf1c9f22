"""`quiclab explain FOLDER`: every captured run of a finished sweep explained from its own evidence
(lab/explain, docs/explain.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import TypeAdapter

from lab import terminal
from lab.cli.explain_versus import versus_cmd
from lab.cli.report import check_sweep_folder
from lab.explain import qlog, resumed, tshark
from lab.explain.folder import captured_runs, explain_folder
from lab.explain.model import Explanation, Figure
from lab.report.report import load_sweep

COLUMNS = ("run", "status", "round trips", "handshake ms", "TTFB ms", "min RTT ms", "drops down", "drops up",
           "data lost", "retx bytes", "spurious", "first loss ms", "repair ms", "loss episodes", "timeouts",
           "streams held")


def _v(f: Figure | None) -> str:
    if f is None or f.value is None:
        return "-"
    return f"{f.value:.1f}" if isinstance(f.value, float) else str(f.value)


def _drops(e: Explanation, down: bool) -> str:
    d = e.path and (e.path.down if down else e.path.up)
    if not d:
        return "-"
    return f"{_v(d.dropped)} ({_v(d.emulator_dropped)})"


def row(e: Explanation) -> list[str]:
    hs, pt, lr, w = e.handshake, e.path, e.loss, e.window
    rts = f"{_v(hs.round_trips)} ({hs.expected_round_trips})" if hs else "-"
    return [e.run_key, e.status, rts, _v(hs and hs.handshake_ms), _v(hs and hs.ttfb_ms), _v(pt and pt.min_rtt_ms),
            _drops(e, True), _drops(e, False), _v(lr and lr.data_packets_lost), _v(lr and lr.bytes_retransmitted),
            _v(lr and lr.spurious_retransmissions), _v(lr and lr.first_loss_ms), _v(lr and lr.first_loss_repair_ms),
            _v(w and w.loss_episodes), _v(lr and lr.timeouts), _held(e)]


def _held(e: Explanation) -> str:
    """Head-of-line: streams with bytes held behind a hole / response streams (multi-object runs only)."""
    h = e.head_of_line
    return "-" if h is None else f"{_v(h.streams_held)}/{_v(h.streams)}"


def register(app: typer.Typer) -> None:
    @app.command()
    def explain(
        folder: Annotated[Path, typer.Argument(help="A finished sweep folder whose runs were captured "
                                                    "(--capture pcap,keylog).")],
        run: Annotated[str | None, typer.Option("--run", help="Only this run (its run_key, e.g. "
                                                              "'1/h3/curl/nginx/0').")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the records as JSON instead.")] = False,
        versus: Annotated[str | None, typer.Option("--versus", help="Explain the difference between two methods "
                                                   "at --point: A,B, each h1/h2/h3 or protocol:client>server "
                                                   "(e.g. 'h2,h3').")] = None,
        point: Annotated[str | None, typer.Option("--point", help="The point for --versus, as point_label in "
                                                  "runs.csv (e.g. 'loss=3%').")] = None,
        qlog_dir: Annotated[Path | None, typer.Option("--qlog", help="Write a qvis-loadable qlog (0.3, JSON-SEQ) "
                                                      "of each captured HTTP/3 run into this folder, "
                                                      "reconstructed from its decrypted client-side capture.")] = None,
    ) -> None:
        """Explain each captured run from its own evidence: handshake round trips, path truth (drops counted from
        both captures against the emulator's counters), loss and recovery, windows, reasons. Writes explain.json
        beside each run's evidence, and for a resume/0rtt HTTP/3 run sessions.json: its resumed connection timed
        (request, first response byte, handshake done, bytes per round trip, the amplification limit); tshark runs in
        the lab's router (the lab must be up). docs/explain.md."""
        check_sweep_folder(folder)
        records, _ = load_sweep(folder)
        if versus is not None or point is not None:
            versus_cmd(folder, records, versus, point, run, json_out, with_qlog=qlog_dir is not None)
            return
        if qlog_dir is not None:
            written = qlog.write_folder(folder, records, run, qlog_dir, qlog.decoded)
            if json_out:
                terminal.raw(json.dumps([{"run_key": k, "qlog": [str(p) for p in ps], "why": w}
                                         for k, ps, w in written], indent=2))
                return
            for key, paths, why in written:
                terminal.line(f"{key}: qlog {', '.join(map(str, paths))}" if paths else f"{key}: {why}")
            return
        records_out = explain_folder(folder, records, run, tshark.fields)
        if json_out:
            terminal.raw(TypeAdapter(list[Explanation]).dump_json(records_out, indent=2).decode())
            return
        terminal.table(f"{folder}: runs explained from their captures (round trips: seen (expected); drops: "
                       "counted from the captures (emulator's counters))", COLUMNS, [row(e) for e in records_out],
                       right=COLUMNS[2:])
        for e in records_out:
            if e.status != "explained":
                terminal.line(f"{e.run_key}: {e.status}: {e.why}")
                continue
            for i, r in enumerate(e.reasons, 1):
                terminal.line(f"{e.run_key} {i}. {r.text}")
        for record, evdir in captured_runs(folder, records, run):
            path = evdir / resumed.SESSIONS_JSON
            if resumed.applies(record) and path.is_file():
                terminal.line(resumed.summary(resumed.SessionTimeline.model_validate_json(path.read_text())))
