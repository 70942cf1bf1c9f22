"""The worked example's table in docs/explain.md, rendered from a committed explained sweep (results/reference/
explain-nginx): one row per method with the medians of its runs' explain.json figures, and the `--versus` split of
the median runs (explain/versus-*.csv is the curve; the split is recomputed here from the records). A unit test
fails when the docs' block no longer equals what this renders from the folder."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from lab.explain.model import EXPLAIN_JSON, Explanation, Figure
from lab.quantiles import median
from lab.results import store
from lab.stats.stats import method_label


def _median(values: list[float | int | None], fmt: str = ".0f") -> str:
    known = [v for v in values if v is not None]
    return format(median(known), fmt) if known else "-"


def _v(f: Figure | None) -> float | int | None:
    return None if f is None else f.value


def _explained(folder: Path) -> tuple[dict[str, list[tuple[float, Explanation]]], dict[str, str]]:
    """Per method (in the report's label): its ok runs with a record, as (transfer time, explanation), and the
    sender's congestion control its runs read back."""
    rows: dict[str, list[tuple[float, Explanation]]] = defaultdict(list)
    sender: dict[str, str] = {}
    for r in store.load_runs(folder):
        path = folder / "evidence" / r.run_key.replace("/", "_") / EXPLAIN_JSON
        if r.status == "ok" and r.total_s is not None and path.is_file():
            method = method_label(r.protocol, r.client, r.server)
            sender.setdefault(method, r.cc_sender or "?")
            rows[method].append((r.total_s, Explanation.model_validate_json(path.read_text())))
    return rows, sender


def table(folder: Path) -> str:
    """Markdown: per method, n and the medians of time, drops toward the client (emulator), data lost, bytes
    retransmitted, first-loss repair, inferred window reductions and timeouts (QUIC: PTOs)."""
    rows, sender = _explained(folder)
    out = ["| method (sender) | runs | time s | drops toward the client (emulator) | data packets lost | bytes "
           "retransmitted | first loss repaired in ms | window reductions | probe timeouts |",
           "|---|---|---|---|---|---|---|---|---|"]
    for method, runs in sorted(rows.items()):
        es = [e for _, e in runs]
        down = [e.path.down if e.path is not None else None for e in es]
        out.append("| " + " | ".join([
            f"{method} ({sender[method]})", str(len(runs)), _median([t for t, _ in runs], ".3g"),
            f"{_median([_v(d.dropped) if d else None for d in down])} "
            f"({_median([_v(d.emulator_dropped) if d else None for d in down])})",
            _median([_v(e.loss.data_packets_lost) if e.loss else None for e in es]),
            _median([_v(e.loss.bytes_retransmitted) if e.loss else None for e in es]),
            _median([_v(e.loss.first_loss_repair_ms) if e.loss else None for e in es]),
            _median([_v(e.window.loss_episodes) if e.window else None for e in es]),
            _median([_v(e.loss.timeouts) if e.loss else None for e in es])]) + " |")
    return "\n".join(out) + "\n"


def split(versus_json: Path) -> str:
    """Markdown: the `--versus --json` record of the two median runs, its split of the time difference."""
    d = json.loads(versus_json.read_text())
    a, b = d["a"], d["b"]
    out = [f"| `--versus` | {a['method']} | {b['method']} | difference |", "|---|---|---|---|"]
    for key, label in (("total_ms", "the median run's transfer time ms"), ("handshake_ms", "handshake ms"),
                       ("loss_recovery_ms", "loss recovery ms"), ("rest_ms", "rest ms")):
        diff = d["difference_ms" if key == "total_ms" else key]
        out.append(f"| {label} | {a[key]:.0f} | {b[key]:.0f} | {diff:.0f} |")
    out.append(f"| stalled behind a hole ms | {a['stalled_ms']:.0f} | {b['stalled_ms']:.0f} | |")
    out.append(f"| hole episodes | {a['episodes']} | {b['episodes']} | |")
    return "\n".join(out) + "\n"


def hol_table(folder: Path) -> str:
    """Markdown: per method of a page-load sweep (results/reference/explain-pages), n, the median page time and
    the medians of its runs' head-of-line figures (lab/explain/hol.py)."""
    rows, _ = _explained(folder)
    out = ["| method | runs | page time s | a hole holds | streams with bytes held (of) | bytes held | longest "
           "hole-fill delay ms | data packets lost | first loss repaired in ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for method, runs in sorted(rows.items()):
        hs = [e.head_of_line for _, e in runs]
        es = [e for _, e in runs]
        level = {h.level for h in hs if h is not None}
        out.append("| " + " | ".join([
            method, str(len(runs)), _median([t for t, _ in runs], ".3g"),
            ", ".join(sorted("every stream above it" if lv == "tcp byte stream" else "its own stream only"
                             for lv in level)) or "-",
            f"{_median([_v(h.streams_held) if h else None for h in hs])} "
            f"({_median([_v(h.streams) if h else None for h in hs])})",
            _median([_v(h.bytes_held) if h else None for h in hs]),
            _median([_v(h.longest_hole_fill_delay_ms) if h else None for h in hs]),
            _median([_v(e.loss.data_packets_lost) if e.loss else None for e in es]),
            _median([_v(e.loss.first_loss_repair_ms) if e.loss else None for e in es])]) + " |")
    return "\n".join(out) + "\n"


_FROM = re.compile(r"<!-- generated from (\S+) -->\n(.*?)<!-- end generated -->", re.S)


def render(src: str, root: Path) -> str:
    """One docs/explain.md block by its source: the versus record, the page-load sweep or the nginx sweep."""
    path = root / src
    if src.endswith(".json"):
        return split(path)
    if src.endswith("explain-pages"):
        return hol_table(path)
    return limits_table(path) if src.endswith("explain-rtt") else table(path)


def fill(text: str, root: Path) -> str:
    """docs/explain.md with every `<!-- generated from SRC -->` block rendered from its committed source."""
    return _FROM.sub(lambda m: f"<!-- generated from {m.group(1)} -->\n{render(m.group(1), root)}"
                               "<!-- end generated -->", text)


def limits_table(folder: Path) -> str:
    """Markdown: per method of an explained bulk sweep (results/reference/explain-rtt), where the time went: the
    medians of its runs' split (handshake, loss recovery), slow-start exit, emulator drops and what limited the
    sender (the capture's receiver-limited share; the kernel's rwnd-limited share for TCP)."""
    rows, _ = _explained(folder)
    out = ["| method | runs | time s | handshake ms | slow start left at ms | packets dropped (emulator) | loss "
           "recovery ms | receiver-limited share | kernel: rwnd-limited share |",
           "|---|---|---|---|---|---|---|---|---|"]
    for method, runs in sorted(rows.items()):
        es = [e for _, e in runs]
        tl = [e.timeline for e in es]
        down = [e.path.down if e.path is not None else None for e in es]
        win = [e.window for e in es]
        out.append("| " + " | ".join([
            method, str(len(runs)), _median([t for t, _ in runs], ".3g"),
            _median([t.handshake_ms if t else None for t in tl]),
            _median([_v(w.slow_start_exit_ms) if w else None for w in win]),
            _median([_v(d.emulator_dropped) if d else None for d in down]),
            _median([t.loss_recovery_ms if t else None for t in tl]),
            _median([_v(w.flow_control_limited_share) if w else None for w in win], ".2f"),
            _median([_v(e.sender_kernel.rwnd_limited_share) if e.sender_kernel else None for e in es], ".2f")])
            + " |")
    return "\n".join(out) + "\n"
