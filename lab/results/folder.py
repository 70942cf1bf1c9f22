"""The sweep folder format, in one place: the names of its files, the one atomic writer, the one manifest reader
and writer (`Manifest`, a typed model that keeps every key it does not know), and the one rule for "this row of
runs.csv is a result".

A sweep folder (results/<timestamp>-<name>/) holds:
- manifest.json: what the sweep was (scenario, plan, shard), where and how it ran (versions, shaper, host facts,
  labs) and how it ended (status, times). Written whole, atomically (`write_manifest`), read by `read_manifest`.
- runs.csv: one row per recorded run (lab.results.schema: COLUMNS, read_runs); lab.results.store appends to it.
- host-bound.csv: attempts the fidelity guard set aside (never results).
- the reports built from them (summary.md, plots/, report.html; lab.report.report).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_serializer, model_validator

from lab.errors import UsageError
from lab.results.schema import RunRecord

RUNS = "runs.csv"
MANIFEST = "manifest.json"
HOST_BOUND = "host-bound.csv"  # attempts the fidelity guard set aside (lab/run/hostload.py): never results

JSONDict = dict[str, Any]


# ---------------------------------------------------------------------------------------------------------------
# Writing


def write_atomic(path: Path, content: str | bytes) -> None:
    """Replace `path` with `content` whole or not at all: written to a temporary file beside it, flushed and
    fsynced, then renamed over it (os.replace). The temporary file never outlives the call."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def place_dir(tmp: Path, final: Path) -> None:
    """A directory written whole under a temporary name put in place by one rename, replacing a stale one (a
    benchmark job's result folder: lab/bench/calibration.py)."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def json_text(doc: Any) -> str:
    """How the folder's JSON files are written: indented, keys in their order, anything else as str."""
    return json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n"


def write_json(path: Path, doc: Any) -> None:
    """A JSON file of the folder (manifest.json, reproduction.json), atomically (write_atomic)."""
    if isinstance(doc, BaseModel):
        doc = doc.model_dump(mode="python", exclude_unset=True)
    write_atomic(path, json_text(doc))


# ---------------------------------------------------------------------------------------------------------------
# The manifest


