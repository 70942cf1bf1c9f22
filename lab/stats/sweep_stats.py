"""A sweep's statistics as its report shows them, computed once per report and passed to every writer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.results.schema import RunRecord
from lab.stats import cc_check, stats
from lab.stats.cc_check import Check
from lab.stats.stats import GroupStats, RatioStats


@dataclass(frozen=True)
class SweepStats:
    """A sweep's statistics as its report shows them, computed once (sweep_stats) and passed to every writer
    (summary.md, report.html and its headline, the plots)."""

    groups: list[GroupStats]  # summarize
    ratios: list[RatioStats]  # ratios: HTTP/3 over HTTP/1.1 and HTTP/2
    cc_checks: list[Check]  # lab.stats.cc_check.checks: the sender's claimed congestion control vs Reno's model


def sweep_stats(records: Sequence[RunRecord]) -> SweepStats:
    return SweepStats(groups=stats.summarize(records), ratios=stats.ratios(records), cc_checks=cc_check.checks(records))
