"""Put the shards of one sweep plan together (`quiclab merge DIR...`).

The shards must belong to one plan (same plan id: validated scenario, seed and planned runs; same commit; split
the same way), every shard must be there once, and every run must be one its shard was planned to hold, once,
with the plan's seed. The merged folder holds the raw runs of all shards (runs.csv, each run's shard and machine
in the `host` column) and a manifest listing the shards; the summary, plots and report are computed from those
raw runs like any sweep's, never from the shards' summaries.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import UsageError
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan
from lab.plan.scenario import Scenario
from lab.plan.shard import ShardSpec, plan_id, spec_of
from lab.report.report import Built, build
from lab.results import store
from lab.results.folder import Manifest, is_result
from lab.results.schema import RunRecord

#: Manifest keys that describe the plan (equal in every shard); the merged manifest takes them from the first.
PLAN_KEYS = ("name", "preset", "scenario", "seed", "repeats", "points", "x_name", "log_y", "shaper_requested",
             "git", "plan")


@dataclass
class Shard:
    folder: Path
    manifest: Manifest
    spec: ShardSpec                 # 1/1 for a sweep that was not sharded
    records: list[RunRecord]        # runs.csv's results (is_result: no interrupted or legacy lab-failure row)
    planned: dict[str, PlannedRun] = field(default_factory=dict)  # the runs this shard was planned to hold

    @property
    def missing(self) -> list[str]:
        have = {r.run_key for r in self.records}
        return [k for k in self.planned if k not in have]

    def facts(self) -> dict[str, Any]:
        """The machine that ran this shard: hostname, kernel, CPU model and count, shaper backend."""
        m = self.manifest
        facts = dict(m.host_facts or {})
        host, versions = m.host or {}, m.versions or {}
        facts.setdefault("hostname", host.get("hostname", "unknown"))
        facts.setdefault("kernel", versions.get("kernel", "unknown"))
        facts.setdefault("cpu", "unknown")
        facts.setdefault("cpus", host.get("cpus"))
        return {"shard": str(self.spec), **facts, "shaper": m.get("shaper", "unknown")}


@dataclass
class Merged:
    folder: Path
    shards: list[Shard]
    planned: int
    runs: int
    problems: list[str]   # what makes the merge partial (empty when complete)
    differences: list[str]  # facts that differ between the shards' machines
    report: Built | None = None  # the merged folder's report (its statistics computed once)

    @property
    def complete(self) -> bool:
        return not self.problems


def read_shard(folder: Path) -> Shard:
    if not folder.is_dir():
        what = "a file" if folder.exists() else "no such directory"
        raise UsageError(f"{str(folder)!r} is not a sweep folder ({what})")
    manifest = store.read_manifest(folder)
    records = [r for r in store.load_runs(folder) if is_result(r)]  # the folder's one rule
    return Shard(folder, manifest, spec_of(manifest.doc()) or ShardSpec(1, 1), records)


def _describe(s: Scenario, pid: str) -> str:
    return f"{s.name}, seed {s.seed}, plan {pid.removeprefix('sha256:')[:12]}"


def check_plan(shards: list[Shard]) -> tuple[Scenario, list[PlannedRun]]:
    """Every shard belongs to one plan, from one commit, split the same way; returns the plan."""
    ref, ref_s, ref_runs, ref_id = shards[0], None, [], ""
    for sh in shards:
        s = validate(sh.manifest.scenario, str(sh.folder / store.MANIFEST))
        every = plan(s)
        pid = plan_id(s, every)
        recorded = sh.manifest.plan_id
        if recorded and recorded != pid:
            raise UsageError(f"{sh.folder}: the manifest's plan id {recorded} is not the one its scenario makes "
                             f"({pid}): written by another quiclab version, or edited")
        if ref_s is None:
            ref_s, ref_runs, ref_id = s, every, pid
        elif pid != ref_id:
            raise UsageError(f"{sh.folder} belongs to another plan ({_describe(s, pid)}) than {ref.folder} "
                             f"({_describe(ref_s, ref_id)}): merge only the shards of one sweep")
        commit, ref_commit = _commit(sh.manifest), _commit(ref.manifest)
        if commit != ref_commit:
            raise UsageError(f"{sh.folder} was measured at commit {commit}, {ref.folder} at {ref_commit}: the "
                             f"shards of one sweep run one commit")
        if sh.spec.count != ref.spec.count:
            raise UsageError(f"{sh.folder} is shard {sh.spec} but {ref.folder} is shard {ref.spec}: the shards of "
                             f"one sweep split the plan the same way")
    assert ref_s is not None
    return ref_s, ref_runs


def _commit(manifest: Manifest) -> str:
    return str((manifest.git or {}).get("commit") or "unknown")


def check_runs(shards: list[Shard], every: list[PlannedRun]) -> list[str]:
    """Errors for runs that do not belong (raised); returns what is missing (shards, runs) as one-line notes."""
    seen: dict[int, Shard] = {}
    for sh in shards:
        if sh.spec.index in seen:
            raise UsageError(f"shard {sh.spec} given twice: {seen[sh.spec.index].folder} and {sh.folder}")
        seen[sh.spec.index] = sh
        sh.planned = {r.key: r for r in sh.spec.select(every)}
        keys: set[str] = set()
        for r in sh.records:
            p = sh.planned.get(r.run_key)
            if p is None:
                raise UsageError(f"{sh.folder}: run {r.run_key} is not in shard {sh.spec} of the plan")
            if r.run_key in keys:
                raise UsageError(f"{sh.folder}: run {r.run_key} is recorded twice")
            if (r.seed, r.point, r.repeat) != (p.seed, p.point.index, p.repeat):
                raise UsageError(f"{sh.folder}: run {r.run_key} has seed {r.seed}, point {r.point}, repeat {r.repeat};"
                                 f" the plan says seed {p.seed}, point {p.point.index}, repeat {p.repeat}")
            keys.add(r.run_key)
    count = shards[0].spec.count
    problems = []
    absent = [i for i in range(1, count + 1) if i not in seen]
    if absent:
        given = ", ".join(f"{i}/{count} {seen[i].folder}" for i in sorted(seen))
        problems.append(f"missing shard{'s' if len(absent) > 1 else ''} "
                        f"{', '.join(f'{i}/{count}' for i in absent)} (given: {given})")
    for i in sorted(seen):
        sh = seen[i]
        if sh.missing:
            problems.append(f"shard {sh.spec} in {sh.folder} lacks {len(sh.missing)} of its {len(sh.planned)} runs "
                            f"(status {sh.manifest.get('status', 'unknown')}): continue it with "
                            f"`quiclab sweep --resume {sh.folder}`")
    return problems


def differences(shards: list[Shard]) -> list[str]:
    """Facts of the shards' machines and lab that differ (kernel, CPU, shaper, versions): one line each."""
    values: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for sh in shards:
        facts = sh.facts()
        for k in ("kernel", "cpu", "cpus", "shaper"):
            values[k][str(facts.get(k))].append(str(sh.spec))
        if (sh.manifest.git or {}).get("dirty"):
            values["git.dirty"]["uncommitted changes"].append(str(sh.spec))
        for k, v in (sh.manifest.versions or {}).items():
            if k != "kernel":
                values[f"versions.{k}"][str(v)].append(str(sh.spec))
    out = []
    for k, by_value in values.items():
        if len(by_value) > 1 or k == "git.dirty":
            out.append(f"{k}: " + "; ".join(f"{v} (shard{'s' if len(s) > 1 else ''} {', '.join(s)})"
                                            for v, s in by_value.items()))
    return out


