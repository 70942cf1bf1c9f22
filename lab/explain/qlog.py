"""qlog for every QUIC run (issue 25 point 3): a qvis-loadable qlog 0.3 (JSON-SEQ, RFC 7464) reconstructed from the
router's client-side capture decrypted with the run's key log, for endpoints that write none (nginx, caddy,
Debian's curl 8.14). docs/explain.md "--qlog".

The core is sans-IO: tshark's decoded packets in (`slim` of `tshark -T json`), qlog records out (`records`),
JSON-SEQ text out (`dumps`). `decoded` is the one IO function (tshark in the router, through lab/docker.py);
`write_run` reads a run's evidence and writes its qlog file.

Vantage point: the router's capture on the client's side of the emulator (`type: network`), written from the
client's perspective (`flow: client`, as the qlog main schema prescribes for a network vantage point): a packet the
client sent is `transport:packet_sent`, one it received is `transport:packet_received`. Times are the router's,
in ms relative to the capture's first packet, with the pcap's sub-ms precision.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from lab.errors import EnvironmentProblem
from lab.evidence import tshark as evidence_tshark
from lab.results.folder import write_atomic
from lab.results.schema import RunRecord

QLOG_VERSION = "0.3"
VANTAGE_NAME = "quiclab router, client side"
#: tshark's protocol layers kept (with their children) for the qlog
LAYERS = "frame ip udp quic"
#: keys of tshark's QUIC tree that carry bytes, not fields (dropped by `slim`)
_BULK = frozenset({"quic.payload", "quic.remaining_payload", "quic.protected_payload", "quic.stream_data",
                   "quic.crypto.crypto_data", "quic.crypto.fragments", "quic.fragments", "quic.reassembled_in",
                   "tls", "http3", "_ws.expert", "QUIC Connection information",
                   "quic.nci.stateless_reset_token"})
_LONG_TYPES = {0: "initial", 1: "0RTT", 2: "handshake", 3: "retry"}

#: (pcap, keylog) -> slim decoded packets (`decoded` on the lab; tests pass committed output)
Decoder = Callable[[Path, Path], list[dict[str, Any]]]


class NoQlog(Exception):
    """A run for which no qlog can be written; the message says why."""


# ---- tshark's JSON, slimmed --------------------------------------------------------------------------------------

def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else ([] if v is None else [v])


def _strip(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k not in _BULK}
    if isinstance(o, list):
        return [_strip(x) for x in o]
    return o


def slim(tshark_json: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`tshark -T json --no-duplicate-keys -J "frame ip udp quic"`'s packets reduced to what the qlog needs: per
    UDP datagram its frame number, epoch time, addresses, UDP length, tshark's QUIC connection number and QUIC
    packets (without payload bytes)."""
    out = []
    for p in tshark_json:
        layers = p.get("_source", {}).get("layers", {})
        fr, ip, udp = layers.get("frame", {}), layers.get("ip", {}), layers.get("udp", {})
        if not udp or "quic" not in layers:
            continue
        quic = _as_list(layers["quic"])
        conn = next((c.get("quic.connection.number") for q in quic
                     if isinstance(c := q.get("QUIC Connection information"), dict)), None)
        out.append({"frame.number": fr.get("frame.number"), "frame.time_epoch": fr.get("frame.time_epoch"),
                    "ip.src": ip.get("ip.src"), "ip.dst": ip.get("ip.dst"), "udp.length": udp.get("udp.length"),
                    "quic.connection.number": conn, "quic": _strip(quic)})
    return out


# ---- the sans-IO core: decoded packets -> qlog records ---------------------------------------------------------

def _int(v: Any, default: int | None = None) -> int | None:
    if isinstance(v, list):
        v = v[0] if v else None
    if v is None:
        return default
    try:
        return int(str(v), 0)
    except ValueError:
        return default


def _hex(v: Any) -> str | None:
    return str(v).replace(":", "") if v else None


def _ack_ranges(f: dict[str, Any]) -> list[list[int]]:
    """[[low, high], ...] from tshark's largest / first range / (gap, range) pairs (RFC 9000 19.3.1), highest
    first."""
    hi = _int(f.get("quic.ack.largest_acknowledged"))
    first = _int(f.get("quic.ack.first_ack_range"), 0)
    if hi is None:
        return []
    lo = hi - (first or 0)
    out = [[lo, hi]]
    gaps, lens = _as_list(f.get("quic.ack.gap")), _as_list(f.get("quic.ack.ack_range"))
    for g, n in zip(gaps, lens, strict=False):
        hi = lo - (_int(g) or 0) - 2
        lo = hi - (_int(n) or 0)
        out.append([lo, hi])
    return out  # always [low, high] (the schema also allows [n]; two numbers read everywhere)


