"""The runs of a finished sweep folder explained: each run with captures gets `explain.json` beside them (and a
resume/0rtt QUIC run `sessions.json`, its resumed connection timed: lab/explain/resumed.py).

`explain_run` takes the function that produces tshark's rows of a capture (`tshark.fields` on the lab; tests pass
committed tshark output), so everything here but that function is sans-IO apart from reading and writing files.
An explained run's record also carries its transfer-time split and curve (lab/explain/timeline.py) for the report.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from lab.errors import EnvironmentProblem, QuiclabError, UsageError
from lab.evidence.capture import CAPTURE_PROBLEMS
from lab.evidence.pcap import Packet, PcapError, read_pcap
from lab.evidence.sender_socket import SENDER_SOCKET_TXT
from lab.explain import closing, resumed, timeline
from lab.explain.analyze import RunInputs, explain
from lab.explain.model import EXPLAIN_JSON, Explanation
from lab.explain.path import header_extras
from lab.explain.rows import client_of, parse
from lab.results.folder import write_atomic
from lab.results.schema import RunRecord

#: (pcap, keylog or None) -> tshark's FIELDS text
TsharkFields = Callable[[Path, Path | None], str]
CLIENT_PCAP, SERVER_PCAP, KEYS = "client-side.pcap", "server-side.pcap", "keys.log"


def cut_short(data: bytes) -> str | None:
    """Why a classic pcap file is incomplete (a record cut off at the end), or None when it is whole."""
    if len(data) < 24:
        return "shorter than its 24-byte header"
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off, n = 24, 0
    while off < len(data):
        if off + 16 > len(data):
            return f"cut short in a record header after {n} whole packets"
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        if off + 16 + incl > len(data):
            return f"cut short in the middle of packet {n + 1} (after {n} whole packets)"
        off += 16 + incl
        n += 1
    return None


def evidence_dir(folder: Path, record: RunRecord) -> Path | None:
    """The run's evidence folder (where its client-side.pcap is), or None if the run has no capture."""
    pcap = next((p for p in record.evidence.split() if Path(p).name == CLIENT_PCAP), None)
    return (folder / pcap).parent if pcap else None


def _packets(path: Path, problems: list[str]) -> tuple[list[Packet], list[bytes]] | None:
    if not path.is_file():
        return None
    data = path.read_bytes()
    why = cut_short(data)
    if why:
        problems.append(f"{path.name} is {why}")
        return None
    try:
        return read_pcap(data), header_extras(data)
    except PcapError as e:
        problems.append(f"{path.name}: {e}")
        return None


