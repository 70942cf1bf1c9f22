"""The sender's congestion control as a claim the report checks against behaviour.

Per run, the Mathis model (lab.results.models) predicts what a Reno sender can sustain on the run's lossy link:
MSS/RTT * C/sqrt(p), with
- p: the loss the transport met on the data path: the link's random-loss drops over the packets that entered it
  toward the client (the link's counters per run, linkem's or netem's; the configured loss where they are unknown);
- RTT: the link's base RTT (queueing adds to it only when the sender fills the bottleneck queue, which a
  loss-limited Reno flow hardly does);
- MSS: the mean size of the packets the link delivered toward the client, less the IP and transport headers
  (TCP 20+20+12 timestamps; QUIC: UDP 8, the datagram payload being QUIC's max_datagram_size).
A Reno/NewReno claim whose goodput exceeds the model by far (REFUTED_ABOVE) is flagged: it does not behave as one.
Points without loss (no prediction) and points where the link's rate, not loss, bounds the flow are not judged.
Failed and timed-out runs count like in every other figure (lab/results/stats.py): censored, their goodput known
only to lie below the object's size over the timeout, so a median that falls on one is reported as that bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.endpoints.sender_cc import claims_reno
from lab.results.models import mathis_goodput_bps
from lab.results.schema import RunRecord
from lab.results.stats import Obs, describe, is_censored, method_label

#: The highest median goodput / Mathis that honest Reno senders (Linux TCP Reno, ngtcp2's NewReno) showed in the
#: validate-reno sweep (medians 0.73-1.28; single runs up to 2.49: docs/results.md "Model check"), and the margin
#: above it before a Reno claim is flagged: twice the highest honest median.
HONEST_MEDIAN_MAX = 1.28
MARGIN = 2.0
REFUTED_ABOVE = HONEST_MEDIAN_MAX * MARGIN
#: the model binds only when it predicts clearly less than the link's rate.
LOSS_LIMITED_BELOW = 0.5
_HEADERS = {"h3": 20 + 8}
_TCP_HEADERS = 20 + 20 + 12
NOTE = ("Mathis et al. (1997): a Reno sender sustains MSS/RTT x 1.22/sqrt(p). p = random-loss drops / packets "
        "the link took toward the client in the run (linkem's counters; the configured loss for runs without them), "
        "RTT = the link's base RTT, MSS = mean "
        "delivered packet size less headers. Ratio = measured goodput / prediction: median over the runs, "
        "failed and timed-out ones censored (goodput below size / timeout), with the order-statistic CI of the "
        f"median at the level it has (as above). A Reno/NewReno claim above {REFUTED_ABOVE:g}x the model "
        f"({MARGIN:g} x {HONEST_MEDIAN_MAX:g}, the highest median of honest Reno senders in validate-reno) is "
        f"flagged; points where the model exceeds {LOSS_LIMITED_BELOW:g}x the link rate are rate-limited, not "
        "judged.")


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
    n: int  # runs: completed + censored (failed, timed out)
    loss_pct: float  # median observed
    mathis_bps: float  # median prediction
    goodput_bps: float  # median measured (of the completed runs)
    ratio: float  # median of the per-run ratios (a bound when it falls on a censored run: ratio_bound)
    ratio_ci: tuple[float, float] | None  # order-statistic CI of that median (lab.results.stats.median_ci)
    ci_level: float | None  # the coverage it has
    rate_limited: bool
    verdict: str
    ratio_bound: str = ""  # "" exact; "<": the median is a censored run's, known only to lie below `ratio`
    censored: int = 0  # failed and timed-out runs among n


def _ratio_obs(r: RunRecord, pred: Prediction) -> Obs | None:
    """A completed run's goodput / Mathis, or a censored run's bound (goodput below size / timeout)."""
    if r.status == "ok" and r.goodput_bps:
        return Obs(pred.ratio(r.goodput_bps))
    if is_censored(r):
        return Obs(pred.ratio(r.size_bytes * 8 / r.timeout_s) if r.timeout_s else None, -1)
    return None


def checks(records: Sequence[RunRecord]) -> list[Check]:
    """One check per (point, method, sender congestion control) with loss, over its completed and censored runs."""
    groups: dict[tuple[int, str, str, str, str], list[tuple[RunRecord, Prediction, Obs]]] = {}
    for r in records:
        pred = predict(r)
        obs = _ratio_obs(r, pred) if pred is not None else None
        if pred is None or obs is None:
            continue
        key = (r.point, r.protocol, r.client, r.server, r.cc_sender or r.cc_server)
        groups.setdefault(key, []).append((r, pred, obs))
    out = []
    for (_, protocol, client, server, cc), rows in sorted(groups.items(), key=lambda kv: kv[0]):
        dist = describe([o for _, _, o in rows])
        assert dist is not None  # (every group has a row)
        median, ci = dist.median, dist.ci
        value = median.value if median.value is not None else 0.0
        mathis = _median([p.goodput_bps for _, p, _ in rows])
        rate = rows[0][0].rate_bps
        rate_limited = rate is not None and mathis > LOSS_LIMITED_BELOW * rate
        bounds = (ci.lo.value, ci.hi.value) if ci and ci.lo.value is not None and ci.hi.value is not None else None
        if rate_limited:
            verdict = "rate-limited (not judged)"
        elif claims_reno(cc):  # a censored median is below its bound: it can never refute
            verdict = (f"REFUTED: {value:.1f}x Reno's model" if median.exact and value > REFUTED_ABOVE
                       else "consistent with Reno")
        else:
            verdict = "not Reno (model for reference)"
        done = [r.goodput_bps or 0 for r, _, o in rows if o.rank == 0]
        out.append(Check(rows[0][0].point_label, method_label(protocol, client, server), cc, len(rows),
                         _median([p.loss_p for _, p, _ in rows]) * 100, mathis, _median(done) if done else 0.0,
                         value, bounds, ci.level if ci else None, rate_limited, verdict,
                         ratio_bound=median.bound, censored=dist.n_censored))
    return out


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def table(cs: Sequence[Check]) -> tuple[list[str], list[list[str]]]:
    cols = ["parameter", "method", "sender cc", "n (censored)", "loss % (link)", "Mathis Mbit/s", "goodput Mbit/s",
            "goodput / Mathis", "CI", "CI level", "verdict"]
    rows = []
    for c in cs:
        ci = f"{c.ratio_ci[0]:.2f}\u2013{c.ratio_ci[1]:.2f}" if c.ratio_ci else "-"
        level = f"{c.ci_level * 100:.1f} %" if c.ci_level is not None else "-"
        rows.append([c.point_label, c.method, c.cc_sender or "?", f"{c.n} ({c.censored})" if c.censored else str(c.n),
                     f"{c.loss_pct:.2f}", f"{c.mathis_bps / 1e6:.3g}", f"{c.goodput_bps / 1e6:.3g}",
                     f"{c.ratio_bound}{c.ratio:.2f}", ci, level, c.verdict])
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
