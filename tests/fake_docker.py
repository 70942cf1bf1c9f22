"""A stand-in docker program for unit tests: a shell script in tmp_path put where lab/docker.py looks for docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import docker


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """Write `script` as tmp_path/docker, make it executable and make lab/docker.py run it; its path."""
    program = tmp_path / "docker"
    program.write_text(script)
    program.chmod(0o755)
    monkeypatch.setattr(docker, "PROGRAM", str(program))
    return program
