"""KTH's and the survey's open questions (seeds 002, 003), answered from committed folders (lab/docgen/answers.py
assembles them).

5. **KTH's own measure**: throughput over the transfer only, bytes x 8 / (total_s - handshake_s) per run (a censored
   run: below size x 8 / (its end - handshake_s)); a run without handshake_s has no such figure, and a method with
   any such run is not computed (nothing is imputed). Per protocol, size and loss: the median with its CI. KTH's two
   claims, judged per protocol as KTH stated them: "over 100 Mbit/s for all sizes" without loss (lines 173-174: the
   CI of the median wholly above 100 Mbit/s at every size holds it, wholly below at any size fails it), and "did not
   vary so much" from 0.1 to 1 % loss (lines 174-175: per size the verdict of throughput at 1 % / at 0.1 % by the one
   rule, +-10 %: parity at every size holds it, a difference at any fails it).
6. **The survey with a loss-based arm** (survey-loss-cubic: TCP CUBIC vs ngtcp2's QUIC CUBIC) beside survey-loss
   (today's defaults): QUIC/TCP per rate x loss by the one rule, and the overhead: runs.csv `wire_overhead`, IP bytes
   both ways over the router per payload byte ((wire_down_bytes + wire_up_bytes) / size_bytes), the median with its
   CI per protocol; a censored run moved only part of its object, so it has no overhead figure and is counted as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.docgen.answer_stats import (
    MARGINS,
    Pick,
    compare,
    direction,
    folder_ref,
    judged_cell,
    median_text,
    not_measured,
    runs_of,
    sender,
)
from lab.docgen.atlas import Renderer
from lab.report.summary import md_table
from lab.results.schema import RunRecord
from lab.sizes import format_size
from lab.stats.stats import Obs, censored_at, describe, exclusion_reason, fallback_timeout, is_censored
from lab.stats.verdict import Bounded, Judged, fmt_bounded, fmt_ci, fmt_level, judge_metric

KTH = "kth-unshaped"
KTH_METHODS = (("TCP", Pick(KTH, "h1")), ("QUIC", Pick(KTH, "h3", "gtlsclient", "ngtcp2")))
OVER_BPS = 100e6  # KTH lines 173-174: "over 100 Mbit/s" for all sizes without loss
LITTLE_FROM, LITTLE_TO = 0.1, 1.0  # KTH lines 174-175: loss 0.1 % to 1 %
MBIT = 1e-6


@dataclass(frozen=True)
class Transfer:
    """One method's transfer-only throughputs at one size and loss: the results, their observations (None when a
    result has no handshake_s) and how many lack it."""

    results: list[RunRecord]
    obs: list[Obs] | None
    keys: list[tuple[int, int]]
    missing: int


def transfer_obs(r: RunRecord, fallback: float | None) -> Obs:
    """bytes x 8 / (total_s - handshake_s); a censored run below size x 8 / (its end - handshake_s)."""
    assert r.handshake_s is not None
    if not is_censored(r):
        assert r.total_s is not None
        span = r.total_s - r.handshake_s
        return Obs(r.size_bytes * 8 / span if span > 0 else None)
    end = censored_at(r, fallback)
    return Obs(r.size_bytes * 8 / (end - r.handshake_s) if end and end > r.handshake_s else None, -1)


def transfer(runs: Sequence[RunRecord]) -> Transfer:
    fb = fallback_timeout(runs)
    results = [r for r in runs if exclusion_reason(r) is None]
    missing = sum(1 for r in results if r.handshake_s is None)
    if missing:
        return Transfer(results, None, [], missing)
    return Transfer(results, [transfer_obs(r, fb) for r in results], [(r.repeat, r.seed) for r in results], 0)


def transfer_text(t: Transfer) -> str:
    if t.obs is None:
        return f"not computed: {t.missing} of {len(t.results)} runs have no handshake_s"
    cens = sum(1 for o in t.obs if o.rank)
    return f"{median_text(t.obs, MBIT, 'Mbit/s')}, n {len(t.obs)}" + (f" ({cens} censored)" if cens else "")


def over(t: Transfer) -> str:
    """"over", "under" or "undecided" (the CI of the median against OVER_BPS); "not computed"."""
    d = describe(t.obs) if t.obs else None
    if d is None or d.ci is None:
        return "not computed"
    lo, hi = d.ci.lo, d.ci.hi
    if lo.value is not None and lo.bound in ("", ">") and lo.value > OVER_BPS:
        return "over"
    if hi.value is not None and hi.bound in ("", "<") and hi.value < OVER_BPS:
        return "under"
    return "undecided"


def change(a: Transfer, b: Transfer) -> Judged | None:
    """Throughput at the higher loss / at the lower, by the one rule (different points: unpaired)."""
    if not a.obs or not b.obs:
        return None
    return judge_metric("time", a.obs, b.obs, a.keys, b.keys, MARGINS.median, MARGINS.alpha)


def claim(parts: Sequence[str], good: str, bad: str) -> str:
    if any(p == "not computed" for p in parts) or not parts:
        return "not computed"
    if all(p == good for p in parts):
        return "holds"
    return "fails" if any(p == bad for p in parts) else "undecided"


def _change_text(j: Judged | None) -> str:
    if j is None:
        return "not computed"
    ci = f" [{fmt_ci(j.ci)}, {fmt_level(j.ci)}]" if j.ci else ""
    return f"{fmt_bounded(Bounded.of(j.ratio))}{ci} {j.design}: {j.verdict}"


def kth_answer(r: Renderer) -> list[str]:
    f = r.folder(KTH)
    if f is None:
        return [f"{folder_ref(KTH)}: {not_measured(KTH)}.", ""]
    sizes = sorted({x.size_bytes for x in f.records})
    losses = sorted({x.loss_pct for x in f.records})
    cell = {(name, s, loss): transfer(runs_of(r, p, size=s, loss_pct=loss) or [])
            for name, p in KTH_METHODS for s in sizes for loss in losses}
    rows = [[format_size(s), f"{loss:g} %", *(transfer_text(cell[(n, s, loss)]) for n, _ in KTH_METHODS)]
            for s in sizes for loss in losses]
    claims, text = [], []
    for name, p in KTH_METHODS:
        at0 = [over(cell[(name, s, 0.0)]) for s in sizes]
        moves = [change(cell[(name, s, LITTLE_FROM)], cell[(name, s, LITTLE_TO)]) for s in sizes]
        verdicts = ["not computed" if j is None else j.verdict for j in moves]
        c1, c2 = claim(at0, "over", "under"), claim(verdicts, "equivalent", "differs")
        claims.append([f"{name}: {p.method}, sender {sender(runs_of(r, p) or [])}",
                       "; ".join(f"{format_size(s)} {o}" for s, o in zip(sizes, at0, strict=True)), f"**{c1}**",
                       "; ".join(f"{format_size(s)} {_change_text(j)}" for s, j in zip(sizes, moves, strict=True)),
                       f"**{c2}**"])
        text.append(f"{name}: \"over 100 Mbit/s for all sizes\" {c1}, \"little change from 0.1 to 1 %\" {c2}")
    missing = [n for n, _ in KTH_METHODS if any(cell[(n, s, loss)].missing for s in sizes for loss in losses)]
    lead = (f"From {folder_ref(KTH)}, throughput over the transfer only (bytes x 8 / (total_s - handshake_s)), "
            f"judged per protocol as KTH did: " + "; ".join(text) + ".")
    if missing:
        lead += (f" {', '.join(missing)}: runs without handshake_s, so not computed (never imputed); "
                 f"{not_measured(KTH, rerun=True)} with a client that reports it.")
    claim_cols = ["protocol", "0 % loss, per size: the CI of the median vs 100 Mbit/s", "over 100 Mbit/s?",
                  f"throughput at {LITTLE_TO:g} % / at {LITTLE_FROM:g} % [CI]: verdict", "little change?"]
    cols = ["size", "loss", *(f"{n} ({p.method}): median Mbit/s [CI]" for n, p in KTH_METHODS)]
    return [lead, "", md_table((claim_cols, claims)), "", md_table((cols, rows)), ""]


# ---------------------------------------------------------------------------------------------------------------
# The survey: a loss-based arm and the overhead

SURVEY, SURVEY_CUBIC = "survey-loss", "survey-loss-cubic"
SURVEY_ARMS: tuple[tuple[str, Pick, Pick], ...] = (
    (SURVEY, Pick(SURVEY, "h3"), Pick(SURVEY, "h1")),
    (SURVEY_CUBIC, Pick(SURVEY_CUBIC, "h3", "gtlsclient", "ngtcp2"), Pick(SURVEY_CUBIC, "h1")),
)


def overhead_text(runs: Sequence[RunRecord]) -> str:
    """The median wire_overhead [CI], n; the censored runs counted (no overhead figure: a part of the object)."""
    obs = [Obs(x.wire_overhead) for x in runs if x.status == "ok" and x.wire_overhead is not None]
    cens = sum(1 for x in runs if is_censored(x))
    none = sum(1 for x in runs if x.status == "ok" and x.wire_overhead is None)
    extra = [f"{cens} censored, no figure"] * bool(cens) + [f"{none} without wire bytes"] * bool(none)
    return f"{median_text(obs)}, n {len(obs)}" + (f" ({'; '.join(extra)})" if extra else "")


def survey_rows(r: Renderer, preset: str, quic: Pick, tcp: Pick) -> tuple[list[list[str]], list[Judged | None]]:
    f = r.folder(preset)
    assert f is not None
    rows, judged = [], []
    points = dict.fromkeys(x.point_label for x in sorted(f.records, key=lambda x: x.point))
    for point in points:
        q, t = runs_of(r, quic, tokens=point.split()) or [], runs_of(r, tcp, tokens=point.split()) or []
        j = compare(q, t)
        judged.append(j)
        rows.append([folder_ref(preset), point, f"{sender(q)} / {sender(t)}", judged_cell(j), overhead_text(t),
                     overhead_text(q)])
    q_all, t_all = runs_of(r, quic) or [], runs_of(r, tcp) or []
    rows.append([folder_ref(preset), "all points", "", "", overhead_text(t_all), overhead_text(q_all)])
    return rows, judged


def survey_answer(r: Renderer) -> list[str]:
    rows: list[list[str]] = []
    text: list[str] = []
    for preset, quic, tcp in SURVEY_ARMS:
        if r.folder(preset) is None:
            text.append(f"{folder_ref(preset)}: {not_measured(preset)}.")
            continue
        got, judged = survey_rows(r, preset, quic, tcp)
        rows += got
        dirs = [direction(j) for j in judged]
        text.append(f"{folder_ref(preset)} ({quic.method} vs {tcp.method}): QUIC faster at "
                    f"{dirs.count('QUIC faster')}, slower at {dirs.count('QUIC slower')}, parity at "
                    f"{dirs.count('parity')}, no verdict at {dirs.count('no verdict')} of {len(dirs)} points; "
                    f"overhead over all points: TCP {got[-1][4]}, QUIC {got[-1][5]} wire bytes per payload byte.")
    cols = ["folder", "point", "senders QUIC / TCP (read back)", "QUIC/TCP time [CI]: lab says",
            "TCP overhead: median [CI], n", "QUIC overhead: median [CI], n"]
    return [" ".join(text), "", md_table((cols, rows)) if rows else "", ""]
