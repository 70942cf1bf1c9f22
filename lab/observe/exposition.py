"""Metric families for the Prometheus text exposition format, through prometheus_client.

quiclab publishes values it computed itself (a sweep's aggregates), not live instruments, so a family here is a
prometheus_client `Metric` filled with samples, collected by a throw-away registry: prometheus_client writes the
text (HELP/TYPE lines, label escaping, number format) and pushes it (lab/observe/push.py). Kept by hand: `number`,
the format of the numeric label values (x, quantile) the dashboards select and show, so they stay as they were.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from lab.quantiles import quantiles as lab_quantiles

Kind = Literal["counter", "gauge", "summary"]
Labels = Mapping[str, str]


def number(v: float) -> str:
    """A number as a label value: 5 -> "5", 0.25 -> "0.25" (never "5.0")."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


class Family:
    """One metric family: its name as the samples carry it (a counter's ends in _total), kind, help, samples."""

    def __init__(self, name: str, kind: Kind, help: str) -> None:
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"counter {name!r} must end in _total")
        self.name = name
        # prometheus_client names a counter family without _total and adds it to the samples and HELP/TYPE lines
        self.metric = Metric(name.removesuffix("_total") if kind == "counter" else name, help, kind)

    @property
    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        return [(s.name.removeprefix(self.name), dict(s.labels), s.value) for s in self.metric.samples]

    def add(self, value: float, labels: Labels | None = None, suffix: str = "") -> Family:
        self.metric.add_sample(self.name + suffix, dict(labels or {}), float(value))
        return self

    def add_summary(self, values: Sequence[float], labels: Labels | None = None,
                    quantiles: Sequence[float] = (0.25, 0.5, 0.75)) -> Family:
        """A summary of the values: the given quantiles (the lab's rule, lab/quantiles.py), _sum and _count."""
        base = dict(labels or {})
        qs = lab_quantiles(values, quantiles) if len(values) else [math.nan] * len(quantiles)
        for q, v in zip(quantiles, qs, strict=True):
            self.add(float(v), {**base, "quantile": number(q)})
        self.add(math.fsum(values), base, "_sum")
        return self.add(len(values), base, "_count")

    def text(self) -> str:
        return render([self])


class _Fixed:
    """A collector that hands out families computed beforehand."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self.metrics = list(metrics)

    def collect(self) -> Iterable[Metric]:
        return self.metrics


def registry(families: Sequence[Family]) -> CollectorRegistry:
    """A registry holding the families that have samples (what push_to_gateway and generate_latest take)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(f.metric for f in families if f.metric.samples))
    return reg


def render(families: Sequence[Family]) -> str:
    """The text exposition (format 0.0.4) of the families that have samples."""
    return generate_latest(registry(families)).decode()
