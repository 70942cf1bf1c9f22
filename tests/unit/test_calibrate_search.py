"""The search over candidate links (lab/calibrate/search.py), with a synthetic "measure this candidate" callable: a
fake path model in which two senders' throughput and delay depend on the link's rate, RTT, queue and loss, as the
lab's measured senders would. The lab wiring replaces the model; the search logic is what is tested here."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from lab.calibrate.search import Candidate, Limits, Observed, Result, error, relative_errors, search, sender_error

MSS_BITS = 1448 * 8


def model(c: Candidate) -> Result:
    """cubic: loss-limited (Mathis) up to the rate, fills the queue (p50 at 3/4 of it); bbr: the rate less the loss,
    hardly any queue."""
    queue_s = c.queue_bytes * 8 / c.rate_bps
    mathis = 1.22 * MSS_BITS / (c.rtt_s * math.sqrt(c.loss)) if c.loss > 0 else math.inf
    share = min(1.0, mathis / c.rate_bps)
    return {
        "cubic": Observed(c.rate_bps * (1 - c.loss) * share, c.rtt_s + 0.75 * queue_s),
        "bbr": Observed(c.rate_bps * (1 - c.loss), c.rtt_s + 0.05 * queue_s),
    }


HIDDEN = Candidate(rate_bps=12e6, rtt_s=0.06, queue_bytes=60_000, loss=0.002)


class Lab:
    """Counts what it was asked to measure; fails (None) the candidates `broken` says."""

    def __init__(self, broken: float = math.inf) -> None:
        self.batches: list[int] = []
        self.broken = broken

    def __call__(self, batch: Sequence[Candidate]) -> list[Result | None]:
        self.batches.append(len(batch))
        return [None if c.rate_bps > self.broken else model(c) for c in batch]


def test_the_hidden_link_is_found_from_rough_first_estimates():
    real = model(HIDDEN)
    start = Candidate(rate_bps=8e6, rtt_s=0.08, queue_bytes=200_000, loss=0.0005)
    lab = Lab()
    progress: list[int] = []
    fit = search(real, start, lab, budget=60, progress=lambda f: progress.append(len(f.tried)))
    assert fit.stopped.startswith("converged")
    assert fit.best.error < 1e-6
    assert all(e < 1e-6 for e in fit.best.per_sender.values())
    b = fit.best.candidate
    assert b.rate_bps == pytest.approx(HIDDEN.rate_bps, rel=0.01)
    assert b.rtt_s == pytest.approx(HIDDEN.rtt_s, rel=0.01)
    assert b.queue_bytes == pytest.approx(HIDDEN.queue_bytes, rel=0.01)
    assert b.loss == pytest.approx(HIDDEN.loss, rel=0.01)
    assert sum(lab.batches) == len(fit.tried) <= 60  # every candidate measured once, and kept
    assert len({(t.candidate.rate_bps, t.candidate.rtt_s, t.candidate.queue_bytes, t.candidate.loss)
                for t in fit.tried}) == len(fit.tried)
    assert progress == sorted(progress) and len(progress) == fit.rounds
    # the first estimates, the grid's other losses (0.1 %, a factor 2 from 0.05 %, among them) and the start with 4
    # times its queue; then the Jacobian's 4 and the 3 steps, a batch each
    assert lab.batches[0] == 6 and set(lab.batches[1:]) <= {3, 4}
    assert fit.tried[5].candidate == Candidate(8e6, 0.08, 800_000, 0.0005)
    assert fit.tried[0].candidate == start and fit.tried[0].error > 0.3
    assert [t.candidate.loss for t in fit.tried[:5]] == [start.loss, 0.0, 1e-4, 1e-3, 1e-2]


def test_the_budget_is_kept():
    lab = Lab()
    fit = search(model(HIDDEN), Candidate(8e6, 0.08, 200_000, 0.0005), lab, budget=13)  # 4 + 4 + 3 + 2
    assert len(fit.tried) == sum(lab.batches) == 13
    assert fit.stopped == "budget of 13 candidates spent"
    assert fit.best.error == min(t.error for t in fit.tried)


def test_a_candidate_that_could_not_be_measured_is_kept_and_never_chosen():
    lab = Lab(broken=10e6)  # the lab fails every candidate above 10 Mbit/s
    fit = search(model(HIDDEN), Candidate(9e6, 0.06, 60_000, 0.002), lab, budget=60)
    failed = [t for t in fit.tried if t.result is None]
    assert failed and all(t.error == math.inf for t in failed)
    assert fit.best.result is not None and fit.best.candidate.rate_bps <= 10e6


def test_the_objective():
    real = {"cubic": Observed(10e6, 0.05), "bbr": Observed(12e6, 0.04)}
    assert sender_error(Observed(10e6, 0.05), Observed(11e6, 0.04)) == pytest.approx(
        math.log(1.1) ** 2 + math.log(0.8) ** 2)
    assert relative_errors(Observed(10e6, 0.05), Observed(11e6, 0.04)) == (pytest.approx(0.1), pytest.approx(-0.2))
    total, per = error(real, {"cubic": Observed(10e6, 0.05), "bbr": Observed(6e6, 0.04)})
    assert per == {"cubic": 0.0, "bbr": pytest.approx(math.log(2) ** 2)} and total == pytest.approx(per["bbr"] / 2)
    assert error(real, {"cubic": Observed(10e6, 0.05)})[1]["bbr"] == math.inf  # a sender missing: censored
    assert error(real, None)[0] == math.inf


def test_candidates_stay_within_the_labs_limits():
    fit = search(model(HIDDEN), Candidate(20_000, 0.0002, 1500, 0.0), Lab(), budget=30)
    for t in fit.tried:
        c = t.candidate
        assert c.rate_bps >= 10_000 and c.rtt_s >= 0.0001 and c.queue_bytes >= 1500 and 0 <= c.loss <= 0.5
    assert Candidate(12e6, 0.06, 60_000, 0.002).link() == {
        "rtt": "60.0000ms", "rate": "12.000000mbit", "queue": "60000B", "loss": "0.20000%"}


def test_a_loss_estimate_that_throttles_a_sender_is_left_at_the_first_batch():
    """A lossless link whose loss was misread as 4 % (a varying rate overflowing its queue): from there cubic gets a
    tenth of its throughput and the local search would stay; the first batch tries the link without that loss."""
    hidden = Candidate(rate_bps=12e6, rtt_s=0.1, queue_bytes=300_000, loss=0.0)
    start = Candidate(rate_bps=12e6, rtt_s=0.1, queue_bytes=300_000, loss=0.04)
    lab = Lab()
    fit = search(model(hidden), start, lab, budget=30)
    assert fit.tried[0].error > 1.0  # the estimate itself is far off
    assert fit.best.error < 1e-6 and fit.best.candidate.loss == 0.0
    assert lab.batches[0] == 6


def test_a_first_estimate_that_cannot_be_measured_goes_on_from_one_with_less_loss():
    class Refuses(Lab):
        def __call__(self, batch: Sequence[Candidate]) -> list[Result | None]:
            self.batches.append(len(batch))
            return [None if c.loss > 0.01 else model(c) for c in batch]

    fit = search(model(HIDDEN), Candidate(12e6, 0.06, 60_000, 0.02), Refuses(), budget=40)
    assert fit.tried[0].result is None and fit.best.result is not None
    assert fit.best.error < fit.tried[1].error or fit.best is fit.tried[1]
    assert not fit.stopped.startswith("the first estimates could not be measured")
    nothing = search(model(HIDDEN), Candidate(12e6, 0.06, 60_000, 0.02), Lab(broken=0.0), budget=40)
    assert nothing.stopped == "the first estimates could not be measured (nor with other losses)"
    assert len(nothing.tried) == 6  # the start, 0, 0.01, 0.1 and 1 % (a factor 2 from 2 %), its wider queue


def test_a_lossless_start_where_the_real_path_separates_cubic_from_bbr_finds_its_loss():
    """The real path gives cubic a fifth of BBR's throughput (its loss): a start without loss gets both at the rate,
    and a local search does not leave loss 0; the first batch's grid does."""
    hidden = Candidate(rate_bps=26e6, rtt_s=0.1, queue_bytes=200_000, loss=2e-4)
    lab = Lab()
    fit = search(model(hidden), Candidate(26e6, 0.1, 200_000, 0.0), lab, budget=40)
    assert [t.candidate.loss for t in fit.tried[:4]] == [0.0, 1e-4, 1e-3, 1e-2]
    assert fit.best.candidate.loss == pytest.approx(2e-4, rel=0.05) and fit.best.error < 1e-4


