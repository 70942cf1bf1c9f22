"""What a sweep publishes: one metric group per (point, protocol, client, server) plus one per sweep.

Labels are bounded: the sweep's name, the point's index, label and swept value, protocol, client, server and run
status; never a run id. Values are recomputed from every record so far, so each push replaces its group whole.
Only rows that are results count (lab.results.folder.is_result, the folder's one rule: no legacy "interrupted" row,
no lab failure older versions recorded as a failed run).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import get_args

from lab.observe.exposition import Family, number, render
from lab.plan.plan import PlannedRun
from lab.results.folder import is_result
from lab.results.schema import RunRecord, Status

JOB = "quiclab_sweep"
STATUSES: tuple[str, ...] = get_args(Status)
FAILED = ("failed", "timeout", "unsupported")

GroupKey = tuple[int, str, str, str]  # point, protocol, client, server


@dataclass
class PointGroup:
    point_label: str
    x_name: str
    x: float
    statuses: Counter[str] = field(default_factory=Counter)
    times_s: list[float] = field(default_factory=list)
    goodputs_bytes_s: list[float] = field(default_factory=list)  # bytes/s: Prometheus' base unit

    def add(self, r: RunRecord) -> None:
        self.statuses[r.status] += 1
        if r.status == "ok" and r.total_s is not None and r.goodput_bps is not None:
            self.times_s.append(r.total_s)
            self.goodputs_bytes_s.append(r.goodput_bps / 8)


@dataclass
class SweepState:
    sweep: str
    planned: int
    x_name: str
    shaper: str = ""
    started: float = field(default_factory=time.time)
    status: str = "running"  # running | complete | interrupted
    groups: dict[GroupKey, PointGroup] = field(default_factory=dict)
    current: PlannedRun | None = None
    done: int = 0
    failures: int = 0

    def add(self, r: RunRecord) -> GroupKey:
        key = (r.point, r.protocol, r.client, r.server)
        group = self.groups.setdefault(key, PointGroup(r.point_label, r.x_name, r.x))
        if not is_result(r):  # not a run of this sweep's to count (the folder's one rule)
            return key
        group.add(r)
        self.done += 1
        self.failures += r.status in FAILED
        if r.shaper:
            self.shaper = r.shaper
        return key

    def grouping_key(self, key: GroupKey | None = None) -> dict[str, str]:
        labels = {"job": JOB, "sweep": self.sweep}
        if key is not None:
            point, protocol, client, server = key
            labels.update(point=str(point), protocol=protocol, client=client, server=server)
        return labels

    def point_text(self, key: GroupKey) -> str:
        return render(self.point_families(key))

    def sweep_text(self) -> str:
        return render(self.sweep_families())

    def point_families(self, key: GroupKey) -> list[Family]:
        g = self.groups[key]
        labels = {"point_label": g.point_label, "x_name": g.x_name, "x": number(g.x)}
        runs = Family("quiclab_sweep_runs_total", "counter",
                      "Finished runs of this point and protocol/client/server, by status.")
        for status in STATUSES:
            runs.add(g.statuses[status], {**labels, "status": status})
        x = Family("quiclab_sweep_x", "gauge", "Value of the swept parameter (x_name) at this point.").add(g.x, labels)
        families = [runs, x]
        if g.times_s:
            families.append(Family("quiclab_sweep_transfer_seconds", "summary",
                                   "Transfer time of the successful runs so far (quartiles).")
                            .add_summary(g.times_s, labels))
            families.append(Family("quiclab_sweep_goodput_bytes_per_second", "summary",
                                   "Goodput (payload bytes / transfer time) of the successful runs so far (quartiles).")
                            .add_summary(g.goodputs_bytes_s, labels))
        return families

    def sweep_families(self) -> list[Family]:
        families = [
            Family("quiclab_sweep_info", "gauge", "The sweep's state and swept parameter (value is always 1).")
            .add(1, {"status": self.status, "x_name": self.x_name, "shaper": self.shaper}),
            Family("quiclab_sweep_running", "gauge", "1 while the sweep runs, 0 once it completed or was interrupted.")
            .add(1 if self.status == "running" else 0),
            Family("quiclab_sweep_runs_planned", "gauge", "Runs in the sweep's plan.").add(self.planned),
            Family("quiclab_sweep_runs_done", "gauge", "Runs finished so far (any status but interrupted).")
            .add(self.done),
            Family("quiclab_sweep_failures_total", "counter", "Runs that failed, timed out or were unsupported.")
            .add(self.failures),
            Family("quiclab_sweep_start_time_seconds", "gauge", "When the sweep (or its resumption) started, "
                   "seconds since the Unix epoch.").add(self.started),
        ]
        if self.current is not None:
            c = self.current
            families.append(Family("quiclab_sweep_current_run_info", "gauge",
                                   "The run in progress (the last one once the sweep ended); value is always 1.")
                            .add(1, {"point": str(c.point.index), "point_label": c.point.label,
                                     "protocol": c.protocol.value, "client": c.client, "server": c.server}))
        return families
