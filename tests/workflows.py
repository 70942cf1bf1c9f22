"""Read the GitHub Actions workflows (.github/workflows) and run a step's `run:` script here, as the runner would:
the job's shell, the workflow/job/step env with its `${{ ... }}` expressions substituted from a given context."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml

from lab.config import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
_EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
#: GitHub's default for `shell: bash` (and for steps without a shell on Linux).
DEFAULT_SHELL = "bash --noprofile --norc -eo pipefail {0}"


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def step(doc: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    found = [s for s in doc["jobs"][job]["steps"] if s.get("name") == name or s.get("id") == name]
    assert len(found) == 1, f"{job}: no single step named {name!r}"
    return found[0]


def expand(text: str, context: dict[str, str]) -> str:
    """Substitute ${{ expr }} from `context` (expr as written, e.g. "matrix.shard"); an unknown one is an error."""
    def sub(m: re.Match[str]) -> str:
        if m[1] not in context:
            raise KeyError(f"no value for ${{{{ {m[1]} }}}} in the test's context")
        return context[m[1]]
    return _EXPR.sub(sub, str(text))


def shell(doc: dict[str, Any], job: str, st: dict[str, Any]) -> str:
    return str(st.get("shell") or doc["jobs"][job].get("defaults", {}).get("run", {}).get("shell")
               or doc.get("defaults", {}).get("run", {}).get("shell") or DEFAULT_SHELL)


def env(doc: dict[str, Any], job: str, st: dict[str, Any], context: dict[str, str]) -> dict[str, str]:
    """The step's environment: workflow, then job, then step env (later ones win), expressions substituted; an
    expression may use env.X of an earlier level."""
    out: dict[str, str] = {}
    for level in (doc.get("env", {}), doc["jobs"][job].get("env", {}), st.get("env", {})):
        for k, v in (level or {}).items():
            out[k] = expand("" if v is None else str(v), {**context, **{f"env.{n}": x for n, x in out.items()}})
    return out


def run_step(doc: dict[str, Any], job: str, name: str, context: dict[str, str], overrides: dict[str, str],
             tmp: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run one step's script in the repository root with the runner's shell (as root here, `sudo -E` is dropped).
    `overrides` replace env values (e.g. output folders in tmp); GITHUB_OUTPUT and GITHUB_STEP_SUMMARY are files
    in tmp."""
    st = step(doc, job, name)
    script = st["run"]
    assert "${{" not in script, f"{job}/{name}: expressions belong in env:, not in run: (script injection)"
    sh = shell(doc, job, st)
    if os.geteuid() == 0:
        sh = sh.removeprefix("sudo -E ")
    argv = sh.split()
    path = tmp / f"{job}-{re.sub(r'[^a-z0-9]+', '-', name.lower())}.sh"
    path.write_text(script)
    argv[argv.index("{0}")] = str(path)
    environ = {**os.environ, **env(doc, job, st, context), **overrides,
               "GITHUB_OUTPUT": str(tmp / "github_output"), "GITHUB_STEP_SUMMARY": str(tmp / "step_summary")}
    return subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=timeout)


# --- what the workflows' scripts run (tests/unit/test_workflows.py) ---------------------------------------------------

#: the names `sudo env NAME=VALUE ...` may set in front of the README's command: where root finds the runner's tools
#: (uv, Go, cargo and rustup's toolchain), nothing that changes what the command does.
TOOL_PATHS = frozenset({"PATH", "RUSTUP_HOME", "CARGO_HOME"})
_UV_INSTALL = re.compile(r"\bpipx?\s+install\b[^\n]*?[\"']?\buv(?:==(?P<pin>\S+?))?[\"']?(?=\s|$)")


def jobs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return doc["jobs"]


def lines(script: str) -> list[str]:
    """A run: script's logical lines (backslash continuations joined), comments and blank lines left out."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def root_prefix_and_command(line: str) -> tuple[dict[str, str], list[str]] | None:
    """Split `sudo [options] [env NAME=VALUE ...] CMD ...` into the assignments and CMD's words; a line without sudo
    is ({}, its words). None when the line is not one simple command (pipes, lists, redirections)."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if any(w in ("|", "||", "&&", ";", "&") or w.startswith((">", "<")) for w in words):
        return None
    assigned: dict[str, str] = {}
    if words[:1] == ["sudo"]:
        words = words[1:]
        while words and words[0].startswith("-"):
            words = words[1:]
        if words[:1] == ["env"]:
            words = words[1:]
            while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
                name, value = words[0].split("=", 1)
                assigned[name] = value
                words = words[1:]
    return assigned, words


def runs_unchanged(line: str, command: str) -> bool:
    """`line` runs `command` as written (no arguments added, none of its settings changed), as the user or as root
    with the runner's tool paths kept (`sudo env "PATH=$PATH" ... command`)."""
    split = root_prefix_and_command(line)
    if split is None:
        return False
    assigned, words = split
    return words == shlex.split(command) and set(assigned) <= TOOL_PATHS and assigned.get("PATH", "$PATH") == "$PATH"


def uv_pins(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(job, pinned version or None) for every step that installs uv (pip/pipx, or astral-sh/setup-uv), the
    version's `$NAME` resolved from the step's, job's and workflow's env."""
    out: list[tuple[str, str | None]] = []
    for job, spec in jobs(doc).items():
        for st in spec["steps"]:
            environ = {**(doc.get("env") or {}), **(spec.get("env") or {}), **(st.get("env") or {})}
            if st.get("uses", "").startswith("astral-sh/setup-uv@"):
                version = (st.get("with") or {}).get("version")
                out.append((job, None if version is None else expand(str(version), {
                    f"env.{k}": str(v) for k, v in environ.items()})))
            for m in _UV_INSTALL.finditer(st.get("run", "")):
                pin = m["pin"]
                if pin and (ref := re.fullmatch(r"\$\{?(\w+)\}?", pin)):
                    pin = str(environ[ref[1]]) if ref[1] in environ else None
                out.append((job, pin))
    return out


def installs_uv(st: dict[str, Any]) -> bool:
    return st.get("uses", "").startswith("astral-sh/setup-uv@") or bool(_UV_INSTALL.search(st.get("run", "")))


def uses_uv(st: dict[str, Any]) -> bool:
    """A step that runs uv, or a script of the project that does (and installs the newest uv where none is found)."""
    run = st.get("run", "")
    return bool(re.search(r"(^|[\s;&|(])uv\s+(run|sync)\b|scripts/(setup|test|lint-workflows)\.sh", run)) \
        and not installs_uv(st)


def apt_installers_without_update() -> set[str]:
    """The project's scripts (scripts/*.sh) that may `apt-get install` without an `apt-get update` before it in the
    same file: a workflow step that runs one must update first."""
    out = set()
    for path in sorted((ROOT / "scripts").glob("*.sh")):
        text = path.read_text()
        install, update = text.find("apt-get install"), text.find("apt-get update")
        if install >= 0 and not 0 <= update < install:
            out.add(f"scripts/{path.name}")
    return out