def test_the_retransmission_rate_joins_the_objective_when_the_real_path_says_it():
    """Two candidates alike in throughput and delay, one with the real path's retransmissions: the error tells them
    apart; rates under the floor count as the floor; without the real path's count the term is left out."""
    from lab.calibrate.search import RETX_FLOOR, SIGMA_RETX, SIGMA_RUN, residuals

    real = {"bbr": Observed(30e6, 0.13, retransmit_rate=0.0014), "cubic": Observed(13e6, 0.095, retransmit_rate=0.002)}
    right = {"bbr": Observed(30e6, 0.13, 0.0014), "cubic": Observed(13e6, 0.095, 0.002)}
    wrong = {"bbr": Observed(30e6, 0.13, 0.0004), "cubic": Observed(13e6, 0.095, 0.0007)}
    w = SIGMA_RUN / SIGMA_RETX  # without counts: the rate's noise beyond them only
    assert error(real, right)[0] == 0.0
    assert error(real, wrong)[0] == pytest.approx(w ** 2 * (math.log(0.4 / 1.4) ** 2 + math.log(0.7 / 2) ** 2) / 2)
    r = residuals(real, wrong)
    assert r is not None and len(r) == 6 and r[2] == pytest.approx(w * math.log(0.4 / 1.4))
    assert sender_error(Observed(1e6, 0.1, 0.0), Observed(1e6, 0.1, RETX_FLOOR / 10)) == 0.0
    assert residuals(real, {"bbr": Observed(30e6, 0.13), "cubic": Observed(13e6, 0.095)}) is None  # must say it
    plain = {"bbr": Observed(30e6, 0.13), "cubic": Observed(13e6, 0.095)}
    assert error(plain, wrong)[0] == 0.0 and len(residuals(plain, wrong)) == 4


