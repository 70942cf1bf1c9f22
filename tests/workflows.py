"""Read the GitHub Actions workflows (.github/workflows) and run a step's `run:` script here, as the runner would:
the job's shell, the workflow/job/step env with its `${{ ... }}` expressions substituted from a given context."""

from __future__ import annotations

import os
import re
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
