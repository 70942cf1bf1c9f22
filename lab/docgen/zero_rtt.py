"""What 0-RTT moved earlier and what still waited (issue 37, item 4; docs/seeds.md, seed 004): per RTT, the resumed
(1-RTT) and the 0-RTT connection of a folder's resume/0rtt QUIC runs side by side, from each run's sessions.json
(lab/explain/resumed.py, written by `quiclab explain` and kept by `quiclab publish`), and one generated sentence.

Figures are medians over the folder's ok runs that were timed (the one median rule, lab/quantiles.py), pooled over
the point's other dimensions (e.g. both senders) at each RTT; n says how many runs each median has. Nothing is typed:
without sessions.json files the section says which commands make them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from lab.explain.folder import evidence_dir
from lab.explain.resumed import SESSIONS_JSON, SessionTimeline, applies
from lab.quantiles import median
from lab.results.schema import RunRecord
from lab.stats.stats import method_label
from lab.workloads.spec import parse_workload

KINDS = ("resume", "0rtt")
NAMES = {"resume": "resumed (1-RTT)", "0rtt": "0-RTT"}


def timelines(folder: Path, records: Sequence[RunRecord]) -> list[tuple[RunRecord, SessionTimeline]]:
    """The folder's ok resume/0rtt QUIC runs with a timed sessions.json, each with its timeline."""
    out = []
    for r in records:
        d = evidence_dir(folder, r)
        if r.status != "ok" or not applies(r) or d is None or not (d / SESSIONS_JSON).is_file():
            continue
        try:
            t = SessionTimeline.model_validate_json((d / SESSIONS_JSON).read_text(encoding="utf-8"))
        except (OSError, ValidationError):
            continue
        if t.status == "timed":
            out.append((r, t))
    return out


def _kind(r: RunRecord) -> str:
    return parse_workload(r.workload or "").kind


def _med(ts: Sequence[SessionTimeline], f: Callable[[SessionTimeline], float | int | None]) -> float | None:
    vals = [float(v) for t in ts if (v := f(t)) is not None]
    return median(vals) if vals else None


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _kb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.1f}"


def _by1(t: SessionTimeline) -> int | None:
    return t.bytes_by_round(1)


def _by2(t: SessionTimeline) -> int | None:
    return t.bytes_by_round(2)


ROWS: tuple[tuple[str, Callable[[SessionTimeline], float | int | None], Callable[[float | None], str]], ...] = (
    ("request sent at, ms", lambda t: t.request_ms, _ms),
    ("first response byte at, ms", lambda t: t.first_response_ms, _ms),
    ("handshake done at (HANDSHAKE_DONE), ms", lambda t: t.handshake_done_ms, _ms),
    ("response by 1 RTT, kB", _by1, _kb),
    ("response by 2 RTT, kB", _by2, _kb),
    ("last response byte at, ms", lambda t: t.last_response_ms, _ms),
    ("round of the last byte", lambda t: t.rounds[-1].k if t.rounds else None,
     lambda v: "-" if v is None else f"{v:g}"),
)


def _rtt(r: RunRecord) -> float:
    return round((r.rtt_s or 0.0) * 1000, 3)


def missing(shown: str, raw: str) -> list[str]:
    """What makes the timelines when the folder has none: its raw sweep folder (bash scripts/atlas.sh) keeps the
    captures."""
    return [f"No run of `{shown}/` carries {SESSIONS_JSON} yet (the resumed connection of each resume/0rtt QUIC run "
            "timed from its decrypted captures). It is made from the sweep's raw folder, which keeps the captures, "
            f"with the lab up: `uv run quiclab explain {raw}`, then `uv run quiclab publish {raw} "
            f"{Path(shown).name}` and `uv run quiclab docs`."]