def test_the_retransmission_term_weighs_by_its_counts_noise():
    """A rate of 3 retransmissions is noisy (Poisson: ln of it +-0.6), one of 300 is not; the term's weight follows."""
    from lab.calibrate.search import SIGMA_RETX, SIGMA_RUN, retx_weight

    few = Observed(11e6, 0.16, 3 / 8000, retransmits=3, segments=8000)
    many = Observed(11e6, 0.16, 300 / 8000, retransmits=300, segments=8000)
    assert retx_weight(few, few) == pytest.approx(SIGMA_RUN / math.sqrt(SIGMA_RETX ** 2 + 2 / 4))
    assert retx_weight(many, many) == pytest.approx(SIGMA_RUN / math.sqrt(SIGMA_RETX ** 2 + 2 / 301))
    assert retx_weight(few, few) < retx_weight(many, many) / 2


def _seen(tput_mbit: float, rtt_ms: float, retx: int, segments: float) -> Observed:
    return Observed(tput_mbit * 1e6, rtt_ms / 1000, retx / segments, retransmits=retx, segments=segments)


def test_a_few_retransmissions_no_longer_outweigh_the_delay():
    """The benchmark's link 9 (11.6 Mbit/s, 152.5 ms, 0.098 % random loss; results/reference/calibrate-20261126,
    link-9/fit/m/fit.json): the real path's BBR retransmitted 3 segments after start-up. Two of the fit's candidates,
    their counts from the rates recorded (10 s runs, the start-up's share left out as the real path's): at 0.028 %
    loss cubic filled the queue (p50 RTT 403 ms against 156), at 0.1 % it did less (251 ms) while BBR retransmitted
    0.6 %. The unweighted objective chose 0.028 % (Reno then got 3.8 x the hidden link's throughput); weighed by
    the counts' noise the delay decides, for 0.1 %."""
    real = {"bbr": _seen(11.17, 163.8, 3, 7715), "cubic": _seen(10.73, 155.8, 23, 7410)}
    low = {"bbr": _seen(11.11, 163.2, 15, 7670), "cubic": _seen(11.47, 403.1, 232, 7920)}
    high = {"bbr": _seen(11.58, 183.7, 49, 8000), "cubic": _seen(11.12, 251.1, 233, 7680)}
    assert error(real, high)[0] < error(real, low)[0]
    unweighted = {k: Observed(o.throughput_bps, o.p50_rtt_s, o.retransmit_rate) for k, o in real.items()}

    def old(r: Observed, g: Observed) -> float:  # the objective before the weights
        return (math.log(g.throughput_bps / r.throughput_bps) ** 2 + math.log(g.p50_rtt_s / r.p50_rtt_s) ** 2
                + math.log(g.retransmit_rate / r.retransmit_rate) ** 2)

    assert sum(old(unweighted[k], high[k]) for k in real) > sum(old(unweighted[k], low[k]) for k in real)


