"""Provenance of sweep folders: the commit, a dirty tree's whole diff, the images, and what may be published."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import config
from lab.results import publish
from lab.run import environment


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    _git(r, "config", "user.email", "t@example.invalid")
    _git(r, "config", "user.name", "t")
    (r / "code.py").write_text("x = 1\n")
    (r / "results").mkdir()
    (r / "results" / "old.csv").write_text("a\n")
    _git(r, "add", ".")
    _git(r, "commit", "-qm", "one")
    monkeypatch.setattr(config, "ROOT", r)
    return r


def test_a_clean_tree_is_clean_and_results_do_not_count(repo: Path, tmp_path: Path) -> None:
    (repo / "results" / "old.csv").write_text("changed\n")  # measurements are not source
    (repo / "results" / "new.csv").write_text("b\n")
    folder = tmp_path / "sweep"
    folder.mkdir()
    g = environment.git(folder)
    assert g == {"commit": _git(repo, "rev-parse", "HEAD").strip(), "dirty": False}
    assert not (folder / environment.SOURCE_DIFF).exists()


def test_a_git_archive_in_the_vm_records_its_commit_and_nothing_else_does(repo: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/vm.sh run --head moves `git archive HEAD` into the guest (no repository) and names the commit: the
    guest's sweeps record it, clean, so their folders can be published; without it the source is unknown, and a
    real repository's own state always wins over the variable."""
    commit = _git(repo, "rev-parse", "HEAD").strip()
    archive = tmp_path / "archive"
    archive.mkdir()
    subprocess.run(f"git -C {repo} archive HEAD | tar -x -C {archive}", shell=True, check=True)
    monkeypatch.setattr(config, "ROOT", archive)
    monkeypatch.delenv(environment.ENV_ARCHIVED_COMMIT, raising=False)
    assert environment.git() == {"commit": "unknown", "dirty": False}
    monkeypatch.setenv(environment.ENV_ARCHIVED_COMMIT, commit)
    g = environment.git()
    assert (g["commit"], g["dirty"]) == (commit, False)
    source = [p for p in publish.problems({"status": "complete", "git": g}, is_ancestor=lambda c: c == commit)
              if "commit" in p]
    assert not source, source
    monkeypatch.setenv(environment.ENV_ARCHIVED_COMMIT, "not-a-commit")
    assert environment.git()["commit"] == "unknown"
    monkeypatch.setattr(config, "ROOT", repo)  # a repository: its own HEAD and state, the variable ignored
    monkeypatch.setenv(environment.ENV_ARCHIVED_COMMIT, "0" * 40)
    (repo / "code.py").write_text("x = 5\n")
    assert environment.git() == {"commit": commit, "dirty": True}


def test_a_dirty_tree_keeps_its_whole_diff_tracked_and_untracked(repo: Path, tmp_path: Path) -> None:
    (repo / "code.py").write_text("x = 2\n")
    (repo / "new_module.py").write_text("y = 3\n")
    folder = tmp_path / "sweep"
    folder.mkdir()
    g = environment.git(folder)
    assert g["dirty"] is True and g["diff"] == environment.SOURCE_DIFF
    diff = (folder / environment.SOURCE_DIFF).read_text()
    assert "-x = 1" in diff and "+x = 2" in diff  # the tracked change
    assert "new_module.py" in diff and "+y = 3" in diff  # an untracked file, whole
    # the diff rebuilds the tree from the commit
    _git(repo, "stash", "-u", "-q")
    subprocess.run(["git", "apply", str(folder / environment.SOURCE_DIFF)], cwd=repo, check=True)
    assert (repo / "code.py").read_text() == "x = 2\n" and (repo / "new_module.py").read_text() == "y = 3\n"


def _manifest(**over: object) -> dict[str, object]:
    m: dict[str, object] = {"status": "complete", "git": {"commit": "a" * 40, "dirty": False},
                            "images": {"router": {"id": "sha256:1", "name": "quiclab/router:latest"}}}
    m.update(over)
    return m


def _always(_commit: str) -> bool:
    return True


def test_a_complete_clean_folder_with_images_is_publishable() -> None:
    assert publish.problems(_manifest(), is_ancestor=_always) == []


