"""The seed-style summary (summary.md): header, per-method table, HTTP/3-vs-TCP ratios, excluded runs, self-check.

The table builders return (columns, rows) of plain strings so the HTML report and the CLI render the same cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lab.report.until_report import TITLE as UNTIL_TITLE
from lab.report.until_report import until_section
from lab.results.folder import Manifest, as_doc
from lab.results.schema import RunRecord
from lab.stats.fmt import EN, NA, fmt_ci, fmt_est, fmt_level, sig3

if TYPE_CHECKING:
    from lab.stats import cc_check
from lab.stats.stats import (
    Dist,
    GroupStats,
    PairedRatio,
    RatioStats,
    censored_counts,
    censored_runs,
    exclusion_counts,
    exclusion_reason,
    is_censored,
    method_label,
    protocol_label,
)
from lab.stats.sweep_stats import SweepStats, sweep_stats

Table = tuple[list[str], list[list[str]]]
ManifestLike = Manifest | Mapping[str, Any]
EXCLUSION_RULE = ("Statistics exclude runs that are not results: status unsupported (never run), interrupted "
                  "(legacy rows) and ok runs without a measured time. Failed and timed-out runs are results: they "
                  "count as not completed within their timeout (censored), listed under \"Runs that did not "
                  "complete\".")
CENSORING_RULE = ("A failed or timed-out run did not deliver the verified object within its timeout (timeout_s): "
                  "it counts in n, censored at its own end (total_s: when it failed or timed out): its time ranks "
                  "above every completed time, its goodput below every completed goodput.")
CI_NOTE = ("n = results (completed + censored runs). Median and IQR interpolate linearly. CI: the distribution-free "
           "order-statistic interval of the median [x(k), x(n\u2212k+1)], with the narrowest k whose exact binomial "
           "coverage is \u2265 95 %; below n = 6 no such pair exists and the CI is the range [min, max] at the level "
           "it has (93.8 % at n = 5, 87.5 % at 4, 75 % at 3, 50 % at 2); none below n = 2. \"CI level\" is the "
           "coverage each row's CI actually has. Failed and timed-out runs are censored at their own end (when they "
           "failed or timed out): a censored time ranks above every completed time, a censored goodput below every "
           "completed one; a median, quartile or CI end that falls on one shows as the bound it has: \">t\" "
           "(time), \"<g\" (goodput).")
RATIO_NOTE = ("Ratio = the median of the per-pair ratios HTTP/3 \u00f7 TCP, a pair being the same point, client, "
              "server and repeat (the same link seed), with the order-statistic CI of that median and its level (same "
              "rule as above). Time ratio < 1 and goodput ratio > 1 mean HTTP/3 was faster. A pair with one side "
              "censored has a ratio known only as a bound and ranks beyond every pair that both completed (time ratio "
              "\">r\" when HTTP/3 did not complete, \"<r\" when TCP did not); a pair with both sides censored is "
              "indeterminate and excluded, as is a repeat with a result on one side only (unpaired); both counted.")
UNSUPPORTED = "unsupported"  # a client/server/protocol combination the registry rules out (never run)


def fmt_counts(total: int, parts: dict[str, int]) -> str:
    """"0", or "3 (failed 2, timeout 1)"."""
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{k} {v}" for k, v in parts.items()) + ")"


def first(manifest: ManifestLike, *keys: str) -> Any:
    """The first present, non-empty value among dotted keys ("git.commit")."""
    doc = as_doc(manifest)
    for key in keys:
        v: Any = doc
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if v not in (None, "", [], {}):
            return v
    return None


def _join(values: Sequence[Any]) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values)) or NA


def header_items(records: Sequence[RunRecord], manifest: ManifestLike) -> list[tuple[str, str]]:
    """Key facts of the sweep, from the manifest with the runs as fallback."""
    manifest = as_doc(manifest)
    excluded = sum(1 for r in records if exclusion_reason(r) is not None)
    censored = sum(1 for r in records if is_censored(r))
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
        ("runs", f"{len(records)} ({len(records) - excluded - censored} completed, {censored} censored, "
                 f"{excluded} excluded)"),
        ("repeats", str(repeats)),
    ]
    return items


def _median_iqr(d: Dist | None, scale: float = 1.0) -> str:
    if d is None:
        return NA
    return f"{fmt_est(d.median, scale)} [{fmt_est(d.q1, scale)}{EN}{fmt_est(d.q3, scale)}]"


def stats_table(groups: Sequence[GroupStats]) -> Table:
    """Per point and method: n (results), time and goodput median [IQR] and CI, the CI's level (time and goodput
    come from the same runs, so their CIs share it), censored and excluded counts."""
    cols = ["parameter", "method", "n", "time s median [IQR]", "time CI", "goodput Mbit/s median [IQR]",
            "goodput CI", "CI level", "censored", "excluded"]
    rows = []
    for g in groups:
        excluded = fmt_counts(g.n_excluded, g.excluded)
        if g.n == 0 and set(g.excluded) == {UNSUPPORTED}:  # the matrix says "unsupported", not a failure
            rows.append([g.point_label, method_label(g.protocol, g.client, g.server), "0", UNSUPPORTED, NA,
                         UNSUPPORTED, NA, NA, "0", excluded])
            continue
        t, gp = g.total_s, g.goodput_bps
        rows.append([g.point_label, method_label(g.protocol, g.client, g.server), str(g.n),
                     _median_iqr(t), fmt_ci(t.ci if t else None),
                     _median_iqr(gp, 1e-6), fmt_ci(gp.ci if gp else None, 1e-6), fmt_level(t.ci if t else None),
                     fmt_counts(g.n_censored, g.censored), excluded])
    return cols, rows


def pair_cells(p: PairedRatio) -> list[str]:
    """pairs, time ratio, its CI, goodput ratio, its CI, CI level, censored pairs, excluded pairs."""
    t, g = p.time, p.goodput
    return [str(p.n_pairs), fmt_est(t.median if t else None), fmt_ci(t.ci if t else None),
            fmt_est(g.median if g else None), fmt_ci(g.ci if g else None), fmt_level(t.ci if t else None),
            str(p.n_censored), fmt_counts(p.n_excluded, p.excluded)]


PAIR_COLUMNS = ["pairs", "time ratio", "time CI", "goodput ratio", "goodput CI", "CI level", "censored pairs",
                "excluded pairs"]


def ratio_table(rs: Sequence[RatioStats]) -> Table:
    cols = ["parameter", "client→server", "comparison", *PAIR_COLUMNS]
    rows = [[r.point_label, f"{r.client}→{r.server}",
             f"{protocol_label(r.numerator)} / {protocol_label(r.denominator)}", *pair_cells(r.pairs)] for r in rs]
    return cols, rows


def clean(text: str, limit: int = 200) -> str:
    """One line, at most `limit` characters (failure messages can be long and multi-line)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def excluded_table(records: Sequence[RunRecord]) -> Table:
    counts = exclusion_counts(records)
    return ["status", "reason", "runs"], [[s, clean(f) or NA, str(n)] for (s, f), n in counts.items()]


