"""A lab test's own small sweep: the scenario written to a file, `quiclab sweep --scenario` run to its end, its
records read back (the one place the lab tests that only need a finished folder's runs do this)."""

from __future__ import annotations

from pathlib import Path

from lab.results.schema import RunRecord, read_runs
from tests.lab.test_sweep import quiclab


def sweep_records(tmp_path: Path, name: str, scenario: str) -> list[RunRecord]:
    """Run `scenario` (TOML text) as tmp_path/NAME.toml into tmp_path/NAME/; its runs' records."""
    path = tmp_path / f"{name}.toml"
    path.write_text(scenario)
    done = quiclab("sweep", "--scenario", str(path), "--out", str(tmp_path / name))
    assert done.returncode == 0, done.stderr[-2000:]
    folder = next(p for p in (tmp_path / name).iterdir() if p.is_dir())
    return read_runs(folder / "runs.csv").records
