"""Prometheus text exposition format (0.0.4), built by hand: families of samples with HELP and TYPE."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["counter", "gauge", "summary", "untyped"]
Labels = Mapping[str, str]


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def labelset(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


@dataclass
class Family:
    name: str
    kind: Kind
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)  # (suffix, labels, value)

    def add(self, value: float, labels: Labels | None = None, suffix: str = "") -> Family:
        self.samples.append((suffix, dict(labels or {}), value))
        return self

    def add_summary(self, values: Sequence[float], labels: Labels | None = None,
                    quantiles: Sequence[float] = (0.25, 0.5, 0.75)) -> Family:
        """A summary of the values: the given quantiles (linear interpolation), _sum and _count."""
        base = dict(labels or {})
        xs = sorted(values)
        for q in quantiles:
            self.add(quantile(xs, q) if xs else math.nan, {**base, "quantile": number(q)})
        self.add(sum(xs), base, "_sum")
        return self.add(len(xs), base, "_count")

    def text(self) -> str:
        lines = [f"# HELP {self.name} {self.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}",
                 f"# TYPE {self.name} {self.kind}"]
        lines += [f"{self.name}{suffix}{labelset(labels)} {number(v)}" for suffix, labels, v in self.samples]
        return "\n".join(lines) + "\n"


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); the list must be sorted and non-empty."""
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def render(families: Sequence[Family]) -> str:
    return "".join(f.text() for f in families if f.samples)
