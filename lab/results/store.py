"""A sweep's results folder: manifest.json (replaced atomically) and runs.csv (one line appended and fsynced
per completed run, so nothing measured is lost). runs.csv is read by lab.results.schema.read_runs only: a torn
last line (a crash mid-write) is tolerated and reported; any other bad row is an error naming the line."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from lab import terminal
from lab.errors import UsageError
from lab.results.schema import COLUMNS, RunRecord, read_runs, to_row

RUNS = "runs.csv"
MANIFEST = "manifest.json"
HOST_BOUND = "host-bound.csv"  # attempts the fidelity guard set aside (lab/run/hostload.py): never results


def new_folder(results_dir: Path, name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = results_dir / f"{stamp}-{name}"
    n = 1
    while folder.exists():
        n += 1
        folder = results_dir / f"{stamp}-{name}-{n}"
    folder.mkdir(parents=True)
    return folder


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except OSError:
        raise UsageError(f"{str(folder)!r} is not a sweep folder: no readable {MANIFEST}") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise UsageError(f"{str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or "scenario" not in doc:
        raise UsageError(f"{str(path)!r} has no scenario: it was not written by `quiclab sweep`")
    return doc


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
    path = folder / RUNS
    tmp = path.with_name(f".{RUNS}.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in records:
            w.writerow(to_row(r))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def latest_matching(results_dir: Path, scenario: dict[str, Any], shard: dict[str, int] | None = None) -> Path | None:
    """The newest results folder whose manifest holds exactly this scenario and shard ({index, count}; None: the
    whole plan) (for `quiclab sweep --reuse`)."""
    candidates = sorted(results_dir.glob(f"*-{scenario['name']}*/{MANIFEST}"), reverse=True)
    for manifest in candidates:
        try:
            doc = json.loads(manifest.read_text())
        except (OSError, ValueError):  # unreadable, not JSON, not UTF-8: not a candidate
            continue
        if not isinstance(doc, dict) or doc.get("scenario") != scenario or "shards" in doc:  # not a merge
            continue
        theirs, wanted = doc.get("shard") or {}, shard or {}
        if (theirs.get("index"), theirs.get("count")) == (wanted.get("index"), wanted.get("count")):
            return manifest.parent
    return None


#: Failure texts with which older versions recorded the lab's own failures as runs; a resume runs them again.
LEGACY_LAB_FAILURES = ("client exit code -1:", "could not run ")


def is_result(r: RunRecord) -> bool:
    """Whether a recorded row is a measurement: not a legacy "interrupted" row, not a lab failure that older
    versions recorded as a failed run."""
    return r.status != "interrupted" and not (r.status == "failed" and r.failure.startswith(LEGACY_LAB_FAILURES))


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
