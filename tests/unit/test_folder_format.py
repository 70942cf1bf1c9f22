"""The sweep folder format in one place (lab/results/folder.py): the one atomic writer, the one manifest reader and
writer (a typed model that keeps every key it does not know), the one "is a result" rule, and a report that reads
runs.csv once and computes its statistics once."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from lab import config
from lab.errors import UsageError
from lab.results import folder as fmt
from lab.results import store
from lab.results.folder import is_result, read_manifest, write_atomic, write_manifest
from lab.results.schema import RunRecord
from tests.unit.test_store import record

REFERENCE_MANIFESTS = sorted((config.ROOT / "results" / "reference").rglob(fmt.MANIFEST))


def _folder_with(tmp_path: Path, content: str | bytes | None) -> Path:
    f = tmp_path / "sweep"
    f.mkdir(exist_ok=True)
    if content is not None:
        path = f / fmt.MANIFEST
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return f


# ---------------------------------------------------------------------------------------------------------------
# The atomic writer


def test_the_atomic_writer_fsyncs_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    target = tmp_path / "summary.md"
    target.write_text("old")
    write_atomic(target, "new text é\n")
    assert target.read_text(encoding="utf-8") == "new text é\n" and synced
    write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_a_failed_replace_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    target.write_text("{}")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        write_atomic(target, "{\"half\": ")
    assert target.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_every_folder_writer_uses_the_one_atomic_writer():
    """No module writes a folder file through a temporary file and os.replace of its own."""
    lab = config.ROOT / "lab"
    own = {lab / "results" / "folder.py"}
    # not folder files: the lab's calibration state and the start-up cache (files of the lab, not of a sweep)
    elsewhere = {lab / "link" / "calibrate.py", lab / "run" / "startup_cache.py"}
    offenders = [str(p.relative_to(config.ROOT)) for p in lab.rglob("*.py")
                 if p not in own | elsewhere and ("os.replace(" in p.read_text() or ".tmp" in p.read_text())]
    assert offenders == []


# ---------------------------------------------------------------------------------------------------------------
# The manifest


def test_there_are_reference_manifests():
    assert len(REFERENCE_MANIFESTS) >= 10


@pytest.mark.parametrize("path", REFERENCE_MANIFESTS, ids=lambda p: str(p.parent.relative_to(config.ROOT)))
def test_every_committed_manifest_reads_and_writes_back_unchanged(path: Path, tmp_path: Path):
    original = json.loads(path.read_text(encoding="utf-8"))
    m = read_manifest(path.parent)
    assert m.doc() == original
    assert list(m.doc()) == list(original)  # the keys in their order
    copy = tmp_path / "copy"
    copy.mkdir()
    write_manifest(copy, m)
    assert json.loads((copy / fmt.MANIFEST).read_text(encoding="utf-8")) == original
    assert (copy / fmt.MANIFEST).read_text(encoding="utf-8") == fmt.json_text(original)
    assert read_manifest(copy).doc() == original


def test_typed_keys_read_as_attributes_and_values_are_not_converted(tmp_path):
    doc = {"scenario": {"name": "s"}, "name": "s", "planned_runs": 12, "wall_s": 12, "log_y": False,
           "shard": None, "plan": {"id": "sha256:ab"}, "parallel": {"labs": 3}, "status": "complete"}
    f = _folder_with(tmp_path, json.dumps(doc))
    m = read_manifest(f)
    assert (m.name, m.planned_runs, m.status, m.plan_id, m.parallel) == ("s", 12, "complete", "sha256:ab", {"labs": 3})
    assert m.doc() == doc and type(m.doc()["wall_s"]) is int and m.doc()["log_y"] is False
    assert m["planned_runs"] == 12 and m.get("absent", "x") == "x" and "shard" in m and "labs" not in m
    assert not m.is_merge


def test_a_key_quiclab_does_not_know_survives_a_round_trip(tmp_path):
    doc = {"scenario": {"name": "s"}, "from_the_future": {"nested": [1, 2.5, None]}, "status": "running",
           "stopped_by": "lab 2: gone"}
    f = _folder_with(tmp_path, json.dumps(doc))
    m = read_manifest(f)
    m.update(status="complete", another_new_key=7)
    m.drop("stopped_by")
    write_manifest(f, m)
    back = json.loads((f / fmt.MANIFEST).read_text())
    assert back == {"scenario": {"name": "s"}, "from_the_future": {"nested": [1, 2.5, None]}, "status": "complete",
                    "another_new_key": 7}
    assert list(back)[:3] == ["scenario", "from_the_future", "status"]


def test_a_dict_is_checked_when_written(tmp_path):
    f = _folder_with(tmp_path, None)
    write_manifest(f, {"scenario": {"name": "s"}, "status": "starting"})
    assert read_manifest(f).status == "starting"
    with pytest.raises(UsageError) as e:
        write_manifest(f, {"scenario": {"name": "s"}, "planned_runs": "ten"})
    assert "planned_runs" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError):
        read_manifest(f).update(status=3)


def test_what_a_sweep_writes_is_a_valid_manifest(tmp_path):
    from lab.plan import shard
    from lab.plan.checks import validate
    from lab.plan.plan import plan
    from lab.run import sweep

    s = validate({"name": "t", "repeats": 2, "sweep": {"loss": ["0%", "1%"]}}, "t")
    every = plan(s)
    m = fmt.Manifest()
    m.put(sweep._sweep_section(s, None, every, shard.ShardSpec(1, 2), tmp_path, "flag"))
    m.put(fmt.End(status="complete", finished_at=sweep.now(), completed_runs=3, wall_s=1.5, resumed_at=[sweep.now()],
                  stopped_by="x", teardown_problems=["y"], resumed_git=[{"commit": "0" * 40, "dirty": False}]))
    m.put(fmt.Labs(parallel={"labs": 2, "instances": [1, 2], "auto": False}))
    m.put(fmt.Environment(images={"router": {"id": "sha256:0", "name": "quiclab/router"}}, shaper="linkem"))
    doc = m.doc()
    assert fmt.as_manifest(json.loads(fmt.json_text(doc))).doc() == doc and m.shard and m.shard["index"] == 1
    assert doc["planned_runs"] == len(shard.ShardSpec(1, 2).select(every)) and doc["host_guard"] == "flag"


def test_each_key_has_one_section_and_a_section_is_written_whole(tmp_path):
    owners: dict[str, str] = {}
    for section in fmt.SECTIONS:
        for key in section.model_fields:
            assert key not in owners, f"{key} in {owners.get(key)} and {section.__name__}"
            owners[key] = section.__name__
    assert set(owners) == set(fmt.Manifest.model_fields)
    m = fmt.as_manifest({"scenario": {"name": "s"}, "status": "stopped", "stopped_by": "the router", "odd": 1})
    m.put(fmt.End(status="running", resumed_at=["t"]))  # stopped_by is not given: removed
    assert m.doc() == {"scenario": {"name": "s"}, "status": "running", "odd": 1, "resumed_at": ["t"]}
    assert m.section(fmt.End) == fmt.End(status="running", resumed_at=["t"])
    write_manifest(_folder_with(tmp_path, None), m)
    with pytest.raises(ValidationError):
        fmt.End(status=3)


@pytest.mark.parametrize(("content", "needle"), [
    (None, "is not a sweep folder: no readable manifest.json"),
    ("{not json", "is not valid JSON"),
    (b"\xff\xfe{", "is not valid JSON"),
    ("[1, 2]", "has no scenario: it was not written by `quiclab sweep`"),
    ('"text"', "has no scenario: it was not written by `quiclab sweep`"),
    ('{"name": "x"}', "has no scenario: it was not written by `quiclab sweep`"),
    ('{"scenario": {}, "repeats": "five"}', "repeats"),
])
def test_a_bad_manifest_is_a_one_line_usage_error(tmp_path, content, needle):
    f = _folder_with(tmp_path, content)
    with pytest.raises(UsageError) as e:
        read_manifest(f)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert fmt.try_manifest(f) is None  # (latest_matching skips such a folder)


def test_the_reports_read_a_folder_without_a_manifest_or_a_scenario(tmp_path):
    f = _folder_with(tmp_path, None)
    assert read_manifest(f, required=False).doc() == {}
    (f / fmt.MANIFEST).write_text('{"name": "x", "scenario": "a name"}')
    assert read_manifest(f, required=False).doc() == {"name": "x", "scenario": "a name"}
    for bad in ("[1]", "{not json"):
        (f / fmt.MANIFEST).write_text(bad)
        with pytest.raises(UsageError, match=r"manifest\.json"):
            read_manifest(f, required=False)


def test_the_store_names_are_the_folders():
    assert (store.RUNS, store.MANIFEST, store.HOST_BOUND) == (fmt.RUNS, fmt.MANIFEST, fmt.HOST_BOUND)
    assert store.read_manifest is read_manifest and store.is_result is is_result


# ---------------------------------------------------------------------------------------------------------------
# The one "is a result" rule


def _legacy_rows() -> list[RunRecord]:
    interrupted = record("0/h1/curl/nginx/0", "interrupted")
    lab_failure = dataclasses.replace(record("0/h2/curl/nginx/0", "failed"),
                                      failure="client exit code -1: unreadable client output: ''")
    could_not = dataclasses.replace(record("0/h3/curl/nginx/0", "failed"), failure="could not run the client")
    return [interrupted, lab_failure, could_not]


def test_legacy_rows_are_results_nowhere():
    from lab.observe.sweep_metrics import SweepState
    from lab.results.stats import LEGACY_LAB_FAILURE, exclusion_reason, is_censored, summarize

    legacy = _legacy_rows()
    real_failure = dataclasses.replace(record("0/h3/curl/nginx/1", "failed"), failure="SHA-256 mismatch")
    ok = record("0/h1/curl/nginx/1")
    assert [is_result(r) for r in [*legacy, real_failure, ok]] == [False, False, False, True, True]
    # the statistics: excluded, never censored results
    assert [exclusion_reason(r) for r in legacy] == ["interrupted", LEGACY_LAB_FAILURE, LEGACY_LAB_FAILURE]
    assert not any(is_censored(r) for r in legacy) and is_censored(real_failure)
    groups = summarize([*legacy, real_failure, ok])
    assert sum(g.n for g in groups) == 2 and sum(g.n_excluded for g in groups) == 3
    # a resume keeps none of them
    assert set(store.completed_runs([*legacy, ok], {r.run_key for r in [*legacy, ok]})) == {ok.run_key}
    # the live metrics count none of them
    state = SweepState(sweep="t", planned=5, x_name="loss_pct")
    for r in [*legacy, real_failure, ok]:
        state.add(r)
    assert state.done == 2 and state.failures == 1
    assert sum(sum(g.statuses.values()) for g in state.groups.values()) == 2


def test_a_merge_takes_no_legacy_row(tmp_path):
    from lab.results.merge import read_shard

    f = _folder_with(tmp_path, json.dumps({"scenario": {"name": "t"}}))
    store.rewrite_runs(f, [*_legacy_rows(), record("0/h1/curl/nginx/1")])
    assert [r.run_key for r in read_shard(f).records] == ["0/h1/curl/nginx/1"]


# ---------------------------------------------------------------------------------------------------------------
# The report: runs.csv read once, the statistics computed once


def test_a_report_reads_runs_once_and_computes_its_statistics_once(tmp_path, monkeypatch):
    from lab.results import cc_check, report, stats
    from tests.unit.test_report import make_sweep

    folder = make_sweep(tmp_path / "s")
    expected = {p.name: p.read_bytes() for p in report.build(folder).paths if p.suffix in (".md", ".html", ".svg")}
    calls = {"read_runs": 0, "summarize": 0, "ratios": 0, "checks": 0}

    def counted(name: str, module: object) -> None:
        real = getattr(module, name)

        def wrapper(*a: object, **k: object) -> object:
            calls[name] += 1
            return real(*a, **k)

        monkeypatch.setattr(module, name, wrapper)

    counted("read_runs", report)
    counted("summarize", stats)
    counted("ratios", stats)
    counted("checks", cc_check)
    built = report.build(folder)
    assert calls == {"read_runs": 1, "summarize": 1, "ratios": 1, "checks": 1}
    assert {p.name: p.read_bytes() for p in built.paths if p.suffix in (".md", ".html", ".svg")} == expected
    assert built.stats.groups and built.manifest.name == "loss-demo"
