"""The seed-style summary (summary.md): header, per-method table, HTTP/3-vs-TCP ratios, excluded runs, self-check.

The table builders return (columns, rows) of plain strings so the HTML report and the CLI render the same cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lab.results.schema import RunRecord
from lab.results.stats import (
    CI,
    GroupStats,
    RatioStats,
    exclusion_counts,
    exclusion_reason,
    method_label,
    protocol_label,
    ratios,
    summarize,
)

Table = tuple[list[str], list[list[str]]]
EXCLUSION_RULE = "Statistics exclude runs whose status is not ok (and ok runs without a measured time)."
RATIO_NOTE = ("Ratios of medians over the repeats that are ok in both protocols (paired by repeat, same link seed). "
              "Time ratio < 1 and goodput ratio > 1 mean HTTP/3 was faster.")
NA = "-"  # a missing value
UNSUPPORTED = "unsupported"  # a client/server/protocol combination the registry rules out (never run)
EN = "\u2013"  # en dash between the ends of a range
CI_NOTE = "95 % CI: percentile bootstrap of the median (2000 resamples, fixed seed); none when n < 2."


def sig3(v: float | None) -> str:
    """Three significant digits without exponent notation: 18.6, 0.0123, 4.30, 1234."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return NA
    if v == 0 or math.isinf(v):
        return f"{v:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def fmt_ci(ci: CI | None, scale: float = 1.0) -> str:
    return f"{sig3(ci[0] * scale)}{EN}{sig3(ci[1] * scale)}" if ci else NA


def first(manifest: dict[str, Any], *keys: str) -> Any:
    """The first present, non-empty value among dotted keys ("git.commit")."""
    for key in keys:
        v: Any = manifest
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if v not in (None, "", [], {}):
            return v
    return None


def _join(values: Sequence[Any]) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values)) or NA