def frame(f: dict[str, Any]) -> dict[str, Any]:
    """One QUIC frame of tshark's tree as a qlog 0.3 QuicFrame (draft-ietf-quic-qlog-quic-events-02)."""
    t = _int(f.get("quic.frame_type"), -1)
    g = f.get
    if t == 0x00:
        return {"frame_type": "padding", "payload_length": _int(g("quic.padding_length"), 1)}
    if t == 0x01:
        return {"frame_type": "ping"}
    if t in (0x02, 0x03):
        out: dict[str, Any] = {"frame_type": "ack", "acked_ranges": _ack_ranges(f)}
        if t == 0x03:
            out.update(ect0=_int(g("quic.ack.ect0_count")), ect1=_int(g("quic.ack.ect1_count")),
                       ce=_int(g("quic.ack.ecn_ce_count")))
        return out
    if t == 0x04:
        return {"frame_type": "reset_stream", "stream_id": _int(g("quic.rsts.stream_id")),
                "error_code": _int(g("quic.rsts.application_error_code")),
                "final_size": _int(g("quic.rsts.final_size"))}
    if t == 0x05:
        return {"frame_type": "stop_sending", "stream_id": _int(g("quic.ss.stream_id")),
                "error_code": _int(g("quic.ss.application_error_code"))}
    if t == 0x06:
        return {"frame_type": "crypto", "offset": _int(g("quic.crypto.offset"), 0),
                "length": _int(g("quic.crypto.length"), 0)}
    if t == 0x07:
        return {"frame_type": "new_token", "token": {"length": _int(g("quic.nt.length"))}}
    if 0x08 <= t <= 0x0F:
        fin = bool(t & 0x01)
        return {"frame_type": "stream", "stream_id": _int(g("quic.stream.stream_id")),
                "offset": _int(g("quic.stream.offset"), 0), "length": _int(g("quic.stream.length"), 0), "fin": fin}
    if t == 0x10:
        return {"frame_type": "max_data", "maximum": _int(g("quic.md.maximum_data"))}
    if t == 0x11:
        return {"frame_type": "max_stream_data", "stream_id": _int(g("quic.msd.stream_id")),
                "maximum": _int(g("quic.msd.maximum_stream_data"))}
    if t in (0x12, 0x13):
        return {"frame_type": "max_streams", "stream_type": "bidirectional" if t == 0x12 else "unidirectional",
                "maximum": _int(g("quic.ms.max_streams"))}
    if t == 0x14:
        return {"frame_type": "data_blocked", "limit": _int(g("quic.sb.stream_data_limit"))}  # (tshark's name)
    if t == 0x15:
        return {"frame_type": "stream_data_blocked", "stream_id": _int(g("quic.sdb.stream_id")),
                "limit": _int(g("quic.sb.stream_data_limit"))}
    if t in (0x16, 0x17):
        return {"frame_type": "streams_blocked", "stream_type": "bidirectional" if t == 0x16 else "unidirectional",
                "limit": _int(g("quic.sib.stream_limit"))}
    if t == 0x18:
        return {"frame_type": "new_connection_id", "sequence_number": _int(g("quic.nci.sequence")),
                "retire_prior_to": _int(g("quic.nci.retire_prior_to")),
                "connection_id_length": _int(g("quic.nci.connection_id.length")),
                "connection_id": _hex(g("quic.nci.connection_id"))}
    if t == 0x19:
        return {"frame_type": "retire_connection_id", "sequence_number": _int(g("quic.rci.sequence"))}
    if t in (0x1A, 0x1B):
        return {"frame_type": "path_challenge" if t == 0x1A else "path_response"}
    if t in (0x1C, 0x1D):
        code = g("quic.cc.error_code") if t == 0x1C else g("quic.cc.error_code.app")
        out = {"frame_type": "connection_close", "error_space": "transport" if t == 0x1C else "application",
               "error_code": _int(code), "raw_error_code": _int(code), "reason": g("quic.cc.reason_phrase") or ""}
        if t == 0x1C and g("quic.cc.frame_type") is not None:
            out["trigger_frame_type"] = _int(g("quic.cc.frame_type"))
        return out
    if t == 0x1E:
        return {"frame_type": "handshake_done"}
    if t in (0x30, 0x31):
        return {"frame_type": "datagram", "length": _int(g("quic.dg.length"))}
    return {"frame_type": "unknown", "raw_frame_type": t}