@pytest.mark.parametrize(("over", "why"), [
    ({"status": "interrupted"}, "not complete"),
    ({"git": {"commit": "a" * 40, "dirty": True, "diff": "source.diff"}}, "uncommitted source changes"),
    ({"git": {"commit": "unknown", "dirty": False}}, "no project commit"),
    ({"resumed_git": [{"commit": "a" * 40, "dirty": True}]}, "resume 1"),
    ({"images": None}, "no container image IDs"),
    ({"images": {"router": {"id": "unknown"}}}, "image ID is unknown"),
])
def test_what_is_refused(over: dict[str, object], why: str) -> None:
    found = publish.problems(_manifest(**over), is_ancestor=_always)
    assert any(why in p for p in found), found


def test_a_commit_outside_the_history_is_refused() -> None:
    found = publish.problems(_manifest(), is_ancestor=lambda c: False)
    assert any("not in this branch's history" in p for p in found)


def test_parallel_sweeps_record_images_per_lab() -> None:
    m = _manifest(images=None, labs={"0": {"facts": {"images": {"router": {"id": "sha256:2"}}}}})
    assert publish.problems(m, is_ancestor=_always) == []


def test_every_committed_dirty_reference_folder_is_refused() -> None:
    """The rule applied to the committed folders: none made from a dirty tree could be published today."""
    from lab.results import store
    for m in sorted((config.ROOT / "results" / "reference").glob("*/manifest.json")):
        doc = store.read_manifest(m.parent).doc()
        if (doc.get("git") or {}).get("dirty"):
            assert publish.problems(doc), m.parent.name


def test_publish_copies_results_and_explanations_not_captures(tmp_path: Path) -> None:
    src = tmp_path / "sweep"
    for rel in ("runs.csv", "manifest.json", "summary.md", "source.diff", "plots/a.svg", "evidence/r1/x.pcap",
                "evidence/r1/keys.log", "evidence/r1/explain.json", "evidence/r1/sender-socket.txt",
                "evidence/r1/loss-response.png", "labs/1.log", "report.html"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("x")
    dest = tmp_path / "ref"
    (dest / "stale.csv").parent.mkdir(parents=True)
    (dest / "stale.csv").write_text("old")
    publish.publish(src, dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["evidence/r1/explain.json", "evidence/r1/sender-socket.txt", "manifest.json", "plots/a.svg",
                   "runs.csv", "source.diff", "summary.md"]


def test_a_matrixs_why_sweeps_publish_with_it_under_the_same_rule(tmp_path: Path) -> None:
    """whys/<sweep>/ (quiclab matrix --why) keeps its results and explanations, not its captures nor labs' logs."""
    src = tmp_path / "matrix"
    for rel in ("runs.csv", "manifest.json", "whys/w1/runs.csv", "whys/w1/manifest.json", "whys/w1/summary.md",
                "whys/w1/evidence/r1/client-side.pcap", "whys/w1/evidence/r1/keys.log",
                "whys/w1/evidence/r1/client-x.sqlog", "whys/w1/evidence/r1/explain.json", "whys/w1/labs/1.log"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("x")
    publish.publish(src, tmp_path / "ref")
    got = sorted(str(p.relative_to(tmp_path / "ref")) for p in (tmp_path / "ref").rglob("*") if p.is_file())
    assert got == ["manifest.json", "runs.csv", "whys/w1/evidence/r1/explain.json", "whys/w1/manifest.json",
                   "whys/w1/runs.csv", "whys/w1/summary.md"]
    assert publish.nested(src) == [src / "whys" / "w1"]


def test_the_provenance_block_says_what_each_folder_was_made_from(tmp_path: Path) -> None:
    import json

    from lab.docgen import blocks
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=config.ROOT, capture_output=True, text=True).stdout.strip()
    for name, git, images in (("clean", {"commit": head, "dirty": False}, {"router": {"id": "sha256:1"}}),
                              ("dirty", {"commit": head, "dirty": True}, None)):
        (tmp_path / name).mkdir()
        doc = {"scenario": {"name": name}, "status": "complete", "started_at": "2026-11-25T00:00:00+00:00",
               "git": git}
        if images:
            doc["images"] = images
        (tmp_path / name / "manifest.json").write_text(json.dumps(doc))
    text = blocks.render("provenance-all", tmp_path)
    assert "2 reference folders; 1 meet today's publishing rule" in text
    assert f"| `clean` | 2026-11-25 | {head[:7]} | clean | yes | yes |" in text
    assert f"| `dirty` | 2026-11-25 | {head[:7]} | uncommitted changes, diff not recorded | no | no |" in text