def header_items(records: Sequence[RunRecord], manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """Key facts of the sweep, from the manifest with the runs as fallback."""
    ok = sum(1 for r in records if exclusion_reason(r) is None)
    repeats = first(manifest, "repeats") or (max((r.repeat for r in records), default=-1) + 1)
    commit = first(manifest, "git_commit", "git.commit", "commit")
    if commit and first(manifest, "git_dirty", "git.dirty"):
        commit = f"{commit} (uncommitted changes)"
    items = [
        ("sweep", str(first(manifest, "name", "sweep") or _join([r.sweep for r in records]))),
        ("scenario", str(first(manifest, "scenario.name", "scenario") or NA)),
        ("preset", str(first(manifest, "preset") or NA)),
        ("date", str(first(manifest, "started_at", "created_at", "date")
                     or min((r.started_at for r in records), default=NA))),
        ("git commit", str(commit or NA)),
        ("shaper", str(first(manifest, "shaper") or _join([r.shaper for r in records]))),
        ("swept parameter", _join([r.x_name for r in records])),
        ("object size (bytes)", _join(sorted({r.size_bytes for r in records}))),
        ("runs", f"{len(records)} ({ok} ok, {len(records) - ok} excluded)"),
        ("repeats", str(repeats)),
    ]
    return items


def _median_iqr(d: Any, scale: float = 1.0) -> str:
    if d is None:
        return NA
    return f"{sig3(d.median * scale)} [{sig3(d.q1 * scale)}{EN}{sig3(d.q3 * scale)}]"


def _excluded_cell(g: GroupStats) -> str:
    if not g.n_excluded:
        return "0"
    return f"{g.n_excluded} (" + ", ".join(f"{k} {v}" for k, v in g.excluded.items()) + ")"


def stats_table(groups: Sequence[GroupStats]) -> Table:
    cols = ["parameter", "method", "n", "transfer time s median [IQR]", "time 95 % CI",
            "goodput Mbit/s median [IQR]", "goodput 95 % CI", "excluded"]
    rows = []
    for g in groups:
        if g.n == 0 and set(g.excluded) == {UNSUPPORTED}:  # the matrix says "unsupported", not a failure
            rows.append([g.point_label, method_label(g.protocol, g.client, g.server), "0", UNSUPPORTED, NA,
                         UNSUPPORTED, NA, _excluded_cell(g)])
            continue
        rows.append([g.point_label, method_label(g.protocol, g.client, g.server), str(g.n),
                     _median_iqr(g.total_s), fmt_ci(g.total_s.ci if g.total_s else None),
                     _median_iqr(g.goodput_bps, 1e-6), fmt_ci(g.goodput_bps.ci if g.goodput_bps else None, 1e-6),
                     _excluded_cell(g)])
    return cols, rows


def ratio_table(rs: Sequence[RatioStats]) -> Table:
    cols = ["parameter", "client→server", "comparison", "pairs", "time ratio", "time 95 % CI",
            "goodput ratio", "goodput 95 % CI"]
    rows = [[r.point_label, f"{r.client}→{r.server}",
             f"{protocol_label(r.numerator)} / {protocol_label(r.denominator)}", str(r.n_pairs),
             sig3(r.time_ratio), fmt_ci(r.time_ci), sig3(r.goodput_ratio), fmt_ci(r.goodput_ci)] for r in rs]
    return cols, rows


def clean(text: str, limit: int = 200) -> str:
    """One line, at most `limit` characters (failure messages can be long and multi-line)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def excluded_table(records: Sequence[RunRecord]) -> Table:
    counts = exclusion_counts(records)
    return ["status", "reason", "runs"], [[s, clean(f) or NA, str(n)] for (s, f), n in counts.items()]


def implementations_table(manifest: dict[str, Any]) -> Table | None:
    """The sweep's clients and servers: version string and congestion control (manifest "implementations")."""
    impls = manifest.get("implementations")
    if not isinstance(impls, dict) or not impls:
        return None
    rows = []
    for name, doc in impls.items():
        if not isinstance(doc, dict):
            continue
        cc = doc.get("cc") if isinstance(doc.get("cc"), dict) else {}
        rows.append([str(name), str(doc.get("role", NA)), ", ".join(doc.get("protocols", [])) or NA,
                     clean(str(doc.get("version", NA)), 120), str(cc.get("tcp") or NA), str(cc.get("quic") or NA)])
    return ["implementation", "role", "protocols", "version", "TCP congestion control", "QUIC congestion control"], rows


def self_check_table(manifest: dict[str, Any]) -> Table | None:
    check = manifest.get("self_check")
    if not check:
        return None
    if not isinstance(check, dict):
        return ["check", "result"], [["self_check", clean(str(check))]]
    rows = []
    for name, value in check.items():
        if isinstance(value, dict):
            shown = " · ".join(f"{k}: {sig3(v) if isinstance(v, float) else v}" for k, v in value.items())
        else:
            shown = sig3(value) if isinstance(value, float) else str(value)
        rows.append([str(name), clean(shown, 400)])
    return ["check", "result"], rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(table: Table) -> str:
    cols, rows = table
    lines = ["| " + " | ".join(_md_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def receiver_drops_note(records: Sequence[RunRecord]) -> str:
    """One sentence when ok runs lost datagrams in the client's own UDP receive buffers (losses the link did not
    make, e.g. the host's net.core.rmem_default too small for a client that does not size its socket), else ""."""
    hit = [r for r in records if r.status == "ok" and r.client_rcvbuf_drops]
    if not hit:
        return ""
    ok = sum(1 for r in records if r.status == "ok")
    return (f"Receiver-side drops: {len(hit)} of {ok} ok runs lost datagrams in the client's own UDP receive "
            f"buffer ({sum(r.client_rcvbuf_drops or 0 for r in hit)} in all; column client_rcvbuf_drops): "
            "losses the endpoint made, not the link. Raise net.core.rmem_default on the host (scripts/setup.sh "
            "sets 8 MB) or compare with care.")


def cc_markdown(records: Sequence[RunRecord]) -> list[str]:
    """The sender's congestion control per run, the link's loss counts, and the Reno-model check."""
    from lab.results import cc_check

    senders = cc_check.sender_table(records)
    if senders is None:
        return []
    parts = ["## Sender congestion control and loss response", "", md_table(senders), ""]
    checks = cc_check.checks(records)
    if checks:
        parts += ["### Claims vs the Reno model", "", cc_check.NOTE, "", md_table(cc_check.table(checks)), ""]
    figs = cc_check.figures(records)
    if figs:
        parts += [f"Loss-response figures: {len(figs)} (evidence/<run>/loss-response.png, linked from report.html).",
                  ""]
    return parts


def summary_markdown(records: Sequence[RunRecord], manifest: dict[str, Any]) -> str:
    items = header_items(records, manifest)
    name = items[0][1]
    parts = [f"# quiclab sweep {name}", ""]
    parts += [f"- **{k}**: {_md_cell(v)}" for k, v in items[1:]]
    impls = implementations_table(manifest)
    if impls:
        parts += ["", "## Implementations", "", md_table(impls)]
    parts += ["", "## Transfer time and goodput per method", "", CI_NOTE, "",
              md_table(stats_table(summarize(records))) if records else "No runs.", ""]
    drops = receiver_drops_note(records)
    if drops:
        parts += [f"**{drops}**", ""]
    rat = ratios(records)
    parts += ["## HTTP/3 vs TCP", "", RATIO_NOTE, "",
              md_table(ratio_table(rat)) if rat else "No HTTP/3 and TCP runs to compare.", ""]
    parts += cc_markdown(records)
    exc = excluded_table(records)
    n_exc = sum(int(r[2]) for r in exc[1])
    parts += ["## Excluded runs", "", EXCLUSION_RULE, "",
              f"{n_exc} of {len(records)} runs excluded." if n_exc else "No runs excluded.", ""]
    if n_exc:
        parts += [md_table(exc), ""]
    check = self_check_table(manifest)
    parts += ["## Shaper self-check", "", md_table(check) if check else "No self-check in the manifest.", ""]
    return "\n".join(parts)
