"""Statistics over a sweep's runs: per-group medians with IQR and bootstrap CIs, and HTTP/3-vs-TCP ratios.

Rules (the reports state them too):
- Only runs with status "ok" (and a measured total_s and goodput_bps) enter the statistics. Every other run is
  excluded and counted per reason (`exclusion_reason`), never dropped silently.
- Confidence intervals are 95 % percentile-bootstrap intervals of the median, 2000 resamples, drawn from a numpy
  Generator seeded with the fixed BOOTSTRAP_SEED, so the same runs always give the same numbers.
- With fewer than 2 values (or 2 pairs for ratios) there is no interval: the CI fields are None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lab.results.schema import RunRecord

PROTOCOL_ORDER = ("h1", "h2", "h3")
PROTOCOL_LABELS = {"h1": "HTTP/1.1", "h2": "HTTP/2", "h3": "HTTP/3"}
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_240_601
CI_LEVEL = 0.95
NO_TIMING = "ok-without-timing"  # exclusion reason of an "ok" row that lacks total_s or goodput_bps

CI = tuple[float, float]


@dataclass(frozen=True)
class Dist:
    """Summary of one metric over the ok runs of a group."""

    n: int
    median: float
    q1: float
    q3: float
    ci: CI | None  # 95 % bootstrap CI of the median; None when n < 2
    mean: float
    sd: float | None  # sample standard deviation (ddof=1); None when n < 2


@dataclass(frozen=True)
class GroupStats:
    point: int
    point_label: str
    x_name: str
    x: float
    client: str
    server: str
    protocol: str
    n: int  # ok runs
    n_excluded: int
    excluded: dict[str, int] = field(default_factory=dict)  # exclusion reason (status) -> count
    total_s: Dist | None = None  # None when n == 0
    goodput_bps: Dist | None = None


@dataclass(frozen=True)
class RatioStats:
    """numerator/denominator over the repeats that are ok in both protocols (paired by repeat)."""

    point: int
    point_label: str
    x_name: str
    x: float
    client: str
    server: str
    numerator: str
    denominator: str
    n_pairs: int
    time_ratio: float | None  # median total_s ratio: < 1 means the numerator (HTTP/3) is faster
    time_ci: CI | None
    goodput_ratio: float | None  # median goodput ratio: > 1 means the numerator is faster
    goodput_ci: CI | None


def protocol_label(protocol: str) -> str:
    return PROTOCOL_LABELS.get(protocol, protocol)


def method_label(protocol: str, client: str, server: str) -> str:
    """E.g. "HTTP/3 curl→nginx"."""
    return f"{protocol_label(protocol)} {client}→{server}"


def exclusion_reason(r: RunRecord) -> str | None:
    """Why a run is left out of the statistics (its status, or NO_TIMING), or None when it counts."""
    if r.status != "ok":
        return r.status
    if r.total_s is None or r.goodput_bps is None:
        return NO_TIMING
    return None


def excluded_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in records if exclusion_reason(r) is not None]


def exclusion_counts(records: Sequence[RunRecord]) -> dict[tuple[str, str], int]:
    """(reason, failure text) -> number of excluded runs, most frequent first."""
    counts: dict[tuple[str, str], int] = {}
    for r in records:
        reason = exclusion_reason(r)
        if reason is not None:
            key = (reason, r.failure.strip())
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _protocol_rank(p: str) -> tuple[int, str]:
    return (PROTOCOL_ORDER.index(p), "") if p in PROTOCOL_ORDER else (len(PROTOCOL_ORDER), p)


GroupKey = tuple[int, str, str, str]  # point, client, server, protocol


def group_records(records: Sequence[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
    """Records by (point, client, server, protocol): points ascending, client/server pairs in order of first
    appearance, then h1, h2, h3 (other protocols after, alphabetically)."""
    combos: dict[tuple[str, str], int] = {}
    groups: dict[GroupKey, list[RunRecord]] = {}
    for r in records:
        combos.setdefault((r.client, r.server), len(combos))
        groups.setdefault((r.point, r.client, r.server, r.protocol), []).append(r)
    order = sorted(groups, key=lambda k: (k[0], combos[(k[1], k[2])], _protocol_rank(k[3])))
    return {k: groups[k] for k in order}


def _bootstrap(stat: Callable[[np.ndarray], np.ndarray], n: int) -> CI | None:
    """Percentile bootstrap: `stat` maps an index matrix (resamples x n) to one value per resample."""
    if n < 2:
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    values = stat(idx)
    alpha = (1 - CI_LEVEL) / 2 * 100
    lo, hi = np.percentile(values, [alpha, 100 - alpha])
    return float(lo), float(hi)


def median_ci(values: Sequence[float]) -> CI | None:
    """95 % percentile-bootstrap CI of the median (None for fewer than 2 values)."""
    a = np.asarray(values, dtype=float)
    return _bootstrap(lambda idx: np.median(a[idx], axis=1), len(a))


def describe(values: Sequence[float]) -> Dist | None:
    """Median, quartiles (linear interpolation), bootstrap CI of the median, mean and sd; None when empty."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return None
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    sd = float(np.std(a, ddof=1)) if a.size >= 2 else None
    return Dist(n=int(a.size), median=float(med), q1=float(q1), q3=float(q3), ci=median_ci(a),
                mean=float(np.mean(a)), sd=sd)