def test_the_evidence_sets_the_first_losses_and_the_largest():
    """losses (loss_ladder of the retransmissions' bounds) replace the grid in the first batch; no candidate, the
    start included, has more random loss than Limits.max_loss, even where the model's best fit lies above it."""
    from lab.calibrate.search import loss_ladder

    ladder = loss_ladder(0.0004, 0.0012)
    assert ladder == pytest.approx([0.0, 0.0012, 0.0004, 0.0004, 0.0012 / 9])  # (/27 is under 10 x LOSS_FLOOR)
    lab = Lab()
    start = Candidate(rate_bps=12e6, rtt_s=0.06, queue_bytes=60_000, loss=0.0019)
    fit = search(model(HIDDEN), start, lab, budget=30, losses=ladder, limits=Limits(max_loss=0.0012))
    # the start held at the bound (so the ladder's 0.12 % is the start itself), then none, 0.04 % (once: 1/3 of the
    # bound is the point) and 0.0133 %
    assert [t.candidate.loss for t in fit.tried[:4]] == pytest.approx([0.0012, 0.0, 0.0004, 0.0012 / 9])
    assert lab.batches[0] == 5 and fit.tried[4].candidate.queue_bytes == 240_000
    assert max(t.candidate.loss for t in fit.tried) <= 0.0012
    assert fit.best.candidate.loss == pytest.approx(0.0012)  # the hidden 0.2 % lies beyond: held at the bound
    # the Jacobian's loss probe (the 4th of its batch) from the bound steps down (a step up would be clipped to nothing)
    assert fit.tried[8].candidate.loss == pytest.approx(0.0012 * math.exp(-0.1))
    assert fit.tried[5].candidate.rate_bps == pytest.approx(12e6 * math.exp(0.1))  # the others forward
    with pytest.raises(ValueError):
        loss_ladder(0.002, 0.001)