def _joined(shards: list[Shard], key: str) -> dict[str, Any]:
    """A per-key dict of the shards' manifests (e.g. versions): the value where all agree, else each shard's."""
    docs = {str(sh.spec): getattr(sh.manifest, key) or {} for sh in shards}
    keys = list(dict.fromkeys(k for doc in docs.values() for k in doc))
    out: dict[str, Any] = {}
    for k in keys:
        vals = {spec: doc.get(k) for spec, doc in docs.items()}
        distinct = {json.dumps(v, sort_keys=True, default=str) for v in vals.values()}
        out[k] = next(iter(vals.values())) if len(distinct) == 1 else "; ".join(f"{v} (shard {s})"
                                                                                for s, v in vals.items())
    return out


def merged_manifest(shards: list[Shard], planned: int, runs: int, problems: list[str],
                    diffs: list[str]) -> Manifest:
    first = shards[0].manifest.doc()
    doc: dict[str, Any] = {k: first.get(k) for k in PLAN_KEYS if k in first}
    shapers = sorted({str(sh.manifest.get("shaper", "unknown")) for sh in shards})
    started = [sh.manifest.started_at for sh in shards if sh.manifest.started_at]
    finished = [sh.manifest.finished_at for sh in shards if sh.manifest.finished_at]
    doc.update(
        planned_runs=planned, completed_runs=runs, status="complete" if not problems else "partial",
        shard=None, merged_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        started_at=min(started, default=None), finished_at=max(finished, default=None),
        shaper=", ".join(shapers), versions=_joined(shards, "versions"),
        congestion_control=_joined(shards, "congestion_control"),
        implementations=shards[0].manifest.implementations,
        self_check={f"shard {sh.spec} {k}": v for sh in shards for k, v in (sh.manifest.self_check or {}).items()},
        host_facts=[sh.facts() for sh in shards],
        shards=[{"index": sh.spec.index, "count": sh.spec.count, "folder": str(sh.folder),
                 "status": sh.manifest.status, "runs": len(sh.records), "planned_runs": len(sh.planned),
                 "started_at": sh.manifest.started_at, "finished_at": sh.manifest.finished_at,
                 "host_facts": sh.facts(), "manifest": sh.manifest.doc()} for sh in shards],
        problems=problems, differences=diffs,
    )
    return Manifest.model_validate(doc)


def merge(folders: list[Path], results_dir: Path, partial: bool = False) -> Merged:
    """Check the shards and write the merged sweep folder (results_dir/<stamp>-<name>-merged/) with its report.
    Missing shards or runs are an error, unless `partial`: then the folder holds what was measured and its
    manifest says status "partial" and what is missing."""
    if not folders:
        raise UsageError("give the shards' sweep folders to merge")
    shards = sorted((read_shard(f) for f in folders), key=lambda sh: sh.spec.index)
    s, every = check_plan(shards)
    problems = check_runs(shards, every)
    if problems and not partial:
        raise UsageError("; ".join(problems) + " (--partial merges what is there)")
    records = []
    for sh in shards:
        host = json.dumps(sh.facts(), separators=(",", ":"), sort_keys=False)
        for r in sh.records:
            r.host = host
            records.append(r)
    records.sort(key=lambda r: r.order)
    diffs = differences(shards)
    folder = store.new_folder(results_dir, f"{s.name}-merged")
    store.rewrite_runs(folder, records)
    store.write_manifest(folder, merged_manifest(shards, len(every), len(records), problems, diffs))
    built = build(folder)
    return Merged(folder, shards, len(every), len(records), problems, diffs, built)