def _drops(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


NO_KEYS = "no TLS key log (keys.log) beside the capture: it cannot be decrypted (capture with --capture pcap,keylog)"


def run_inputs(record: RunRecord, evdir: Path, tshark: TsharkFields) -> RunInputs | str:
    """What explains one run, read from the files in `evdir` (tshark once per capture), or why it cannot be."""
    problems: list[str] = []
    keys = evdir / KEYS
    if not keys.is_file() or not keys.read_text(encoding="utf-8", errors="replace").strip():
        problems.append(NO_KEYS)
    noted = evdir / CAPTURE_PROBLEMS
    if noted.is_file():  # the run's capture said it is incomplete (e.g. tcpdump's kernel drops): not explainable
        problems += [f"the capture is incomplete: {line}" for line in noted.read_text(errors="replace").splitlines()
                     if "pcap" in line]
    client = _packets(evdir / CLIENT_PCAP, problems)
    server = _packets(evdir / SERVER_PCAP, problems)
    if client is None and not problems:
        problems.append(f"no {CLIENT_PCAP} in {evdir}")
    if problems == [NO_KEYS] and record.protocol == "h3" and client is not None:
        # a handshake that never completed leaves no keys to log; its Initial packets need none
        rows = parse(tshark(evdir / CLIENT_PCAP, None))
        who = client_of(rows)
        stalled = closing.stalled_handshake(rows, who) if who else None
        if stalled:
            return stalled
    if problems or client is None:
        return "; ".join(problems)
    return RunInputs(
        run_key=record.run_key, protocol=record.protocol, client_side=client[0],
        server_side=server[0] if server else None, client_extras=client[1], server_extras=server[1] if server else [],
        client_rows=parse(tshark(evdir / CLIENT_PCAP, keys)),
        server_rows=parse(tshark(evdir / SERVER_PCAP, keys)) if server is not None else [],
        configured_rtt_s=record.rtt_s, failed=record.status != "ok", competing=bool(record.competing),
        counter_drops=(_drops(record.link_down_loss_drops, record.link_down_queue_drops),
                       _drops(record.link_up_loss_drops, record.link_up_queue_drops)),
        sender_socket=(evdir / SENDER_SOCKET_TXT).read_text(encoding="utf-8", errors="replace")
        if (evdir / SENDER_SOCKET_TXT).is_file() else None)


def explained(record: RunRecord, inp: RunInputs | str) -> Explanation:
    """One run's explanation from its inputs (a str: why it has none)."""
    if isinstance(inp, str):
        return Explanation.unexplainable(record.run_key, record.protocol, inp)
    e = explain(inp)
    if e.status == "explained":  # the split and curve of --versus, for the report (an invalid run's are not)
        e.timeline = timeline.of_run(inp.client_rows, record)
    return e


def explain_run(record: RunRecord, evdir: Path, tshark: TsharkFields) -> Explanation:
    """One run's explanation from the files in `evdir` (not written)."""
    return explained(record, run_inputs(record, evdir, tshark))


def session_timeline(record: RunRecord, inp: RunInputs | str) -> resumed.SessionTimeline | None:
    """A resume/0rtt QUIC run's resumed connection timed (lab/explain/resumed.py); None for other runs."""
    if not resumed.applies(record):
        return None
    if isinstance(inp, str):
        return resumed.SessionTimeline(run_key=record.run_key, protocol=record.protocol,
                                       workload=record.workload or "", status="not timed", why=inp)
    return resumed.timeline(record, inp.client_rows, inp.server_rows)


def write(evdir: Path, e: Explanation | resumed.SessionTimeline) -> Path:
    """explain.json (an Explanation) or sessions.json (a SessionTimeline) in `evdir`."""
    path = evdir / (EXPLAIN_JSON if isinstance(e, Explanation) else resumed.SESSIONS_JSON)
    try:
        write_atomic(path, e.model_dump_json(indent=2) + "\n")
    except OSError as err:
        raise EnvironmentProblem(f"cannot write {path}: {err.strerror or err}") from None
    return path


def captured_runs(folder: Path, records: list[RunRecord], run_key: str | None) -> list[tuple[RunRecord, Path]]:
    """The runs of a sweep folder that have a client-side capture (only `run_key` if given); bad input is a
    UsageError naming the value and what is allowed."""
    runs = [(r, d) for r in records if (d := evidence_dir(folder, r)) is not None]
    if not runs:
        raise UsageError(f"no run in {folder} has captures: sweep with --capture pcap,keylog to explain its runs")
    if run_key is None:
        return runs
    chosen = [(r, d) for r, d in runs if r.run_key == run_key]
    if not chosen:
        keys = [r.run_key for r, _ in runs]
        shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise UsageError(f"invalid --run {run_key!r}: the runs with captures in {folder} are {shown}")
    return chosen


def explain_folder(folder: Path, records: list[RunRecord], run_key: str | None,
                   tshark: TsharkFields) -> list[Explanation]:
    """Explain (and write explain.json for) the captured runs of a sweep folder; a resume/0rtt QUIC run also gets
    sessions.json, its resumed connection timed from the same tshark rows (lab/explain/resumed.py)."""
    out = []
    for record, evdir in captured_runs(folder, records, run_key):
        inp = run_inputs(record, evdir, tshark)
        e = explained(record, inp)
        write(evdir, e)
        if (s := session_timeline(record, inp)) is not None:
            write(evdir, s)
        out.append(e)
    return out


def after_sweep(folder: Path, records: list[RunRecord], tshark: TsharkFields) -> str | None:
    """At a complete sweep's end (before its report): explain every captured run, so explain.json is beside each
    run's evidence whenever captures were on. None when no run has captures; otherwise one line saying what was
    done. A failure here loses nothing measured: the line says so and how to explain later."""
    runs = [(r, d) for r in records if (d := evidence_dir(folder, r)) is not None]
    if not runs:
        return None
    try:
        done = explain_folder(folder, records, None, tshark)
    except QuiclabError as e:
        return f"the captured runs were not explained ({e}); later: quiclab explain {folder}"
    bad = sum(1 for e in done if e.status != "explained")
    timed = sum(1 for r, _ in runs if resumed.applies(r))
    return (f"explained {len(done)} captured runs ({EXPLAIN_JSON} beside each run's evidence"
            + (f"; {resumed.SESSIONS_JSON} for the {timed} resume/0rtt QUIC runs" if timed else "")
            + (f"; {bad} not explainable or invalid: quiclab explain {folder} says why" if bad else "") + ")")
