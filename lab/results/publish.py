"""Publishing a finished sweep into results/reference/: only a complete sweep made from committed code.

A reference folder is what the README and docs cite, so it must be traceable: its manifest names the commit it
was made from (an ancestor of the commit that publishes it), no source file had uncommitted changes when it started
or when it was resumed, and it records the image of every container it used. A folder that fails any of these is
refused with one line saying why (`problems`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from lab import config
from lab.results.folder import MANIFEST

#: What a reference folder keeps of a sweep folder: the CSVs, markdown, the manifest, plots, any source diff, and of
#: each run's evidence what explains it (explain.json, a resume/0rtt run's sessions.json, the sender's kernel socket
#: record: small text, and what docs/explain.md's tables and docs/seeds.md's 0-RTT table are generated from). Not the
#: captures and key logs (large) nor the labs' logs.
KEPT_SUFFIXES = (".csv", ".md", ".diff")
KEPT_EVIDENCE = ("explain.json", "sessions.json", "sender-socket.txt")
LEFT_OUT = ("labs",)


def _is_ancestor(commit: str) -> bool:
    try:
        done = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=config.ROOT,
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _images(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every lab's recorded images (a parallel sweep records them per lab, a single-lab sweep at the top)."""
    found = [manifest["images"]] if manifest.get("images") else []
    for lab in (manifest.get("labs") or {}).values():
        facts = (lab or {}).get("facts") or {}
        if facts.get("images"):
            found.append(facts["images"])
    return found


def images_recorded(manifest: dict[str, Any]) -> bool:
    return bool(_images(manifest))


def problems(manifest: dict[str, Any], *, is_ancestor: Any = _is_ancestor) -> list[str]:
    """Why a sweep folder's manifest cannot be published as a reference (empty: it can)."""
    out: list[str] = []
    if manifest.get("status") != "complete":
        out.append(f"the sweep is {manifest.get('status') or 'of unknown status'}, not complete")
    gits = [("started", manifest.get("git") or {})]
    gits += [(f"resume {i + 1}", g or {}) for i, g in enumerate(manifest.get("resumed_git") or [])]
    for when, g in gits:
        commit = str(g.get("commit") or "")
        if not commit or commit == "unknown":
            out.append(f"no project commit recorded ({when})")
        elif not is_ancestor(commit):
            out.append(f"its commit {commit[:12]} ({when}) is not in this branch's history")
        if g.get("dirty") is not False:
            out.append(f"it was made from a tree with uncommitted source changes ({when}"
                       f"{', diff kept in ' + str(g['diff']) if g.get('diff') else ''}): commit them and run it again")
    images = _images(manifest)
    if not images:
        out.append("no container image IDs recorded (made by a quiclab older than the provenance record)")
    elif any(str(v.get("id", "unknown")) in ("", "unknown") for doc in images for v in doc.values()):
        out.append("a container's image ID is unknown")
    return out


def nested(folder: Path) -> list[Path]:
    """The sweeps inside a sweep folder that publish with it (a matrix's why sweeps: whys/<sweep>/)."""
    return sorted(p.parent for p in folder.glob(f"*/*/{MANIFEST}"))


def publish(folder: Path, dest: Path) -> list[Path]:
    """Copy a sweep folder's publishable files to `dest` (replaced whole); returns the files written."""
    if dest.exists():
        shutil.rmtree(dest)
    written = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(p in LEFT_OUT for p in rel.parts):
            continue
        if "evidence" in rel.parts:  # the sweep's own, or a nested sweep's (a matrix's whys/<sweep>/evidence)
            keep = path.name in KEPT_EVIDENCE
        else:
            keep = path.name == MANIFEST or path.suffix in KEPT_SUFFIXES or rel.parts[0] == "plots"
        if keep:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            written.append(target)
    return written
