"""The interrupted sweep's message names the command that continues it: `quiclab matrix --resume` for a stack
matrix's folder (its scenario has a matrix link), `quiclab sweep --resume` for any other sweep (lab/run/sweep.py)."""

from __future__ import annotations

from pathlib import Path

from lab.results.folder import write_manifest
from lab.run.sweep import SweepInterrupted, resume_command


def _folder(tmp_path: Path, scenario: dict) -> Path:
    folder = tmp_path / "sweep"
    folder.mkdir()
    write_manifest(folder, {"scenario": scenario, "status": "interrupted"})
    return folder


def test_a_matrix_folder_is_continued_by_quiclab_matrix(tmp_path):
    folder = _folder(tmp_path, {"name": "matrix-satellite-loss", "matrix": "satellite-loss"})
    assert str(SweepInterrupted(folder)) == f"sweep interrupted; continue with: quiclab matrix --resume {folder}"


def test_any_other_sweep_is_continued_by_quiclab_sweep(tmp_path):
    folder = _folder(tmp_path, {"name": "loss", "matrix": ""})
    assert resume_command(folder) == f"quiclab sweep --resume {folder}"


def test_a_folder_without_a_readable_manifest_still_gets_a_command(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json", encoding="utf-8")
    assert resume_command(tmp_path / "broken") == f"quiclab sweep --resume {tmp_path / 'broken'}"
    assert resume_command(tmp_path / "absent") == f"quiclab sweep --resume {tmp_path / 'absent'}"