def section(folder: Path, records: Sequence[RunRecord], shown: str) -> list[str]:
    """The markdown lines: a table per RTT (resumed vs 0-RTT medians) and the sentence, or what makes them."""
    head = ["What 0-RTT moved earlier, from the captures: the second (resuming) connection of each resume and 0rtt "
            f"QUIC run of `{shown}/` (`{SESSIONS_JSON}` beside each run's evidence, lab/explain/resumed.py). Each "
            "cell is resumed / 0-RTT, the median over the method's ok runs at that RTT (every sender pooled); times "
            "in ms from the client's first Initial (t0); \"by k RTT\" counts the response's bytes that reached the "
            "client by t0 + (k + 1/2) x RTT (round k: within half an RTT of k x RTT, the link's RTT); the last "
            "column: runs whose server, before the client's Handshake packet validated its address, could not send "
            "another full datagram under RFC 9000's limit of 3x the bytes it had received.", ""]
    timed = timelines(folder, records)
    if not timed:
        return missing(shown, f"results/atlas/{Path(shown).name}/<date>-{Path(shown).name}")
    by: dict[tuple[str, float, str], list[SessionTimeline]] = {}
    for r, t in timed:
        by.setdefault((method_label(r.protocol, r.client, r.server), _rtt(r), _kind(r)), []).append(t)
    cells = sorted({(m, rtt) for m, rtt, _ in by if all((m, rtt, kind) in by for kind in KINDS)},
                   key=lambda c: (c[0], c[1]))
    if not cells:
        return [*head, "The folder has no RTT with both resumed and 0-RTT runs timed."]
    out = [*head, "| method | RTT | runs (resumed / 0-RTT) | " + " | ".join(label for label, _, _ in ROWS)
           + " | 0-RTT: server at the amplification limit before address validation (runs) |",
           "|---" * (len(ROWS) + 4) + "|"]
    for m, rtt in cells:
        res, early = by[(m, rtt, "resume")], by[(m, rtt, "0rtt")]
        amp = [t.amplification for t in early if t.amplification]
        figures = [f"{fmt(_med(res, f))} / {fmt(_med(early, f))}" for _, f, fmt in ROWS]
        out.append(f"| {m} | {rtt:g} ms | {len(res)} / {len(early)} | " + " | ".join(figures)
                   + f" | {sum(1 for a in amp if a.limited)} of {len(amp)} |")
    out.append("")
    for m in dict.fromkeys(c[0] for c in cells):  # per method, at its largest RTT
        rtt = max(r for mm, r in cells if mm == m)
        out.append(sentence(rtt, by[(m, rtt, "resume")], by[(m, rtt, "0rtt")], shown,
                            m if len({c[0] for c in cells}) > 1 else ""))
    return out


def sentence(rtt: float, resumed: Sequence[SessionTimeline], early: Sequence[SessionTimeline], shown: str,
             method: str = "") -> str:
    """What 0-RTT moved earlier and what still waited, at `rtt`, in one sentence from the medians (`method` named
    when the folder has several)."""
    m = {k: (_med(resumed, f), _med(early, f)) for k, (_, f, _) in zip(
        ("request", "first", "done", "by1", "by2", "last", "rounds"), ROWS, strict=True)}
    amp = [t.amplification for t in early if t.amplification]
    limited = sum(1 for a in amp if a.limited)
    sent = median([a.sent_bytes for a in amp]) if amp else None
    limit = median([a.limit_bytes for a in amp]) if amp else None
    valid = median([a.validated_ms for a in amp]) if amp else None

    def diff(key: str) -> float | None:
        a, b = m[key]
        return None if a is None or b is None else a - b

    def earlier(key: str) -> str:
        d = diff(key)
        if d is None:
            return "(not measured)"
        return f"{abs(d):.0f} ms {'earlier' if d >= 0 else 'later'}"

    where = f"`{shown}/`" + (f", {method}" if method else "")
    parts = [f"At {rtt:g} ms RTT ({where}), 0-RTT sent the request {earlier('request')} than the resumed "
             f"connection (median {_ms(m['request'][1])} vs {_ms(m['request'][0])} ms) and its first response bytes "
             f"arrived {earlier('first')} ({_ms(m['first'][1])} vs {_ms(m['first'][0])} ms)"]
    if amp and sent is not None and limit is not None:
        held = 2 * limited >= len(amp)  # most runs' servers were held at the limit
        parts.append(f"{'but' if held else 'and'} that round brought {_kb(m['by1'][1])} kB of the response: the "
                     f"server's datagrams before it validated the client's address came to {sent / 1000:.1f} kB "
                     f"against a limit of {limit / 1000:.1f} kB (3x the client's {limit / 3000:.1f} kB), at the limit "
                     f"in {limited} of {len(amp)} runs"
                     + (", and the rest waited for the client's Handshake packet, which reached the server at "
                        f"{_ms(valid)} ms" if held else
                        f"; the client's Handshake packet reached it at {_ms(valid)} ms")
                     + f" (HANDSHAKE_DONE reached the client at {_ms(m['done'][1])} ms, resumed "
                       f"{_ms(m['done'][0])} ms)")
    d = diff("last")
    share = "" if d is None or not rtt else f", {d / rtt:.2f} of a round trip"
    parts.append(f"by 2 RTT the response stood at {_kb(m['by2'][1])} vs {_kb(m['by2'][0])} kB and it ended in round "
                 f"{_ms(m['rounds'][1])} vs {_ms(m['rounds'][0])}, its last byte {earlier('last')} "
                 f"({_ms(m['last'][1])} vs {_ms(m['last'][0])} ms{share})")
    return "; ".join(parts) + "."