def censored_table(records: Sequence[RunRecord]) -> Table:
    counts = censored_counts(records)
    return ["status", "reason", "runs"], [[s, clean(f) or NA, str(n)] for (s, f), n in counts.items()]


def implementations_table(manifest: ManifestLike) -> Table | None:
    """The sweep's clients and servers: version string and congestion control (manifest "implementations")."""
    impls = as_doc(manifest).get("implementations")
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


def self_check_table(manifest: ManifestLike) -> Table | None:
    check = as_doc(manifest).get("self_check")
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


def cc_markdown(records: Sequence[RunRecord], checks: Sequence[cc_check.Check] | None = None) -> list[str]:
    """The sender's congestion control per run, the link's loss counts, and the Reno-model check (`checks`: the
    records' checks when already computed)."""
    from lab.stats import cc_check

    senders = cc_check.sender_table(records)
    checks = checks if checks is not None else cc_check.checks(records)
    if senders is None and not checks:
        return []
    parts = ["## Sender congestion control and loss response", ""]
    if senders is not None:
        parts += [md_table(senders), ""]
    if checks:
        parts += ["### Claims vs the Reno model", "", cc_check.note(), "", md_table(cc_check.table(checks)), ""]
    figs = cc_check.figures(records)
    if figs:
        parts += [f"Loss-response figures: {len(figs)} (evidence/<run>/loss-response.png, linked from report.html).",
                  ""]
    return parts


def summary_markdown(records: Sequence[RunRecord], manifest: ManifestLike, stats: SweepStats | None = None) -> str:
    """summary.md from the records, the manifest and the records' statistics (computed here when not given)."""
    manifest = as_doc(manifest)
    stats = stats if stats is not None else sweep_stats(records)
    items = header_items(records, manifest)
    name = items[0][1]
    parts = [f"# quiclab sweep {name}", ""]
    parts += [f"- **{k}**: {_md_cell(v)}" for k, v in items[1:]]
    impls = implementations_table(manifest)
    if impls:
        parts += ["", "## Implementations", "", md_table(impls)]
    parts += ["", "## Transfer time and goodput per method", "", CI_NOTE, "",
              md_table(stats_table(stats.groups)) if records else "No runs.", ""]
    drops = receiver_drops_note(records)
    if drops:
        parts += [f"**{drops}**", ""]
    rat = stats.ratios
    until = until_section(manifest)
    if until is not None:
        parts += [f"## {UNTIL_TITLE}", "", until.note, "", *([md_table(until.table), ""] if until.table else [])]
    parts += ["## HTTP/3 vs TCP", "", RATIO_NOTE, "",
              md_table(ratio_table(rat)) if rat else "No HTTP/3 and TCP runs to compare.", ""]
    parts += cc_markdown(records, stats.cc_checks)
    cens = censored_runs(records)
    parts += ["## Runs that did not complete", "", CENSORING_RULE, "",
              f"{len(cens)} of {len(records)} runs did not complete (censored)." if cens
              else "Every run that is a result completed.", ""]
    if cens:
        parts += [md_table(censored_table(records)), ""]
    exc = excluded_table(records)
    n_exc = sum(int(r[2]) for r in exc[1])
    parts += ["## Excluded runs", "", EXCLUSION_RULE, "",
              f"{n_exc} of {len(records)} runs excluded." if n_exc else "No runs excluded.", ""]
    if n_exc:
        parts += [md_table(exc), ""]
    check = self_check_table(manifest)
    parts += ["## Shaper self-check", "", md_table(check) if check else "No self-check in the manifest.", ""]
    return "\n".join(parts)