def _header(q: dict[str, Any]) -> dict[str, Any]:
    short = q.get("quic.short")
    if isinstance(short, dict):
        h: dict[str, Any] = {"packet_type": "1RTT"}
        pn, dcid = short.get("quic.packet_number"), short.get("quic.dcid")
    else:
        version = _int(q.get("quic.version"))
        h = {"packet_type": "version_negotiation" if version == 0
             else _LONG_TYPES.get(_int(q.get("quic.long.packet_type"), -1), "unknown")}
        pn, dcid = q.get("quic.packet_number"), q.get("quic.dcid")
        if q.get("quic.scid"):
            h["scid"] = _hex(q.get("quic.scid"))
    if _int(pn) is not None:
        h["packet_number"] = _int(pn)
    if dcid:
        h["dcid"] = _hex(dcid)
    return h


def _decrypted(q: dict[str, Any]) -> bool:
    return "quic.frame" in q


def client_ip(packets: list[dict[str, Any]]) -> str | None:
    """The client: the sender of the first Initial of the capture (or, failing that, its first packet)."""
    for p in packets:
        for q in p["quic"]:
            if q.get("quic.long.packet_type") == "0" and "quic.short" not in q:
                return p["ip.src"]
    return packets[0]["ip.src"] if packets else None


def odcid(packets: list[dict[str, Any]], client: str) -> str | None:
    """The client's original destination connection ID: the DCID of its first Initial."""
    for p in packets:
        if p["ip.src"] == client:
            for q in p["quic"]:
                if q.get("quic.long.packet_type") == "0" and q.get("quic.dcid"):
                    return _hex(q["quic.dcid"])
    return None


def connections(packets: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The capture's datagrams split by QUIC connection (tshark's connection number), in order of first packet; a
    run with several connections (page loads, resumption) gets one qlog trace per connection. A datagram tshark
    gives no connection (it could not read it) goes with the connection before it (the first one at the start)."""
    known = [c for p in packets if (c := p.get("quic.connection.number")) is not None]
    last = known[0] if known else None
    by: dict[Any, list[dict[str, Any]]] = {}
    for p in packets:
        c = p.get("quic.connection.number")
        last = c if c is not None else last
        by.setdefault(last, []).append(p)
    return list(by.values())


def records(packets: list[dict[str, Any]], title: str, description: str = "") -> list[dict[str, Any]]:
    """The qlog 0.3 records of one connection's capture: the header first, then one transport:packet_sent or
    transport:packet_received event per QUIC packet (coalesced packets of a datagram each get one, with
    `is_coalesced` and the frame number as `datagram_id`). Raises NoQlog when the capture cannot give one."""
    packets = [p for p in packets if p.get("quic")]
    if not packets:
        raise NoQlog("the capture holds no QUIC packet")
    quic = [q for p in packets for q in p["quic"]]
    if not any(_decrypted(q) for q in quic if isinstance(q.get("quic.short"), dict)) and any(
            isinstance(q.get("quic.short"), dict) for q in quic):
        raise NoQlog("the key log does not decrypt the capture's 1-RTT packets (no frame of theirs is readable)")
    client = client_ip(packets)
    t0 = float(packets[0]["frame.time_epoch"])
    header = {
        "qlog_version": QLOG_VERSION, "qlog_format": "JSON-SEQ", "title": title, "description": description,
        "trace": {
            "title": title,
            "vantage_point": {"type": "network", "name": VANTAGE_NAME, "flow": "client"},
            "common_fields": {"ODCID": odcid(packets, client or ""), "protocol_type": ["QUIC", "HTTP3"],
                              "time_format": "relative", "reference_time": round(t0 * 1000, 3)},
        },
    }
    out: list[dict[str, Any]] = [header]
    for p in packets:
        qs = p["quic"]
        name = "transport:packet_sent" if p["ip.src"] == client else "transport:packet_received"
        t = round((float(p["frame.time_epoch"]) - t0) * 1000, 3)
        for q in qs:
            data: dict[str, Any] = {"header": _header(q),
                                    "frames": [frame(f) for f in _as_list(q.get("quic.frame"))],
                                    "raw": {"length": _int(q.get("quic.packet_length"))},
                                    "datagram_id": _int(p["frame.number"])}
            if len(qs) > 1:
                data["is_coalesced"] = True
            if not _decrypted(q):
                data["trigger"] = "undecryptable"  # (not a qlog trigger value qvis knows; it ignores it)
            out.append({"time": t, "name": name, "data": data})
    return out


def dumps(recs: Iterable[dict[str, Any]]) -> str:
    """JSON-SEQ (RFC 7464): each record prefixed by RS (0x1E) and ended by a newline."""
    return "".join("\x1e" + json.dumps(r, separators=(",", ":")) + "\n" for r in recs)


def loads(text: str) -> list[dict[str, Any]]:
    """The records of a JSON-SEQ text (the inverse of `dumps`)."""
    return [json.loads(part) for part in text.split("\x1e") if part.strip()]


# ---- IO ----------------------------------------------------------------------------------------------------------

def decoded(pcap: Path, keylog: Path) -> list[dict[str, Any]]:
    """tshark's decoded QUIC packets of `pcap` (decrypted with `keylog`), slimmed; tshark runs in the router."""
    text = evidence_tshark.run(pcap, keylog, ["-T", "json", "--no-duplicate-keys", "-J", LAYERS])
    try:
        return slim(json.loads(text or "[]"))
    except json.JSONDecodeError as e:
        raise EnvironmentProblem(f"tshark's JSON of {pcap} does not parse: {e}") from None


