"""objects.csv: the per-object times of a sweep's multi-object runs (one row per object), beside runs.csv.

Written like runs.csv (appended and fsynced per run, lab/results/store.py's discipline), before the run's own row.
Rows are keyed by (run_key, started_at): a run that was interrupted after its objects were written, and run again
on resume, leaves rows whose key matches no row of runs.csv; readers keep only rows that match a recorded run
(`read` does)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from lab.errors import UsageError
from lab.results.schema import RunRecord
from lab.workloads.result import ObjectTiming

OBJECTS = "objects.csv"
COLUMNS = ("run_key", "started_at", "object", "start_s", "done_s", "bytes", "http_version", "ok")


@dataclass(frozen=True)
class ObjectRow:
    run_key: str
    started_at: str
    object: str
    start_s: float
    done_s: float
    bytes: int
    http_version: str
    ok: bool


def append(folder: Path, run_key: str, started_at: str, timings: list[ObjectTiming]) -> None:
    path = folder / OBJECTS
    fresh = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if fresh:
            w.writerow(COLUMNS)
        for o in timings:
            w.writerow([run_key, started_at, o.name, repr(o.start_s), repr(o.done_s), o.bytes,
                        o.http_version, "true" if o.ok else "false"])
        f.flush()
        os.fsync(f.fileno())


def read(folder: Path, records: list[RunRecord]) -> dict[str, list[ObjectRow]]:
    """run_key -> its objects, for the recorded runs only (see the module's docstring); {} without the file. A
    torn last line (a crash mid-write) is ignored; any other bad row is a UsageError naming the file and line."""
    path = folder / OBJECTS
    if not path.is_file():
        return {}
    keep = {(r.run_key, r.started_at) for r in records}
    out: dict[str, list[ObjectRow]] = {}
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    for i, values in enumerate(rows[1:], start=2):
        last = i == len(rows)
        try:
            if len(values) != len(COLUMNS):
                raise ValueError(f"{len(values)} fields, the header has {len(COLUMNS)}")
            d = dict(zip(COLUMNS, values, strict=True))
            row = ObjectRow(d["run_key"], d["started_at"], d["object"], float(d["start_s"]), float(d["done_s"]),
                            int(d["bytes"]), d["http_version"], d["ok"] == "true")
        except ValueError as e:
            if last:
                break  # a torn last line (a write cut short by a crash): not an object
            raise UsageError(f"{str(path)!r} line {i}: not an object row ({e})") from None
        if (row.run_key, row.started_at) in keep:
            out.setdefault(row.run_key, []).append(row)
    return out
