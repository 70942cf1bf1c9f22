"""`quiclab presets` in an 80-column terminal, in a pipe and as --json/--plain: every preset name whole (issue 27.6)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from lab.cli import app
from lab.errors import UsageError
from lab.plan import presets as registry

NAMES = registry.names()
FIELDS = ["name", "alias", "points", "runs", "description"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("QUICLAB_")}
    return {**env, **extra}


def _rows_named(out: str) -> set[str]:
    """The names that start a row of the table (boxed or not), each whole: followed by a blank or the line's end."""
    found = set()
    for ln in out.splitlines():
        m = re.match(r"(?:│ )?(\S+)(?:\s|$)", ln)
        if m and m.group(1) in NAMES:
            found.add(m.group(1))
    return found


def _check_table(out: str, width: int = 80) -> None:
    assert _rows_named(out) == set(NAMES), out
    assert "…" not in out
    assert max(cell_len(ln) for ln in out.splitlines()) <= width


def test_every_name_whole_at_80_columns():
    r = CliRunner().invoke(app, ["presets"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    _check_table(r.stdout)


def test_every_name_whole_in_a_pipe():
    """Off a terminal with no COLUMNS the page is 80 columns (rich's assumption): the table is made to fit it."""
    p = subprocess.run([sys.executable, "-m", "lab", "presets"], capture_output=True, text=True, timeout=60,
                       env=_env(), check=False)
    assert p.returncode == 0, p.stderr
    _check_table(p.stdout)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_every_name_whole_on_an_80_column_terminal():
    import fcntl
    import struct
    import termios

    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "lab", "presets"], stdout=follower, stderr=subprocess.PIPE,
                         env=_env(TERM="xterm"))
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert p.wait(timeout=60) == 0, p.stderr.read() if p.stderr else ""
    out = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode().replace("\r\n", "\n"))  # colours, CRLF
    _check_table(out)


def test_a_wide_terminal_keeps_the_box_and_one_line_a_preset():
    r = CliRunner().invoke(app, ["presets"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    assert "┃ preset" in r.stdout and _rows_named(r.stdout) == set(NAMES)
    assert len(r.stdout.splitlines()) == len(NAMES) + 5  # title, 3 header lines, the rows, the bottom line


def test_json_lists_every_preset():
    r = CliRunner().invoke(app, ["presets", "--json"], env={"COLUMNS": "40"})
    assert r.exit_code == 0, r.output
    listing = json.loads(r.stdout)
    assert [p["name"] for p in listing] == NAMES
    assert all(list(p) == FIELDS for p in listing)
    assert all(isinstance(p["points"], int) and isinstance(p["runs"], int) and p["runs"] >= p["points"] > 0
               for p in listing)
    by_name = {p["name"]: p for p in listing}
    for alias, name in registry.ALIASES.items():
        if alias != name:
            assert by_name[name]["alias"] == alias
    assert by_name["quick"]["alias"] is None and by_name["quick"]["description"] == registry.get("quick").description


def test_plain_is_tab_separated_one_preset_a_line():
    r = CliRunner().invoke(app, ["presets", "--plain"], env={"COLUMNS": "40"})
    assert r.exit_code == 0, r.output
    header, *lines = r.stdout.splitlines()
    assert header.split("\t") == ["preset", "alias", "points", "runs", "description"]
    fields = [ln.split("\t") for ln in lines]
    assert [f[0] for f in fields] == NAMES and all(len(f) == 5 for f in fields)
    assert all(f[2].isdigit() and f[3].isdigit() and f[4] for f in fields)


def test_json_and_plain_together_is_a_usage_error():
    r = CliRunner().invoke(app, ["presets", "--json", "--plain"])
    assert isinstance(r.exception, UsageError)


def test_a_preset_that_cannot_load_here_is_listed_with_why(tmp_path, monkeypatch):
    """The cellular preset without ../shared/traces beside the clone: listed, not a failure of the whole listing."""
    from lab import config
    from lab.cli.presets import listing

    monkeypatch.setattr(config, "TRACES_DIR", tmp_path)
    rows = {r["name"]: r for r in listing()}
    assert set(rows) == set(NAMES)
    cell = rows["cellular"]
    assert cell["points"] is None and cell["runs"] is None
    assert str(cell["description"]).startswith("not available here: ") and "unknown trace pair" in str(
        cell["description"])
    assert rows["quick"]["runs"] == 30  # 2 points x 3 protocols x 5 repeats: the others load as ever
