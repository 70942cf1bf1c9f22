"""Issue 32 item 5: a point's settings are parsed once in the plan into typed fields (lab/plan/settings.py). The plan
of every preset and of every committed reference folder is what it was when its settings travelled as strings: the
same run keys, seeds, order and labels (the manifest's plan id), the same values as written, and typed values that
say what the committed runs recorded (workload, competing flows, faults, path change, sender CC, unsupported)."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from lab.adverse.spec import parse_competing, parse_faults, parse_path
from lab.endpoints.quic_window import parse_quic_window
from lab.endpoints.registry import registry
from lab.endpoints.sender_cc import NATIVE, SOURCE_CMDLINE, SOURCE_NETNS, parse_cc, resolve
from lab.errors import UsageError
from lab.plan import presets, shard
from lab.plan.checks import validate
from lab.plan.plan import plan, points
from lab.plan.scenario import DIMENSIONS, Scenario
from lab.plan.settings import PARSERS, Settings, parse_settings
from lab.plan.support import check, why_unsupported
from lab.results import store
from lab.workloads.spec import parse_workload

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"
FOLDERS = sorted(p.parent.name for p in REFERENCE.glob("*/manifest.json"))


def old_strings(s: Scenario) -> list[dict[str, str]]:
    """Point.settings as the plan made it before it was typed (lab/plan/plan.py at 15721e7), point by point: the
    scenario's non-empty dimension values, then the swept ones, as strings."""
    dims = [(k, [str(v) for v in vs]) for k, vs in s.sweep.items()]
    if "size" not in s.sweep and len(s.sizes) > 1:
        dims.append(("size", list(s.sizes)))
    out = []
    for combo in itertools.product(*(vs for _, vs in dims)):
        setting = dict(zip((k for k, _ in dims), combo, strict=True))
        extra = {k: str(getattr(s, k)) for k in DIMENSIONS if k != "size" and getattr(s, k, None) not in (None, "")}
        extra.update({k: v for k, v in setting.items() if k in DIMENSIONS and k != "size"})
        out.append(extra)
    return out


def old_reading(strings: dict[str, str]) -> dict[str, Any]:
    """What each consumer parsed from those strings, with its own default for a missing key."""
    cc = strings.get("cc")
    return {"workload": parse_workload(strings.get("workload", "bulk")), "cc": None if cc is None else parse_cc(cc),
            "faults": parse_faults(strings.get("faults", "")),
            "competing": parse_competing(strings.get("competing", "")), "path": parse_path(strings.get("path", "")),
            "quic_window": parse_quic_window(strings["quic_window"]) if "quic_window" in strings else None}


def typed(settings: Settings) -> dict[str, Any]:
    return {k: getattr(settings, k) for k in PARSERS}


@pytest.mark.parametrize("name", presets.names())
def test_every_presets_settings_are_the_strings_it_had_parsed_once(name: str):
    s = presets.get(name)
    pts = points(s)
    assert [p.settings.strings() for p in pts] == old_strings(s)
    for p in pts:
        assert typed(p.settings) == old_reading(p.settings.strings()), p.label
    runs = plan(s)
    assert all(r.point.settings == pts[r.point.index].settings for r in runs)
    assert len({id(r.point.settings) for r in runs}) == len(pts)  # parsed once per point, not per run


def test_the_presets_sweep_every_dimension():
    """The comparison above covers each dimension (a preset sweeps or sets each one)."""
    given = {k for n in presets.names() for p in points(presets.get(n)) for k in p.settings.strings()}
    assert given == set(PARSERS)