def test_no_candidate_has_an_rtt_above_the_lowest_the_user_saw():
    """Limits.max_rtt_s (the lowest RTT in the user's files) holds every candidate, the start included, even where
    the model's best fit lies above it (here the model's path is 90 ms; the files said at most 70 ms): the search
    stays at the bound, and its Jacobian's RTT probe from there steps down (a step up would be clipped to nothing).
    Without the bound the same search finds 90 ms (test_the_hidden_link_is_found_from_rough_first_estimates)."""
    hidden = Candidate(rate_bps=12e6, rtt_s=0.09, queue_bytes=60_000, loss=0.002)
    start = Candidate(rate_bps=10e6, rtt_s=0.08, queue_bytes=60_000, loss=0.002)
    free = search(model(hidden), start, Lab(), budget=60)
    assert free.best.candidate.rtt_s == pytest.approx(0.09, rel=0.02)
    fit = search(model(hidden), start, Lab(), budget=60, limits=Limits(max_rtt_s=0.07))
    assert fit.tried[0].candidate.rtt_s == 0.07
    assert max(t.candidate.rtt_s for t in fit.tried) <= 0.07
    assert fit.best.candidate.rtt_s == pytest.approx(0.07)
    assert any(t.candidate.rtt_s == pytest.approx(0.07 * math.exp(-0.1)) for t in fit.tried)
    with pytest.raises(ValueError):
        Limits(max_rtt_s=0.0)


def test_no_candidate_has_an_rtt_below_the_lower_bound_and_a_narrow_window_holds_the_rtt():
    """Limits.min_rtt_s (the lowest RTT without load less fit.RTT_SLACK_S) holds every candidate where the model's
    best fit lies below it (here the path is 40 ms; the files allow 50-52 ms, as on the ATT recording, which was
    fitted at 38.8 ms without the bound). The window is narrower than half a step (ln(52/50) < 0.05): the RTT is
    held, and no RTT probe is measured (every Jacobian batch has 3 probes, not 4). Unbounded, the same search goes
    below 45 ms."""
    hidden = Candidate(rate_bps=12e6, rtt_s=0.04, queue_bytes=60_000, loss=0.002)
    start = Candidate(rate_bps=10e6, rtt_s=0.052, queue_bytes=60_000, loss=0.002)
    free = search(model(hidden), start, Lab(), budget=60)
    assert free.best.candidate.rtt_s < 0.045
    lab = Lab()
    fit = search(model(hidden), start, lab, budget=60, limits=Limits(max_rtt_s=0.052, min_rtt_s=0.05))
    assert all(0.05 <= t.candidate.rtt_s <= 0.052 for t in fit.tried)
    assert {t.candidate.rtt_s for t in fit.tried} == {0.052}
    assert 4 not in lab.batches[1:] and 3 in lab.batches[1:]
    wide = search(model(hidden), start, Lab(), budget=60, limits=Limits(max_rtt_s=0.052, min_rtt_s=0.03))
    assert wide.best.candidate.rtt_s < 0.045  # a window wide enough is searched
    with pytest.raises(ValueError):
        Limits(max_rtt_s=0.05, min_rtt_s=0.06)


def test_the_other_shape_is_measured_first_and_the_search_goes_on_in_the_better_one():
    """A varying link whose 1 s rates looked constant (the TMobile recording): there cubic gets less than BBR
    without random loss (the queue overflows as the rate falls), which no constant candidate without random loss
    gives (the evidence allows none here: Limits.max_loss 0). The start is constant; `shapes` holds the
    trace-shaped start: the search measures it in its first batch and keeps to that shape."""
    def shaped(c: Candidate) -> Result:
        got = model(c)
        if not c.trace:
            return got
        return {"cubic": Observed(got["cubic"].throughput_bps * 0.65, got["cubic"].p50_rtt_s),
                "bbr": got["bbr"]}

    hidden = Candidate(rate_bps=20e6, rtt_s=0.1, queue_bytes=150_000, loss=0.0, trace=True)
    start = Candidate(rate_bps=18e6, rtt_s=0.1, queue_bytes=150_000, loss=0.0, trace=False)

    def lab(batch: Sequence[Candidate]) -> list[Result | None]:
        return [shaped(c) for c in batch]

    limits = Limits(max_loss=0.0, max_rtt_s=0.1)
    alone = search(shaped(hidden), start, lab, budget=40, limits=limits)
    both = search(shaped(hidden), start, lab, budget=40, limits=limits,
                  shapes=[Candidate(18e6, 0.1, 150_000, 0.0, trace=True)])
    assert not any(t.candidate.trace for t in alone.tried) and alone.best.error > 0.01
    # the first batch: the start, its wider queue, the other shape
    assert [t.candidate.trace for t in both.tried[:3]] == [False, False, True]
    assert both.best.candidate.trace is True and both.best.error < 1e-3
    assert all(t.candidate.trace for t in both.tried[3:])


