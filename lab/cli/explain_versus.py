"""`quiclab explain FOLDER --versus A,B --point P`: the IO around lab/explain/versus.py (which run, its capture
through tshark in the router, the curves' CSV and plot, the table or JSON). docs/explain.md."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from lab import terminal
from lab.errors import EnvironmentProblem, QuiclabError, UsageError
from lab.explain import tshark
from lab.explain import versus as vs
from lab.explain.folder import CLIENT_PCAP, KEYS, cut_short, evidence_dir
from lab.explain.rows import parse
from lab.results.schema import RunRecord


def _trace(folder: Path, record: RunRecord) -> vs.Trace:
    evdir = evidence_dir(folder, record)
    assert evdir is not None  # select() keeps captured runs only
    pcap, keys = evdir / CLIENT_PCAP, evdir / KEYS
    why = None
    if not pcap.is_file():
        why = f"no {CLIENT_PCAP} in {evdir}"
    elif not keys.is_file() or not keys.read_text(encoding="utf-8", errors="replace").strip():
        why = f"no TLS key log ({KEYS}) in {evdir}: the capture cannot be decrypted"
    elif (short := cut_short(pcap.read_bytes())) is not None:
        why = f"{pcap} is {short}"
    if why is None:
        tr = vs.trace(parse(tshark.fields(pcap, keys)), "quic" if record.protocol == "h3" else "tcp")
        if tr.request_s is None:
            why = f"no HTTP request is visible in {pcap} decrypted with {KEYS} (not this connection's keys?)"
        else:
            return tr
    raise QuiclabError(f"{record.run_key} is not explainable: {why}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text.replace("%", "pct").replace(">", "-")).strip("_")


def _write_csv(path: Path, rows: list[list[str]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(vs.CSV_HEADER)
            w.writerows(rows)
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {path}: {e.strerror or e}") from None


def _plot(path: Path, title: str, curves: list[tuple[str, vs.Analysis]]) -> Path | None:
    """The in-order curves of both runs, hole episodes shaded (SVG); None if matplotlib fails."""
    try:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 4.5))
        ax = fig.add_subplot()
        for (label, an), color in zip(curves, ("#ff7f0e", "#2ca02c"), strict=False):
            ax.step([t * 1000 for t in an.curve.t], an.curve.in_order, where="post", color=color, label=label)
            for e in an.episodes:
                ax.axvspan(e.start * 1000, e.end * 1000, color=color, alpha=0.12, lw=0)
        ax.set_xlabel("time from the client's first packet (ms)")
        ax.set_ylabel("bytes delivered in order (client side)")
        ax.set_title(title, fontsize=10)
        ax.legend(loc="best", fontsize=9)
        fig.savefig(path, format=path.suffix[1:], metadata={"Date": None} if path.suffix == ".svg" else None)
        return path
    except (OSError, ValueError, ImportError):
        return None


def versus_cmd(folder: Path, records: list[RunRecord], versus: str | None, point: str | None, run: str | None,
               json_out: bool, with_qlog: bool = False) -> None:
    if with_qlog:
        raise UsageError("--qlog and --versus do not go together: run them one after the other")
    if versus is None:
        raise UsageError("--point goes with --versus A,B (e.g. --versus h2,h3 --point 'loss=3%')")
    if run is not None:
        raise UsageError("--run and --versus do not go together: --versus picks the median run of each method")
    label, (name_a, runs_a), (name_b, runs_b) = vs.select(records, versus, point,
                                                          lambda r: evidence_dir(folder, r) is not None)
    sides = []
    for name, runs in ((name_a, runs_a), (name_b, runs_b)):
        totals = [float(r.total_s or 0.0) for r in runs]
        rec = runs[vs.median_index(totals)]
        sides.append(vs.components(name, rec.run_key, totals, float(rec.total_s or 0.0), _trace(folder, rec),
                                   rec.rate_bps))
    (ca, an_a), (cb, an_b) = sides
    rate = runs_a[0].rate_bps
    result = vs.versus(label, ca, cb, rate)
    stem = f"versus-{_slug(name_a)}-{_slug(name_b)}-{_slug(label)}"
    out = folder / "explain" / f"{stem}.csv"
    _write_csv(out, vs.csv_rows(name_a, ca.run_key, an_a.curve) + vs.csv_rows(name_b, cb.run_key, an_b.curve))
    result.curves_csv = str(out)
    svg = _plot(out.with_suffix(".svg"), f"{name_a} vs {name_b} at {label}: {ca.run_key}, {cb.run_key}",
                [(name_a, an_a), (name_b, an_b)])
    if json_out:
        terminal.raw(result.model_dump_json(indent=2))
        return
    cols = ("", name_a, name_b, f"{name_b} - {name_a}")
    f = "{:.1f}".format
    rows = [["runs (ok, captured)", str(ca.runs), str(cb.runs), ""],
            ["median transfer time ms", f(ca.median_ms), f(cb.median_ms), f(result.median_difference_ms)],
            ["run explained", ca.run_key, cb.run_key, ""],
            ["its transfer time ms", f(ca.total_ms), f(cb.total_ms), f(result.difference_ms)],
            ["  handshake ms", f(ca.handshake_ms), f(cb.handshake_ms), f(result.handshake_ms)],
            ["  loss recovery ms", f(ca.loss_recovery_ms), f(cb.loss_recovery_ms), f(result.loss_recovery_ms)],
            ["    stalled in hole episodes", f(ca.stalled_ms), f(cb.stalled_ms), ""],
            ["    re-sent bytes' link time", f(ca.resent_ms), f(cb.resent_ms), ""],
            ["  rest ms", f(ca.rest_ms), f(cb.rest_ms), f(result.rest_ms)],
            ["hole episodes", str(ca.episodes), str(cb.episodes), ""],
            ["last new byte at the client ms", f(ca.last_byte_ms or 0.0), f(cb.last_byte_ms or 0.0), ""]]
    terminal.table(f"{folder}: {name_b} vs {name_a} at {label} (handshake + loss recovery + rest = the transfer "
                   "time of the run explained; docs/explain.md)", cols, rows, right=cols[1:])
    for note in result.notes:
        terminal.line(f"note: {note}")
    terminal.line(f"curves: {out}" + (f" and {svg}" if svg else ""))