def test_the_committed_folders_cover_the_typed_dimensions():
    assert len(FOLDERS) >= 20
    swept = {k for f in FOLDERS for k in json.loads((REFERENCE / f / "manifest.json").read_text())["scenario"]["sweep"]}
    assert {"workload", "cc", "competing"} <= swept


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_committed_folders_plan_and_runs_agree_with_the_typed_settings(folder: str):
    """Rebuilt from the manifest's scenario (as `quiclab reproduce` and `--resume` do): the same plan id (keys, seeds,
    order), point labels, settings as written; each recorded run's workload, competing flows, faults, path change,
    read-back sender CC and unsupported reason are what the typed settings say."""
    path = REFERENCE / folder
    manifest = store.read_manifest(path)
    assert isinstance(manifest.scenario, dict)
    s = validate(manifest.scenario, folder)
    every = plan(s)
    assert shard.plan_id(s, every) == manifest.plan_id
    doc = json.loads((path / "manifest.json").read_text())
    assert [(p.index, p.label, p.size) for p in points(s)] == [
        (p["index"], p["label"], p["size_bytes"]) for p in doc["points"]]
    assert [p.settings.strings() for p in points(s)] == old_strings(s)
    runs = {r.key: r for r in every}
    with (path / "runs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        run = runs[row["run_key"]]
        got = run.point.settings
        at = f"{folder} {row['run_key']}"
        assert (row["point_label"], int(row["point"]), int(row["seed"]), int(row["order"])) == (
            run.point.label, run.point.index, run.seed, run.order), at
        assert row["workload"] == got.workload.label(), at
        if row["status"] == "unsupported":  # (older runs: the client's own refusal, prefixed)
            assert row["failure"] in (why_unsupported(run), f"unsupported: {why_unsupported(run)}"), at
            continue
        assert why_unsupported(run) == "", at
        competing = json.loads(row["competing"]) if row["competing"] else {"flows": []}
        assert [f["spec"] for f in competing["flows"] if f["kind"] != "measured"] == [
            f.text for f in got.competing], at
        faults = json.loads(row["faults_actual"]) if row["faults_actual"] else []
        assert [f["fault"] for f in faults] == [f.text for f in got.faults], at
        change = json.loads(row["path_change"]) if row["path_change"] else None
        assert (change or {}).get("kind") == (got.path.kind if got.path else None), at
        if row["status"] == "ok" and got.cc not in (None, NATIVE) and row["cc_sender_source"] in (SOURCE_NETNS,
                                                                                                 SOURCE_CMDLINE):
            assert row["cc_sender"].split(" ")[0] == got.cc, at


def test_parse_settings_types_each_dimension_and_keeps_the_strings():
    st = parse_settings({"workload": "page:5x1kB", "cc": "default", "faults": "pause:1s@1s,blackout:1s@3s",
                         "competing": "tcp-bbr@1s", "path": "rebind@2s"})
    assert st.workload.kind == "page" and st.workload.objects == 5 and st.cc == NATIVE
    assert [f.kind for f in st.faults] == ["pause", "blackout"] and st.competing[0].cc == "bbr"
    assert st.path is not None and st.path.kind == "rebind"
    assert st.strings()["cc"] == "default"  # as written
    assert Settings() == parse_settings({}) and Settings().workload.kind == "bulk" and Settings().cc is None


@pytest.mark.parametrize(("values", "needle"), [
    ({"workload": "pages:5x1kB"}, "invalid workload 'pages:5x1kB': allowed are bulk"),
    ({"cc": "vegas"}, "invalid cc 'vegas': allowed are reno, cubic, bbr, native"),
    ({"faults": "freeze:1s@1s"}, "invalid fault 'freeze:1s@1s': unknown kind 'freeze'; accepted: KIND"),
    ({"competing": "tcp-vegas"}, "invalid competing flow 'tcp-vegas': tcp needs a congestion control"),
    ({"path": "teleport@1s"}, "invalid path 'teleport@1s': unknown kind 'teleport'; accepted: KIND@START"),
])
def test_a_bad_value_is_one_line_naming_it_and_what_is_allowed(values: dict[str, str], needle: str):
    with pytest.raises(UsageError) as e:
        parse_settings(values)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_scenario_validates_with_the_same_parsers():
    assert {k: v for k, v in DIMENSIONS.items() if k != "size"} == PARSERS


@pytest.mark.parametrize("name", ["connectify-cc", "bolina-0rtt", "rebinding"])
def test_support_resolves_the_sender_once_for_the_runner(name: str):
    """lab/plan/support.py check(): the reason and the sender's plan the runner then uses (no second resolve)."""
    for run in plan(presets.get(name)):
        got = check(run)
        assert got.reason == why_unsupported(run)
        if registry().unsupported(run.client, run.server, run.protocol):
            assert got.sender is None and got.reason
        else:
            assert got.sender == resolve(registry().server(run.server), run.protocol, run.point.settings.cc)