def file_name(run_key: str, connection: int | None = None) -> str:
    """`1_h3_curl_nginx_0.sqlog`; with several connections `..._conn1.sqlog`, `..._conn2.sqlog`, ..."""
    return run_key.replace("/", "_") + (f"_conn{connection + 1}" if connection is not None else "") + ".sqlog"


def write_run(record: RunRecord, evdir: Path, out_dir: Path, decode: Decoder) -> list[Path]:
    """Write the run's qlog into `out_dir` (named after its run key; one file per QUIC connection); NoQlog says why
    it cannot be written."""
    if record.protocol != "h3":
        raise NoQlog(f"skipped: an {record.protocol} run is TCP, not QUIC (qlog is for HTTP/3 runs)")
    pcap, keys = evdir / "client-side.pcap", evdir / "keys.log"
    if not pcap.is_file():
        raise NoQlog(f"cannot write qlog: no client-side.pcap in {evdir}")
    if not keys.is_file() or not keys.read_text(encoding="utf-8", errors="replace").strip():
        raise NoQlog("cannot write qlog: no TLS key log (keys.log) beside the capture, so its QUIC packets cannot "
                     "be decrypted (capture with --capture pcap,keylog)")
    conns = connections(decode(pcap, keys))
    traces = []
    try:
        for i, c in enumerate(conns or [[]]):
            n = f" connection {i + 1} of {len(conns)}" if len(conns) > 1 else ""
            traces.append(records(c, title=f"quiclab {record.sweep} {record.run_key}{n}",
                                  description=f"{record.client} -> {record.server} ({record.protocol}), "
                                              f"reconstructed from the router's decrypted capture {pcap.name}"))
    except NoQlog as e:
        raise NoQlog(f"cannot write qlog: {e}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, recs in enumerate(traces):
        path = out_dir / file_name(record.run_key, i if len(traces) > 1 else None)
        write_atomic(path, dumps(recs))
        paths.append(path)
    return paths


def write_folder(folder: Path, records_: list[RunRecord], run_key: str | None, out_dir: Path,
                 decode: Decoder) -> list[tuple[str, list[Path], str]]:
    """A qlog for each captured run of a sweep folder (only `run_key` if given): (run key, files, why none).
    TCP runs and runs whose capture cannot give one are listed with the reason, not raised."""
    from lab.explain.folder import captured_runs  # (folder imports the analysis; only needed here)

    out: list[tuple[str, list[Path], str]] = []
    for record, evdir in captured_runs(folder, records_, run_key):
        try:
            out.append((record.run_key, write_run(record, evdir, out_dir, decode), ""))
        except NoQlog as e:
            out.append((record.run_key, [], str(e)))
        except OSError as e:
            raise EnvironmentProblem(f"cannot write the qlog of {record.run_key} in {out_dir}: "
                                     f"{e.strerror or e}") from None
    return out
