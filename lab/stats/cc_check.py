"""The sender's congestion control as a claim the report checks against behaviour.

Per run, the Mathis model (lab.stats.models) predicts what a Reno sender can sustain on the run's lossy link:
MSS/RTT * C/sqrt(p), with
- p: the loss the transport met on the data path: the link's random-loss drops over the packets that entered it
  toward the client (the link's counters per run, linkem's or netem's; the configured loss where they are unknown);
- RTT: the link's base RTT (queueing adds to it only when the sender fills the bottleneck queue, which a
  loss-limited Reno flow hardly does);
- MSS: the mean size of the packets the link delivered toward the client, less the IP and transport headers
  (TCP 20+20+12 timestamps; QUIC: UDP 8, the datagram payload being QUIC's max_datagram_size).
A Reno/NewReno claim is REFUTED when the whole CI of its median ratio goodput / model lies above the threshold; a
median above it whose CI reaches below is reported as such, not refuted. The threshold is derived, never typed
(`reference_threshold`): MARGIN x the highest median ratio of the honest Reno senders in the committed
results/reference/validate-reno (senders read back as Reno: the server namespace's sysctl or the listener's --cc;
runs flagged host-bound left out: there the host, not the link, held the flow), so it follows a re-run of that
folder. Without that folder no Reno claim is judged.
Points without loss (no prediction) and points where the link's rate, not loss, bounds the flow are not judged.
Failed and timed-out runs count like in every other figure (lab/stats/stats.py): censored at their own end, their
goodput known only to lie below the object's size over that time, so a median, CI end or goodput that falls on one
is reported as that bound ("<").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lab import config
from lab.endpoints.sender_cc import OBSERVED_SOURCES, claims_reno
from lab.quantiles import median
from lab.results.schema import RunRecord, read_runs
from lab.stats.fmt import fmt_ci, fmt_est, fmt_level
from lab.stats.models import mathis_goodput_bps
from lab.stats.stats import (
    CI,
    Est,
    Obs,
    describe,
    exclusion_reason,
    fallback_timeout,
    method_label,
    run_obs,
)

#: the committed folder the threshold is derived from, and its margin: a Reno claim is refuted only when its
#: median's whole CI lies above MARGIN x the highest honest Reno median there
REFERENCE = config.ROOT / "results" / "reference" / "validate-reno"
MARGIN = 2.0
#: the model binds only when it predicts clearly less than the link's rate.
LOSS_LIMITED_BELOW = 0.5
_HEADERS = {"h3": 20 + 8}
_TCP_HEADERS = 20 + 20 + 12


@dataclass(frozen=True)
class Threshold:
    """MARGIN x the highest median goodput / Mathis of the honest Reno senders of a validate-reno folder."""

    value: float  # the threshold: MARGIN x honest_max
    honest_max: float  # the highest honest median
    at: str  # where: "rtt=80ms loss=1% HTTP/3 gtlsclient→ngtcp2"
    groups: int  # honest (point, method) groups judged (rate-limited ones are not)
    runs: int  # their runs
    flagged: int  # honest Reno runs left out because the fidelity guard flagged them host-bound
    run_min: float  # single honest runs' ratios (completed runs)
    run_max: float
    source: str  # the folder, relative to the repository

    def note(self) -> str:
        return (f"{MARGIN:g} x {self.honest_max:.2f} = {self.value:.2f}x, {self.honest_max:.2f} being the highest "
                f"median of the honest Reno senders (read back as reno) in {self.source} ({self.at}; {self.groups} "
                f"groups, {self.runs} runs; {self.flagged} runs flagged host-bound left out; single runs "
                f"{self.run_min:.2f}\u2013{self.run_max:.2f})")


@dataclass(frozen=True)
class Prediction:
    loss_p: float
    mss_bytes: float
    goodput_bps: float  # Mathis

    def ratio(self, measured_bps: float) -> float:
        return measured_bps / self.goodput_bps


def observed_loss(r: RunRecord) -> float | None:
    """The data path's loss in the run: the link's random-loss drops toward the client over what entered it."""
    if r.link_down_sent_pkts and r.link_down_loss_drops is not None:
        return r.link_down_loss_drops / r.link_down_sent_pkts
    return r.loss_pct / 100 if r.loss_pct else None


def mss_of(r: RunRecord) -> float:
    """The mean segment (TCP) or datagram payload (QUIC) the link delivered toward the client."""
    headers = _HEADERS.get(r.protocol, _TCP_HEADERS)
    if r.wire_down_bytes and r.link_down_sent_pkts:
        delivered = r.link_down_sent_pkts - (r.link_down_loss_drops or 0) - (r.link_down_queue_drops or 0)
        if delivered > 0:
            return r.wire_down_bytes / delivered - headers
    return 1500 - headers


def predict(r: RunRecord) -> Prediction | None:
    p = observed_loss(r)
    if not p or not 0 < p < 1 or r.rtt_s <= 0:  # no loss, or a value that is no probability: no prediction
        return None
    mss = mss_of(r)
    return Prediction(p, mss, mathis_goodput_bps(mss, r.rtt_s, p))


@dataclass(frozen=True)
class Check:
    point_label: str
    method: str
    cc_sender: str
    cc_source: str  # how the sender's algorithm is known (runs.csv cc_sender_source)
    n: int  # runs: completed + censored (failed, timed out)
    loss_pct: float  # median observed
    mathis_bps: float  # median prediction
    goodput: Est  # median measured goodput over the same runs, censored ones included (a bound "<" when it falls
    #              on one): the figure of the medians table for the same group
    ratio_est: Est  # median of the per-run ratios goodput / Mathis (a bound "<" when it falls on a censored run)
    ratio_ci: CI | None  # order-statistic CI of that median (lab.stats.stats.median_ci); its ends may be bounds
    rate_limited: bool
    verdict: str
    censored: int = 0  # failed and timed-out runs among n
    run_ratios: tuple[float, ...] = ()  # the completed runs' ratios

    @property
    def ratio(self) -> float:
        return self.ratio_est.value if self.ratio_est.value is not None else 0.0

    @property
    def ratio_bound(self) -> str:
        return self.ratio_est.bound

    @property
    def goodput_bps(self) -> float:
        return self.goodput.value if self.goodput.value is not None else 0.0

    @property
    def ci_level(self) -> float | None:
        return self.ratio_ci.level if self.ratio_ci else None


def refuted(ci: CI | None, threshold: float) -> bool:
    """Whether a Reno claim is refuted: its median's whole CI lies above `threshold` (an exact lower end above it;
    a lower end that is a censored bound "<" can lie anywhere below, so it never refutes)."""
    return ci is not None and ci.lo.exact and ci.lo.value is not None and ci.lo.value > threshold


def _verdict(cc: str, rate_limited: bool, median: Est, ci: CI | None, threshold: Threshold | None) -> str:
    if rate_limited:
        return "rate-limited (not judged)"
    if not claims_reno(cc):
        return "not Reno (model for reference)"
    if threshold is None:
        return "not judged (no validate-reno reference)"
    t = threshold.value
    if refuted(ci, t):
        return f"REFUTED: {median.value:.1f}x Reno's model, CI above {t:.2f}x"
    if median.value is not None and median.value > t:
        return f"median above {t:.2f}x, CI reaches below: not refuted"
    return "consistent with Reno"


def checks(records: Sequence[RunRecord],
           threshold: Threshold | Literal["reference"] | None = "reference") -> list[Check]:
    """One check per (point, method, sender congestion control) with loss, over its completed and censored runs.
    `threshold`: "reference" (default) the one derived from the committed validate-reno (reference_threshold);
    None: Reno claims are not judged."""
    thr = reference_threshold() if threshold == "reference" else threshold if isinstance(threshold, Threshold) else None
    groups: dict[tuple[int, str, str, str, str], list[RunRecord]] = {}
    for r in records:
        if exclusion_reason(r) is None and predict(r) is not None:
            key = (r.point, r.protocol, r.client, r.server, r.cc_sender or r.cc_server)
            groups.setdefault(key, []).append(r)
    out = []
    for (_, protocol, client, server, cc), rs in sorted(groups.items(), key=lambda kv: kv[0]):
        fb = fallback_timeout(rs)
        rows = []
        for r in rs:
            pred = predict(r)
            assert pred is not None  # (grouped only with a prediction)
            o = run_obs(r, fb)
            ratio = Obs(pred.ratio(o.goodput.value) if o.goodput.value is not None else None, o.goodput.rank)
            rows.append((r, pred, o.goodput, ratio))
        ratios, goodput = describe([x[3] for x in rows]), describe([x[2] for x in rows])
        assert ratios is not None and goodput is not None  # (every group has a row)
        mathis = median([p.goodput_bps for _, p, _, _ in rows])
        rate = rs[0].rate_bps
        rate_limited = rate is not None and mathis > LOSS_LIMITED_BELOW * rate
        out.append(Check(rs[0].point_label, method_label(protocol, client, server), cc, rs[0].cc_sender_source,
                         len(rows), median([p.loss_p for _, p, _, _ in rows]) * 100, mathis, goodput.median,
                         ratios.median, ratios.ci, rate_limited,
                         _verdict(cc, rate_limited, ratios.median, ratios.ci, thr), censored=ratios.n_censored,
                         run_ratios=tuple(o.value for _, _, _, o in rows if o.rank == 0 and o.value is not None)))
    return out


def honest_runs(records: Sequence[RunRecord]) -> tuple[list[RunRecord], int]:
    """The runs of senders read back as Reno (OBSERVED_SOURCES: not a default or a registry claim), without the
    ones the fidelity guard flagged host-bound; and how many flagged runs were left out."""
    reno = [r for r in records if claims_reno(r.cc_sender) and r.cc_sender_source in OBSERVED_SOURCES]
    return [r for r in reno if not r.host_bound], sum(1 for r in reno if r.host_bound)


def derive_threshold(records: Sequence[RunRecord], source: str) -> Threshold | None:
    """The threshold from a validate-reno folder's runs: MARGIN x the highest median ratio over its honest Reno
    (point, method) groups that are loss-limited (honest_runs); None when it has none."""
    runs, flagged = honest_runs(records)
    judged = [c for c in checks(runs, None) if not c.rate_limited]
    if not judged:
        return None
    top = max(judged, key=lambda c: c.ratio)
    singles = [x for c in judged for x in c.run_ratios]
    return Threshold(value=MARGIN * top.ratio, honest_max=top.ratio, at=f"{top.point_label} {top.method}",
                     groups=len(judged), runs=sum(c.n for c in judged), flagged=flagged,
                     run_min=min(singles, default=0.0), run_max=max(singles, default=0.0), source=source)


def reference_threshold(folder: Path = REFERENCE) -> Threshold | None:
    """derive_threshold over the committed validate-reno folder (None when it is not there)."""
    runs = folder / "runs.csv"
    if not runs.is_file():
        return None
    return _threshold_of(runs, runs.stat().st_mtime_ns)


@functools.cache
def _threshold_of(runs: Path, _mtime_ns: int) -> Threshold | None:
    try:
        source = str(runs.parent.relative_to(config.ROOT))
    except ValueError:
        source = str(runs.parent)
    return derive_threshold(read_runs(runs).records, source)


def note(threshold: Threshold | Literal["reference"] | None = "reference") -> str:
    """The claim check's rule as the reports print it above its table."""
    thr = reference_threshold() if threshold == "reference" else threshold if isinstance(threshold, Threshold) else None
    rule = (f"A Reno/NewReno claim is REFUTED when the whole CI of its median lies above {thr.note()}; a median "
            "above it whose CI reaches below is not refuted" if thr is not None else
            "No Reno/NewReno claim is judged: there is no results/reference/validate-reno to derive the threshold "
            "from")
    return ("Mathis et al. (1997): a Reno sender sustains MSS/RTT x 1.22/sqrt(p). p = random-loss drops / packets "
            "the link took toward the client in the run (linkem's counters; the configured loss for runs without "
            "them), RTT = the link's base RTT, MSS = mean delivered packet size less headers. Ratio = measured "
            "goodput / prediction: median over the runs, failed and timed-out ones censored at their own end "
            "(goodput below size / that time; a median, CI end or goodput falling on one shows as \"<\" that "
            "bound), with the order-statistic CI of the median at the level it has (as above); goodput = the median "
            f"over the same runs (as in the medians table). {rule}. Points where the model exceeds "
            f"{LOSS_LIMITED_BELOW:g}x the link rate are rate-limited, not judged.")



