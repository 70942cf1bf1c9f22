"""A sweep's results folder as a sweep writes it: manifest.json (replaced atomically) and runs.csv (one line
appended and fsynced per completed run, so nothing measured is lost). runs.csv is read by
lab.results.schema.read_runs only: a torn last line (a crash mid-write) is tolerated and reported; any other bad
row is an error naming the line. The folder's format (file names, the one atomic writer, the manifest's reader and
writer, the one "is a result" rule) is lab.results.folder's; the names are re-exported here for the sweep code."""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
from pathlib import Path
from typing import Any

from lab import terminal
from lab.results.folder import (
    HOST_BOUND,
    LEGACY_LAB_FAILURES,
    MANIFEST,
    RUNS,
    Manifest,
    is_result,
    read_manifest,
    try_manifest,
    write_atomic,
    write_json,
    write_manifest,
)
from lab.results.schema import COLUMNS, RunRecord, read_runs, to_row

__all__ = ["HOST_BOUND", "LEGACY_LAB_FAILURES", "MANIFEST", "RUNS", "Manifest", "RunLog", "completed_runs",
           "is_result", "latest_matching", "load_runs", "new_folder", "read_manifest", "rewrite_runs",
           "write_json_atomic", "write_manifest"]


def new_folder(results_dir: Path, name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = results_dir / f"{stamp}-{name}"
    n = 1
    while folder.exists():
        n += 1
        folder = results_dir / f"{stamp}-{name}-{n}"
    folder.mkdir(parents=True)
    return folder


def write_json_atomic(path: Path, doc: Any) -> None:
    """A JSON file written atomically (lab.results.folder.write_json); manifests go through write_manifest."""
    write_json(path, doc)


def load_runs(folder: Path, *, report_torn: bool = False) -> list[RunRecord]:
    """Every run recorded in runs.csv (see read_runs for the one rule); with report_torn, a torn last line is
    reported as a warning."""
    path = folder / RUNS
    if not path.exists():
        return []
    f = read_runs(path)
    if f.torn_line is not None and report_torn:
        terminal.warning(f"{path}: line {f.torn_line} is incomplete (a write cut short): it is not a run and is "
                         "ignored (a resume runs that run again)")
    return f.records


def rewrite_runs(folder: Path, records: list[RunRecord]) -> None:
    """runs.csv replaced whole by these records (a resume's kept runs, a merge's), atomically."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow(to_row(r))
    write_atomic(folder / RUNS, buf.getvalue())


def latest_matching(results_dir: Path, scenario: dict[str, Any], shard: dict[str, int] | None = None) -> Path | None:
    """The newest results folder whose manifest holds exactly this scenario and shard ({index, count}; None: the
    whole plan) (for `quiclab sweep --reuse`)."""
    candidates = sorted(results_dir.glob(f"*-{scenario['name']}*/{MANIFEST}"), reverse=True)
    for path in candidates:
        m = try_manifest(path.parent)  # unreadable, not JSON, not a sweep's: not a candidate
        if m is None or m.scenario != scenario or m.is_merge:
            continue
        theirs, wanted = m.shard or {}, shard or {}
        if (theirs.get("index"), theirs.get("count")) == (wanted.get("index"), wanted.get("count")):
            return path.parent
    return None


def completed_runs(records: list[RunRecord], planned: set[str]) -> dict[str, RunRecord]:
    """The runs a resumed sweep keeps: planned results (is_result), the first record per run key."""
    kept: dict[str, RunRecord] = {}
    for r in records:
        if is_result(r) and r.run_key in planned and r.run_key not in kept:
            kept[r.run_key] = r
    return kept


class RunLog:
    """Appends one record per completed run to runs.csv."""

    def __init__(self, folder: Path, name: str = "") -> None:
        self.path = folder / (name or RUNS)
        self._f: Any = None
        if name:  # a side file (host-bound.csv): made when the first row comes
            return
        self._open()

    def _open(self) -> None:
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._f = self.path.open("a", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=COLUMNS, lineterminator="\n")
        if fresh:
            self._w.writeheader()
            self._sync()

    def append(self, record: RunRecord) -> None:
        if self._f is None:
            self._open()
        self._w.writerow(to_row(record))
        self._sync()

    def _sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