def summarize(records: Sequence[RunRecord]) -> list[GroupStats]:
    """One GroupStats per (point, client, server, protocol), in report order (see group_records)."""
    out = []
    for (point, client, server, protocol), rs in group_records(records).items():
        ok = [r for r in rs if exclusion_reason(r) is None]
        excluded: dict[str, int] = {}
        for r in rs:
            reason = exclusion_reason(r)
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + 1
        first = rs[0]
        out.append(GroupStats(
            point=point, point_label=first.point_label, x_name=first.x_name, x=first.x,
            client=client, server=server, protocol=protocol, n=len(ok), n_excluded=len(rs) - len(ok),
            excluded=excluded,
            total_s=describe([r.total_s for r in ok if r.total_s is not None]),
            goodput_bps=describe([r.goodput_bps for r in ok if r.goodput_bps is not None]),
        ))
    return out


def _paired_ratio(num: np.ndarray, den: np.ndarray) -> tuple[float | None, CI | None]:
    if num.size == 0:
        return None, None
    ratio = float(np.median(num) / np.median(den))
    ci = _bootstrap(lambda idx: np.median(num[idx], axis=1) / np.median(den[idx], axis=1), num.size)
    return ratio, ci


def ratios(records: Sequence[RunRecord], numerator: str = "h3",
           denominators: Sequence[str] = ("h1", "h2")) -> list[RatioStats]:
    """Ratio of medians numerator/denominator per (point, client, server, denominator), paired by repeat.

    Only repeats that are ok in both protocols enter (the sweep gives both the same link seed at a point and
    repeat); the bootstrap resamples those repeat indices together. No pairs: ratios None; < 2 pairs: no CI.
    """
    groups = group_records(records)
    cells: dict[tuple[int, str, str], dict[str, dict[int, RunRecord]]] = {}
    for (point, client, server, protocol), rs in groups.items():
        if all(r.status == "unsupported" for r in rs):
            continue  # a combination that cannot run has nothing to compare (e.g. gtlsclient over HTTP/2)
        ok = {r.repeat: r for r in rs if exclusion_reason(r) is None}
        cells.setdefault((point, client, server), {})[protocol] = ok
    out = []
    for (point, client, server), by_proto in cells.items():
        if numerator not in by_proto:
            continue
        first = next(iter(groups[(point, client, server, numerator)]))
        for den_proto in denominators:
            if den_proto not in by_proto:
                continue
            num_runs, den_runs = by_proto[numerator], by_proto[den_proto]
            reps = sorted(set(num_runs) & set(den_runs))

            def arr(runs: dict[int, RunRecord], attr: str, reps: list[int] = reps) -> np.ndarray:
                return np.asarray([getattr(runs[i], attr) for i in reps], dtype=float)

            t_ratio, t_ci = _paired_ratio(arr(num_runs, "total_s"), arr(den_runs, "total_s"))
            g_ratio, g_ci = _paired_ratio(arr(num_runs, "goodput_bps"), arr(den_runs, "goodput_bps"))
            out.append(RatioStats(
                point=point, point_label=first.point_label, x_name=first.x_name, x=first.x, client=client,
                server=server, numerator=numerator, denominator=den_proto, n_pairs=len(reps),
                time_ratio=t_ratio, time_ci=t_ci, goodput_ratio=g_ratio, goodput_ci=g_ci,
            ))
    return out