def test_a_queue_read_too_small_is_left_at_the_first_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loss-based sender under random loss never fills the queue, so the first estimate reads only what the
    senders filled (results/reference/calibrate-20261126-3, link 2: 344 kB read as 73 kB). Here BBR overflows a
    queue under a third of the BDP (its retransmissions jump) and nothing else depends on the queue: a step of 10 %
    at a time sees no change and the search stays; the first batch's wider queue leaves it."""
    def path(c: Candidate) -> Result:
        bdp = c.rate_bps / 8 * c.rtt_s
        overflow = 0.01 if c.queue_bytes < 0.3 * bdp else 0.0
        mathis = 1.22 * MSS_BITS / (c.rtt_s * math.sqrt(c.loss)) if c.loss > 0 else math.inf
        return {"cubic": Observed(min(c.rate_bps, mathis), c.rtt_s, retransmit_rate=c.loss + 1e-4),
                "bbr": Observed(c.rate_bps * (1 - c.loss), c.rtt_s * 1.03, retransmit_rate=c.loss + overflow)}

    def lab(batch: Sequence[Candidate]) -> list[Result | None]:
        return [path(c) for c in batch]

    hidden = Candidate(rate_bps=32e6, rtt_s=0.094, queue_bytes=344_000, loss=0.0014)
    start = Candidate(rate_bps=32e6, rtt_s=0.094, queue_bytes=73_000, loss=0.0014)
    fit = search(path(hidden), start, lab, budget=30, losses=[0.0, 0.0005])
    assert fit.tried[3].candidate.queue_bytes == 292_000  # the first batch: start, 2 losses, the wider queue
    assert fit.best.candidate.queue_bytes >= 0.3 * 32e6 / 8 * 0.094 and fit.best.error < 1e-6
    import lab.calibrate.search as search_module

    monkeypatch.setattr(search_module, "_wider", lambda *_a, **_k: [])  # the search as it was
    stuck = search(path(hidden), start, lab, budget=30, losses=[0.0, 0.0005])
    assert stuck.best.candidate.queue_bytes < 0.3 * 32e6 / 8 * 0.094 and stuck.best.error > 0.1


def test_the_upper_bound_twice_the_start_is_in_the_first_batch():
    """A start at 0.058 % under the evidence's bound of 0.112 % (results/reference/calibrate-20261126-4, link 9):
    the bound, a factor 1.9 away, is measured in the first batch; so is a third of it (1.6 away); the point (1.2
    away) is the start's own neighbourhood and left out."""
    from lab.calibrate.search import loss_ladder

    seen: list[Candidate] = []

    def lab(batch: Sequence[Candidate]) -> list[Result | None]:
        seen.extend(batch)
        return [model(c) for c in batch]

    start = Candidate(rate_bps=11.5e6, rtt_s=0.153, queue_bytes=407_000, loss=0.00058)
    search(model(HIDDEN), start, lab, budget=8, losses=loss_ladder(0.00069, 0.00112),
           limits=Limits(max_loss=0.00112))
    first = [c.loss for c in seen[:6]]
    assert first[:5] == pytest.approx([0.00058, 0.0, 0.00112, 0.00112 / 3, 0.00112 / 9])
    assert 0.00069 not in first and seen[5].queue_bytes == 4 * 407_000
