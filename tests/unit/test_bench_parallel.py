"""`quiclab bench parallel` without a lab: its --labs list, its table with `auto` and a reference folder, and the
committed older parallel.json (no `requested` field) still rendering as before."""

from __future__ import annotations

import pytest

from lab import config
from lab.bench import parallel
from lab.errors import UsageError


def test_labs_list_takes_sweep_values_and_needs_the_one_lab_baseline():
    assert parallel.parse_labs("1,auto") == ["1", "auto"]
    assert parallel.parse_labs(" 1, 2 ,3,4") == ["1", "2", "3", "4"]
    for bad in ("2,auto", "1,1", "1,zero", "", "1,99"):
        with pytest.raises(UsageError) as e:
            parallel.parse_labs(bad)
        assert "--labs" in str(e.value) or "--parallel" in str(e.value)


def _fig(requested: str, labs: int, wall: float, **kw: object) -> parallel.ParallelFigures:
    return parallel.ParallelFigures(labs=labs, folder=f"f{requested}", wall_s=wall, runs=90, ok=90,
                                    host_bound_attempts=0, labs_joined_s={}, requested=requested,
                                    preset="connectify-loss", **kw)  # type: ignore[arg-type]


def test_table_names_auto_with_its_labs_and_judges_against_the_reference():
    ref = "results/reference/connectify-loss"
    figs = [_fig("1", 1, 1000.0, vs_reference="6 equivalent", reference_points_equivalent="9 of 9", reference=ref),
            _fig("auto", 4, 300.0, vs_one="6 equivalent", points_equivalent="9 of 9", vs_reference="5 equivalent",
                 reference_points_equivalent="8 of 9", reference=ref)]
    lines = parallel.markdown(figs).splitlines()
    assert f"points equivalent to {ref}" in lines[0] and lines[1].count("|") == 10
    auto = lines[3].split("|")
    assert auto[1].strip() == "auto (4)" and auto[3].strip() == "0.30" and auto[8].strip() == "8 of 9"
    assert parallel.baseline(figs).requested == "1"


def test_the_committed_older_benchmark_still_renders_without_a_reference_column():
    figs = parallel.load(config.ROOT / "results/reference/parallel-labs-20261124/parallel.json")
    text = parallel.markdown(figs)
    assert parallel.baseline(figs).labs == 1 and "points equivalent to results" not in text
    assert [line.split("|")[1].strip() for line in text.splitlines()[2:]] == ["1", "2", "3", "4"]


def test_startup_table_says_which_sweep_measured_the_facts(tmp_path, monkeypatch):
    from lab.bench import startup

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "quiclab").mkdir()
    for name in ("startup-a.json", "startup-b.json", "health.json"):
        (tmp_path / "quiclab" / name).write_text("{}")
    assert startup.clear_cache() == 2 and [p.name for p in (tmp_path / "quiclab").iterdir()] == ["health.json"]
    figs = [startup.StartupFigures(1, "a", 8.744, False), startup.StartupFigures(2, "b", 1.8, True)]
    (tmp_path / "s.json").write_text(startup.to_json(figs))
    assert startup.markdown(startup.load(tmp_path / "s.json")).splitlines()[2:] == [
        "| 1 | measured | 8.74 |", "| 2 | reused (cache) | 1.80 |"]


def test_docs_fill_every_benchmark_block_from_its_data_and_refuse_an_unknown_source(tmp_path):
    from lab.docgen import generated

    text = ("a\n<!-- generated from results/reference/parallel-labs-20261124/parallel.json -->\nstale\n"
            "<!-- end generated -->\nb\n")
    filled = generated._fill_benchmarks(text, config.ROOT)
    assert "stale" not in filled and "| 4 | 81 | 0.45 |" in filled
    with pytest.raises(UsageError, match="no benchmark renders"):
        generated._fill_benchmarks("<!-- generated from x/nope.json -->\n<!-- end generated -->", tmp_path)