def _two(v: float) -> str:
    return f"{v:.2f}"


def table(cs: Sequence[Check]) -> tuple[list[str], list[list[str]]]:
    cols = ["parameter", "method", "sender cc", "n (censored)", "loss % (link)", "Mathis Mbit/s", "goodput Mbit/s",
            "goodput / Mathis", "CI", "CI level", "verdict"]
    rows = []
    for c in cs:
        rows.append([c.point_label, c.method, c.cc_sender or "?", f"{c.n} ({c.censored})" if c.censored else str(c.n),
                     f"{c.loss_pct:.2f}", f"{c.mathis_bps / 1e6:.3g}", fmt_est(c.goodput, 1e-6),
                     fmt_est(c.ratio_est, show=_two), fmt_ci(c.ratio_ci, show=_two), fmt_level(c.ratio_ci),
                     c.verdict])
    return cols, rows


def figures(records: Sequence[RunRecord]) -> list[tuple[str, str]]:
    """(run key, path relative to the sweep folder) of every run's loss-response figure."""
    return [(r.run_key, f) for r in records for f in r.evidence.split() if f.endswith("/loss-response.png")]


def sender_table(records: Sequence[RunRecord]) -> tuple[list[str], list[list[str]]] | None:
    """Per method and sender congestion control: runs, and the link's and the sender's loss counts (sums)."""
    acc: dict[tuple[str, str, str], list[RunRecord]] = {}
    for r in records:
        if r.status in ("ok", "failed", "timeout") and (r.cc_sender or r.link_down_sent_pkts is not None):
            acc.setdefault((method_label(r.protocol, r.client, r.server), r.cc_sender or "?",
                            r.cc_sender_source or "?"), []).append(r)
    if not acc:
        return None

    def total(rs: list[RunRecord], attr: str) -> str:
        values = [getattr(r, attr) for r in rs if getattr(r, attr) is not None]
        return str(sum(values)) if values else "-"

    cols = ["method", "sender cc (read back)", "how known", "runs", "link: sent to client", "random-loss drops",
            "queue drops", "sender data bytes", "retransmitted bytes"]
    rows = [[m, cc, src, str(len(rs)), total(rs, "link_down_sent_pkts"), total(rs, "link_down_loss_drops"),
             total(rs, "link_down_queue_drops"), total(rs, "sender_data_bytes"), total(rs, "sender_retx_bytes")]
            for (m, cc, src), rs in acc.items()]
    return cols, rows
