"""What the open questions' answers (lab/docgen/answers.py) share: picking a method's runs out of a committed folder,
comparing two methods by the one rule, medians with their CIs, and the line for a folder not committed yet.

Every number goes through lab/stats: medians and their order-statistic CIs at their true level (stats.describe),
failed and timed-out runs censored at their own end (stats.run_obs: a time above it, a rate below it), never
dropped; comparisons by verdict.judge_runs (paired where both methods ran the same repeats over the same link seeds,
else unpaired, the design named), the direction as the atlas states it (atlas.direction_of, +-10 %).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lab.docgen.atlas import PARITY, Direction, Renderer, direction_of
from lab.results.schema import RunRecord
from lab.stats import fmt as sfmt
from lab.stats.stats import Est, Obs, describe, method_label
from lab.stats.verdict import Bounded, Judged, Margins, fmt_bounded, fmt_ci, fmt_level, group_samples, judge_runs

MARGINS = Margins()  # the lab's default margins (+-10 % for medians), as the atlas's tables
REFERENCE = "results/reference"
_FLIP = {"": "", ">": "<", "<": ">", "?": "?"}


@dataclass(frozen=True)
class Pick:
    """One method's runs in one folder: protocol, client, server, and point-label tokens its points must carry
    (e.g. "cc=cubic" in a folder that sweeps the sender)."""

    preset: str
    protocol: str
    client: str = "curl"
    server: str = "nginx"
    tokens: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        return method_label(self.protocol, self.client, self.server)


def folder_ref(preset: str) -> str:
    return f"`{REFERENCE}/{preset}/`"


def not_measured(preset: str, rerun: bool = False) -> str:
    """The line a subsection prints for a folder not committed yet: the command that makes it, no number."""
    return f"not yet measured: `bash scripts/atlas.sh {'--rerun ' if rerun else ''}{preset}`"


def select(records: Sequence[RunRecord], pick: Pick, *, size: int | None = None, rtt_s: float | None = None,
           loss_pct: float | None = None, tokens: Sequence[str] = ()) -> list[RunRecord]:
    """The pick's runs (never the unsupported ones: they did not run) at the link and point tokens asked for."""
    need = set(pick.tokens) | set(tokens)
    return [r for r in records
            if (r.protocol, r.client, r.server) == (pick.protocol, pick.client, pick.server)
            and r.status != "unsupported" and need <= set(r.point_label.split())
            and (size is None or r.size_bytes == size)
            and (rtt_s is None or math.isclose(r.rtt_s, rtt_s, abs_tol=1e-6))
            and (loss_pct is None or math.isclose(r.loss_pct, loss_pct, abs_tol=1e-9))]


def runs_of(r: Renderer, pick: Pick, **where: object) -> list[RunRecord] | None:
    """select() in the pick's committed folder; None when the folder is not committed."""
    f = r.folder(pick.preset)
    return None if f is None else select(f.records, pick, **where)  # type: ignore[arg-type]


def sender(runs: Sequence[RunRecord], configured: str = "?") -> str:
    """The congestion control the runs' sender ran, as read back (the most common value), else `configured`."""
    c = Counter(r.cc_sender for r in runs if r.cc_sender)
    return c.most_common(1)[0][0] if c else configured


# ---------------------------------------------------------------------------------------------------------------
# Two methods compared


def compare(quic: Sequence[RunRecord], tcp: Sequence[RunRecord]) -> Judged | None:
    """QUIC/TCP time by the one rule (TCP as A); None when a side has no runs."""
    return judge_runs(list(tcp), list(quic), MARGINS) if quic and tcp else None


def ratio_text(j: Judged) -> str:
    """E.g. "0.857 [0.853-0.869, 93.8 %] paired" (an en dash between the ends)."""
    ci = f" [{fmt_ci(j.ci)}, {fmt_level(j.ci)}]" if j.ci else ""
    return f"{fmt_bounded(Bounded.of(j.ratio))}{ci} {j.design}"


def direction(j: Judged | None) -> Direction:
    return direction_of(j) if j is not None else "no verdict"


def said(d: Direction, names: tuple[str, str] = ("QUIC", "TCP")) -> str:
    """A direction in the comparison's own names (e.g. "nginx 1.30 slower")."""
    return d.replace("QUIC", names[0], 1) if names[0] != "QUIC" else d


def judged_cell(j: Judged | None, names: tuple[str, str] = ("QUIC", "TCP")) -> str:
    return "no runs" if j is None else f"{ratio_text(j)}: {said(direction(j), names)}"


def n_text(runs: Sequence[RunRecord]) -> str:
    """"5" or "5 (1 censored)": results, the censored among them."""
    s = group_samples(list(runs))
    return f"{len(s.time)}" + (f" ({s.n_censored} censored)" if s.n_censored else "")


# ---------------------------------------------------------------------------------------------------------------
# Medians


def median_text(values: Sequence[Obs], scale: float = 1.0, unit: str = "") -> str:
    """The median with its order-statistic CI at its level, e.g. "11.1 s [10.9-12.0, 93.8 %]" (an en dash between
    the ends); "-" without values."""
    d = describe(values)
    if d is None:
        return "-"
    ci = f" [{sfmt.fmt_ci(d.ci, scale)}, {sfmt.fmt_level(d.ci)}]" if d.ci else ""
    return f"{sfmt.fmt_est(d.median, scale)}{' ' + unit if unit else ''}{ci}"


def times(runs: Sequence[RunRecord]) -> list[Obs]:
    """The runs' transfer times as results: censored runs above their own end."""
    return group_samples(list(runs)).time


def median_time(runs: Sequence[RunRecord]) -> Est | None:
    d = describe(times(runs))
    return d.median if d is not None else None


def scaled(e: Est, by: float) -> Est:
    return Est(e.value * by if e.value is not None else None, e.bound)


def inverse(e: Est, k: float) -> Est:
    """k / e, the bound turned round (a time above t is a rate below k/t)."""
    return Est(k / e.value if e.value else None, _FLIP[e.bound])


def band(lo: Est, hi: Est) -> str:
    """Where an interval of a ratio lies against the atlas's +-10 % band: "within", "above", "below" or
    "undecided" (it straddles an edge)."""
    if lo.exact and hi.exact and lo.value is not None and hi.value is not None \
            and lo.value >= 1 / PARITY and hi.value <= PARITY:
        return "within"
    if lo.value is not None and lo.bound in ("", ">") and lo.value > PARITY:
        return "above"
    if hi.value is not None and hi.bound in ("", "<") and hi.value < 1 / PARITY:
        return "below"
    return "undecided"


def est_text(e: Est | None, scale: float = 1.0, unit: str = "") -> str:
    return "-" if e is None else f"{sfmt.fmt_est(e, scale)}{' ' + unit if unit else ''}"
