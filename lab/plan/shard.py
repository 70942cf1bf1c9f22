"""Sharded sweeps: one plan split over machines (`quiclab sweep ... --shard i/N`), put together by `quiclab merge`.

A shard runs a slice of exactly the plan the unsharded sweep would run (lab/plan/plan.py `shard`): same run keys,
seeds and order numbers, whole (point, repeat) groups so paired comparisons stay on one machine. Its manifest
records the plan's identity (a hash of the validated scenario, its seed and the planned runs), the shard, and the
facts of the machine it ran on, so a merge can check that the shards belong together.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.errors import UsageError
from lab.plan.plan import PlannedRun, groups, shard
from lab.plan.scenario import Scenario

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_ALLOWED = "i/N: shard i of N, 1 <= i <= N (e.g. 2/3)"


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, runs: list[PlannedRun]) -> list[PlannedRun]:
        return shard(runs, self.index, self.count)


def parse(text: str) -> ShardSpec:
    """`--shard i/N`; bad input is one line naming the value (exit 2)."""
    m = _SPEC.match(text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise UsageError(f"invalid --shard {text!r}: expected {_ALLOWED}")
    return ShardSpec(int(m[1]), int(m[2]))


def check(spec: ShardSpec, runs: list[PlannedRun]) -> None:
    """A plan of G (point, repeat) groups makes at most G shards (an empty shard would measure nothing)."""
    n = len(groups(runs))
    if spec.count > n:
        raise UsageError(f"invalid --shard {str(spec)!r}: the plan has {n} (point, repeat) groups, so at most {n} "
                         "shards")


#: Scenario fields added after plans were published, with their unset value: left out of a plan's identity while
#: unset, so that every earlier plan keeps its id (a folder made before a field existed is the same plan without it)
LATER_FIELDS: dict[str, object] = {"quic_window": None, "tcp_pairs": [], "matrix": ""}


def plan_id(s: Scenario, runs: list[PlannedRun]) -> str:
    """The identity of a plan: SHA-256 of the validated scenario, its seed and every planned run (key, link seed,
    order). Equal ids mean the same runs with the same seeds in the same order."""
    canonical = Scenario.model_validate(json.loads(s.model_dump_json())).model_dump(mode="json")  # 0 vs 0.0
    for field, unset in LATER_FIELDS.items():
        if canonical.get(field, unset) == unset:
            canonical.pop(field, None)
    doc = {"scenario": canonical, "seed": s.seed,
           "runs": [[r.key, r.seed, r.order] for r in sorted(runs, key=lambda r: r.order)]}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_facts() -> dict[str, Any]:
    """The machine a sweep (or a shard) runs on; the shaper backend is added when it is chosen."""
    return {"hostname": socket.gethostname(), "kernel": platform.release(), "cpu": cpu_model(),
            "cpus": os.cpu_count()}


def manifest_fields(s: Scenario, every: list[PlannedRun], spec: ShardSpec | None) -> dict[str, Any]:
    """What a sweep's manifest says about its plan and shard (sharded or not)."""
    mine = spec.select(every) if spec else every
    return {
        "plan": {"id": plan_id(s, every), "runs": len(every), "groups": len(groups(every))},
        "shard": None if spec is None else {"index": spec.index, "count": spec.count, "runs": len(mine),
                                            "groups": len(groups(mine))},
        "host_facts": host_facts(),
    }


def spec_of(manifest: dict[str, Any]) -> ShardSpec | None:
    """The shard a sweep folder holds (None: the whole plan)."""
    doc = manifest.get("shard")
    if not doc:
        return None
    try:
        spec = ShardSpec(int(doc["index"]), int(doc["count"]))
    except (TypeError, KeyError, ValueError):
        raise UsageError(f"manifest shard {doc!r} is not {{index, count}}") from None
    if not 1 <= spec.index <= spec.count:
        raise UsageError(f"manifest shard {spec}: expected {_ALLOWED}")
    return spec


def restrict(manifest: dict[str, Any], every: list[PlannedRun]) -> list[PlannedRun]:
    """The runs a sweep folder is meant to hold: its shard of the plan, or the whole plan (for --resume)."""
    spec = spec_of(manifest)
    return spec.select(every) if spec else every


def folder_name(name: str, spec: ShardSpec | None) -> str:
    return name if spec is None else f"{name}-shard{spec.index}of{spec.count}"