class Section(BaseModel):
    """A part of the manifest with one owner, written whole (`Manifest.put`): keys given are written (a None too),
    keys not given are removed. On disk the keys stay flat (older folders read as before)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Sweep(Section):
    """What the sweep is: its scenario, plan and shard, where it started from. Written once, at its start
    (lab/run/sweep.py; the plan and shard keys from lab/plan/shard.py manifest_fields)."""

    name: str | None = None
    preset: str | None = None
    scenario: JSONDict | str | None = None  # the validated scenario (a str only in hand-made folders)
    seed: int | None = None
    repeats: int | None = None
    planned_runs: int | None = None
    points: list[Any] | None = None
    x_name: str | None = None
    log_y: bool | None = None
    shaper_requested: str | None = None
    started_at: str | None = None
    git: JSONDict | None = None  # the commit and tree the sweep started from (environment.git)
    host: JSONDict | None = None
    plan: JSONDict | None = None  # {id, runs, groups} (lab/plan/shard.py)
    shard: JSONDict | None = None  # {index, count, runs, groups}; None: the whole plan
    host_facts: JSONDict | list[Any] | None = None  # a merge: one per shard
    host_guard: str | None = None


class Environment(Section):
    """The lab the sweep measured on (a parallel sweep: its own lab's): versions, congestion control, the one shaper
    and its self-check, forwarding, calibration, images (lab/run/lab_session.py measure)."""

    versions: JSONDict | None = None
    congestion_control: JSONDict | None = None
    implementations: JSONDict | None = None
    self_check: JSONDict | str | None = None  # (summary.self_check_table shows a non-dict one as text)
    startup_cache: JSONDict | None = None
    base_path: JSONDict | None = None
    shaper: str | None = None
    shaper_reason: str | None = None
    link_forwarding: str | None = None
    images: JSONDict | None = None  # per container (service) the sweep used: {id, name} (environment.images)


class Labs(Section):
    """A parallel sweep's labs (lab/run/parallel.py): how many and which, and per lab its share and facts."""

    parallel: JSONDict | None = None  # {labs, instances, auto}
    labs: JSONDict | None = None  # per lab: {runs, joined_s, error, facts}


class End(Section):
    """Where the sweep is and how it ended: status, times, resumes, what stopped it (lab/run/sweep.py)."""

    status: str | None = None  # starting, running, complete, interrupted, stopped, partial (a merge)
    resumed_at: list[str] | None = None
    resumed_git: list[Any] | None = None  # per resume: the commit and tree that continued it (environment.git)
    finished_at: str | None = None
    wall_s: float | int | None = None
    completed_runs: int | None = None
    stopped_by: str | None = None
    teardown_problems: list[str] | None = None


class UntilVerdict(Section):
    """A sweep run until decided (`quiclab sweep --until-verdict`): the sequential rule, its levels (nominal and
    spent), per point the repeats it needed or reached and why it stopped (lab/stats/until.py Record: its
    document; lab/run/rounds.py writes it after every round and at the sweep's finish)."""

    until_verdict: JSONDict | None = None


class Merge(Section):
    """A merged folder's own keys (lab/report/merge.py)."""

    shards: list[Any] | None = None
    merged_at: str | None = None
    problems: list[str] | None = None
    differences: list[str] | None = None


SECTIONS: tuple[type[Section], ...] = (Sweep, Environment, Labs, End, UntilVerdict, Merge)
S = TypeVar("S", bound=Section)


class Manifest(Sweep, Environment, Labs, End, UntilVerdict, Merge):
    """manifest.json: the keys of its sections (Sweep, Environment, Labs, End; a sweep run until decided, UntilVerdict;
    a merge's Merge), typed; every key is optional (older folders lack some) and any other key (older or newer
    versions' own) is kept as it is.

    A manifest read and written again is the same JSON document: only keys that were read or set are written
    (`doc`), in the order they were read (new keys after them), values unconverted (strict types: no int becomes
    a float, no number a bool)."""

    model_config = ConfigDict(extra="allow", strict=True)

    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> Manifest:
        m = handler(data)
        if isinstance(data, Mapping):
            m._order = list(data)
        return m

    @model_serializer(mode="wrap")
    def _in_order(self, handler: Any) -> JSONDict:
        d: JSONDict = handler(self)
        rank = {k: i for i, k in enumerate(self._order)}
        return dict(sorted(d.items(), key=lambda kv: rank.get(kv[0], len(rank))))

    def doc(self) -> JSONDict:
        """The manifest as its JSON document (a new dict): the keys it was read with and those set since."""
        return self.model_dump(mode="python", exclude_unset=True)

    def update(self, **values: Any) -> Manifest:
        """Set keys (typed or not) in place, each checked as a read would; returns self."""
        checked = as_manifest({**self.doc(), **values})
        for key in values:
            setattr(self, key, getattr(checked, key))
        self._order += [key for key in values if key not in self._order]  # new keys after the others, as set
        return self

    def put(self, section: Section) -> Manifest:
        """A section written whole: the keys it was given set, its other keys removed; returns self."""
        given = section.model_fields_set
        self.update(**{k: getattr(section, k) for k in type(section).model_fields if k in given})
        for key in type(section).model_fields:
            if key not in given:
                self.drop(key)
        return self

    def section(self, kind: type[S]) -> S:
        """The section's keys as this manifest has them (absent keys unset)."""
        doc = self.doc()
        return kind.model_validate({k: doc[k] for k in kind.model_fields if k in doc})

    def drop(self, key: str) -> None:
        """Remove a key, so it is not written (e.g. stopped_by once a sweep resumes)."""
        if key in type(self).model_fields:
            setattr(self, key, None)
            self.model_fields_set.discard(key)
        elif self.__pydantic_extra__ is not None:
            self.__pydantic_extra__.pop(key, None)

    # read access by key, as to the JSON document, for code that has not moved to the attributes
    def __getitem__(self, key: str) -> Any:
        return self.doc()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.doc()

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc().get(key, default)

    @property
    def plan_id(self) -> str | None:
        return (self.plan or {}).get("id")

    @property
    def is_merge(self) -> bool:
        return self.shards is not None


def _one_line(e: ValidationError) -> str:
    return "; ".join(f"key {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())


def as_manifest(doc: Manifest | Mapping[str, Any], where: str = MANIFEST) -> Manifest:
    """A manifest from a document (a dict) or itself; a key of the wrong type is a one-line UsageError."""
    if isinstance(doc, Manifest):
        return doc
    try:
        return Manifest.model_validate(dict(doc))
    except ValidationError as e:
        raise UsageError(f"{where!r} is not a quiclab manifest: {_one_line(e)}") from None


def as_doc(manifest: Manifest | Mapping[str, Any]) -> JSONDict:
    """A manifest's JSON document, from the model or from a document (for code that reads it as a dict)."""
    return manifest.doc() if isinstance(manifest, Manifest) else dict(manifest)


def read_manifest(folder: Path, *, required: bool = True) -> Manifest:
    """The one reader of folder/manifest.json. Not a JSON object with a scenario: a one-line UsageError (a sweep
    folder's manifest always has one). Not `required` (the reports, which work from runs.csv alone): a missing
    manifest reads as an empty one and a scenario is not needed; unreadable JSON is still an error."""
    path = folder / MANIFEST
    if not required and not path.is_file():
        return Manifest()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise UsageError(f"{str(folder)!r} is not a sweep folder: no readable {MANIFEST}") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise UsageError(f"{str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or (required and "scenario" not in doc):
        raise UsageError(f"{str(path)!r} has no scenario: it was not written by `quiclab sweep`")
    return as_manifest(doc, str(path))


def try_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None where read_manifest would refuse it (for scans over many folders)."""
    try:
        return read_manifest(folder)
    except UsageError:
        return None


def write_manifest(folder: Path, manifest: Manifest | Mapping[str, Any]) -> None:
    """The one writer of folder/manifest.json: checked against Manifest's types, then written atomically."""
    write_json(folder / MANIFEST, as_manifest(manifest, str(folder / MANIFEST)).doc())


# ---------------------------------------------------------------------------------------------------------------
# Rows of runs.csv

#: Failure texts with which older versions recorded the lab's own failures as runs; a resume runs them again.
LEGACY_LAB_FAILURES = ("client exit code -1:", "could not run ")


def is_result(r: RunRecord) -> bool:
    """The one rule for whether a recorded row of runs.csv is a measurement: not a legacy "interrupted" row, not a
    lab failure that older versions recorded as a failed run. A resume keeps (and a merge takes) only these; the
    statistics (lab.stats.stats exclusion_reason) and the live metrics (lab.observe.sweep_metrics) count only
    these."""
    return r.status != "interrupted" and not (r.status == "failed" and r.failure.startswith(LEGACY_LAB_FAILURES))
