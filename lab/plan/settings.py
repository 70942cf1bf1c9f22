"""A point's settings besides its link and size: each dimension parsed once, when the plan is made, into a typed,
frozen field that support, the runner, the adverse conditions and the workload runner read.

    workload   lab/workloads/spec.py   bulk, page:NxSIZE, reuse:.., new:.., resume:SIZE, 0rtt:SIZE
    cc         lab/endpoints/sender_cc.py   the sender's congestion control (None: nothing is set)
    quic_window  lab/endpoints/quic_window.py   the QUIC client's fixed flow-control window (None: its own)
    faults     lab/adverse/spec.py     KIND[=VALUE]:DURATION@START, ...
    competing  lab/adverse/spec.py     KIND[@START], ...
    path       lab/adverse/spec.py     KIND@START

One parser per dimension (PARSERS; lab/plan/scenario.py validates a scenario's values with the same ones): a bad
value is one UsageError naming it and what is allowed (exit 2). The values as written are kept beside the typed
fields (`strings()`): they are what a point's label is made of.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.adverse.spec import Fault, Flow, PathChange, parse_competing, parse_faults, parse_path
from lab.endpoints.quic_window import parse_quic_window
from lab.endpoints.sender_cc import parse_cc
from lab.workloads.spec import Workload, parse_workload

#: dimension -> its parser (a string in, the typed value out; a bad value raises a one-line UsageError)
PARSERS: dict[str, Callable[[str], Any]] = {
    "workload": parse_workload, "cc": parse_cc, "faults": parse_faults, "competing": parse_competing,
    "path": parse_path, "quic_window": parse_quic_window}
BULK = parse_workload("bulk")


@dataclass(frozen=True)
class Settings:
    """The typed settings of one point; a dimension not given has the value a run without it has."""

    workload: Workload = BULK
    cc: str | None = None              # None: the sender runs as it is (what is in force is read back)
    faults: tuple[Fault, ...] = ()
    competing: tuple[Flow, ...] = ()
    path: PathChange | None = None
    quic_window: int | None = None     # bytes; None: the client's own window (auto-tuned)
    written: tuple[tuple[str, str], ...] = ()  # (dimension, value as written), in the plan's order

    def strings(self) -> dict[str, str]:
        """The values as written, by dimension (only those the scenario gave)."""
        return dict(self.written)


def parse_settings(values: Mapping[str, str]) -> Settings:
    """The typed settings of these values (dimension -> value as written): every value parsed here, once."""
    unknown = sorted(set(values) - set(PARSERS))
    if unknown:
        raise ValueError(f"not a setting: {', '.join(unknown)} (settings are {', '.join(PARSERS)})")
    return Settings(**{k: PARSERS[k](v) for k, v in values.items()}, written=tuple(values.items()))
