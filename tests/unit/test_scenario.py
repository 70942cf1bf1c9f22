"""Scenario validation, expansion, ordering, pairing of seeds (no lab needed)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.errors import UsageError
from lab.plan import presets
from lab.plan.checks import load, validate
from lab.plan.plan import link_seed, plan, points, timeout_for
from lab.plan.scenario import closest, unknown_names


def scen(**kw):
    base = {"name": "t", "sizes": ["1MB"], "repeats": 2, "link": {"rtt": "20ms", "rate": "10mbit"},
            "sweep": {"loss": ["0%", "1%"]}}
    base.update(kw)
    return validate(base, "test")


@pytest.mark.parametrize(("change", "needle"), [
    ({"bogus": 1}, "'bogus'"),
    ({"link": {"delay": "-5ms"}}, "'-5ms'"),
    ({"sweep": {"loss": ["150%"]}}, "'150%'"),
    ({"sweep": {"rate": ["0mbit"]}}, "'0mbit'"),
    ({"protocols": []}, "protocols"),
    ({"protocols": ["h4"]}, "'h4'"),
    ({"sweep": {"colour": ["red"]}}, "'colour'"),
    ({"sizes": ["-1"]}, "'-1'"),
    ({"repeats": 0}, "repeats"),
    ({"shaper": "magic"}, "'magic'"),
    ({"clients": ["wget"]}, "'wget'"),
    ({"sweep": {"loss": []}}, "sweep.loss"),
])
def test_bad_scenarios_name_the_value(change, needle):
    with pytest.raises(UsageError) as e:
        scen(**change)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_every_preset_validates_and_expands():
    for name in presets.names():
        s = presets.get(name)
        assert plan(s), name
    assert presets.resolve("loss") == "connectify-loss"
    with pytest.raises(UsageError, match="'nope'"):
        presets.resolve("nope")


def test_connectify_loss_matches_the_seed_study():
    s = presets.get("loss")
    pts = points(s)
    assert [p.x for p in pts] == [0, 0.1, 0.5, 1, 3, 5]
    assert all(p.size == 10_000_000 and p.x_name == "loss_pct" for p in pts)
    assert pts[0].link.rtt_s == pytest.approx(0.160) and pts[0].link.downlink.rate_bps == 5_000_000
    assert pts[-1].link.downlink.loss.mean == pytest.approx(0.05)


def test_matrix_is_the_product_and_multi_dimensional_grids_are_categorical():
    s = presets.get("survey-grid")
    pts = points(s)
    assert len(pts) == 3 * 4 * 2 * 2 and {p.x_name for p in pts} == {"point"}
    off = [p for p in pts if "spikes=off" in p.label]
    on = [p for p in pts if "spikes=1s" in p.label]
    assert all(p.link.downlink.rate_schedule is None for p in off)
    assert all(p.link.downlink.rate_schedule is not None for p in on)


def test_plan_has_every_run_once_and_is_shuffled_reproducibly():
    s = scen(repeats=3)
    runs = plan(s)
    assert len(runs) == 2 * 3 * 3
    assert len({r.key for r in runs}) == len(runs)
    assert [r.key for r in runs] == [r.key for r in plan(s)]  # same seed, same order
    assert [r.key for r in runs] != [r.key for r in plan(scen(repeats=3, seed=2))]
    assert [r.order for r in runs] == list(range(len(runs)))
    by_point_order = sorted(runs, key=lambda r: (r.point.index, r.repeat, r.protocol.value))
    assert [r.key for r in runs] != [r.key for r in by_point_order]  # not in matrix order


def test_protocols_share_the_link_seed_at_a_point_and_repeat():
    runs = plan(scen(repeats=4))
    seeds: dict[tuple[int, int], set[int]] = {}
    for r in runs:
        seeds.setdefault((r.point.index, r.repeat), set()).add(r.seed)
        assert r.link().seed == r.seed
    assert all(len(v) == 1 for v in seeds.values())
    assert len({next(iter(v)) for v in seeds.values()}) == len(seeds)  # differ across points/repeats
    assert link_seed(1, 0, 0) == link_seed(1, 0, 0) != link_seed(2, 0, 0)


def test_off_leaves_a_key_unset_and_sizes_become_a_dimension():
    s = scen(sizes=["10kB", "1MB"], sweep={"spikes": ["off", "1s:200ms:10%"]})
    pts = points(s)
    assert len(pts) == 4 and Counter(p.size for p in pts) == {10_000: 2, 1_000_000: 2}


def test_timeout_grows_with_loss_and_size():
    s = presets.get("loss")
    t = [timeout_for(s, p) for p in points(s)]
    assert t == sorted(t) and t[0] >= 60 and t[-1] <= 3600


def test_load_reports_toml_errors(tmp_path: Path):
    f = tmp_path / "x.toml"
    f.write_text("name = [")
    with pytest.raises(UsageError, match="not valid TOML"):
        load(f)
    with pytest.raises(UsageError, match="cannot read"):
        load(tmp_path / "missing.toml")


@pytest.mark.parametrize(("args", "needle"), [
    (["sweep", "nope"], "'nope'"),
    (["sweep", "quick", "--protocols", ""], "protocols"),
    (["sweep", "quick", "--protocols", "h9"], "'h9'"),
    (["sweep", "quick", "--repeats", "0"], "repeats"),
    (["sweep"], "preset"),
])
def test_sweep_cli_bad_input_exits_2(args, needle):
    r = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], r.stderr


def test_sweep_cli_bad_scenario_file(tmp_path: Path):
    f = tmp_path / "s.toml"
    f.write_text('name = "x"\n[sweep]\nloss = ["0%", "101%"]\n')
    r = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "'101%'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_one_shaper_per_sweep(monkeypatch):
    """auto never mixes netem and linkem inside one sweep: a point netem cannot emulate puts every point on linkem."""
    from lab.link import router
    from lab.run import lab_session

    monkeypatch.setattr(router, "has_netem", lambda: True)
    plain = validate({"name": "t", "sweep": {"loss": ["0%", "1%"]}}, "t")
    assert lab_session.resolve_shaper(plain).backend == "netem"
    mixed = validate({"name": "t", "link": {"rate": "10mbit"}, "sweep": {"spikes": ["off", "5s:200ms:10%"]}}, "t")
    choice = lab_session.resolve_shaper(mixed)
    assert choice.backend == "linkem" and "every point" in choice.reason
    monkeypatch.setattr(router, "has_netem", lambda: False)
    assert lab_session.resolve_shaper(plain).backend == "linkem"


@pytest.mark.parametrize(("name", "candidates", "expected"), [
    ("los", ["loss", "rate", "rtt"], "loss"),
    ("LOSS", ["loss", "rate"], "loss"),  # case is ignored
    ("repeat", ["repeats", "seed"], "repeats"),
    ("dwon", ["down", "up"], "down"),
    ("frobnicate", ["link", "sweep", "client_quic_cc"], None),
    ("x", [], None),
])
def test_closest_finds_the_nearest_valid_name(name, candidates, expected):
    assert closest(name, candidates) == expected


def test_unknown_names_are_named_at_every_level_with_the_nearest_valid_one():
    data = {"name": "t", "repeat": 3, "frobnicate": {"x": 1}, "clint_quic_cc": {"curl": "bbr"},
            "link": {"los": "1%", "rate": "5mbit", "dwon": {}, "down": {"rat": "1mbit", "extra": {}}, "up": {}},
            "sweep": {"los": ["1%"], "workloads": ["bulk"], "loss": ["1%"]}, "client_quic_cc": {"anything": "x"}}
    assert unknown_names(data) == [
        "unknown key 'repeat' (did you mean 'repeats'?)",
        "unknown table [frobnicate]: allowed are [link], [sweep], [client_quic_cc]",
        "unknown table [clint_quic_cc] (did you mean [client_quic_cc]?)",
        "unknown key 'los' in [link] (did you mean 'loss'?)",
        "unknown table [link.dwon] (did you mean [link.down]?)",
        "unknown key 'rat' in [link.down] (did you mean 'rate'?)",
        "unknown table [link.down.extra]: [link.down] has no tables",
        "unknown key 'los' in [sweep] (did you mean 'loss'?)",
        "unknown key 'workloads' in [sweep] (did you mean 'workload'?)",
    ]  # (client_quic_cc's names are clients: checked with the clients, not here)


def test_a_key_far_from_every_name_lists_the_allowed_ones():
    [line] = unknown_names({"colour": "red"}, at="")
    assert line.startswith("unknown key 'colour': allowed are name, description, protocols")
    assert unknown_names({"name": "t", "quic_cc": {}}) == []  # the old name is still accepted


def _problems(data: dict) -> str:
    with pytest.raises(UsageError) as e:
        validate(data, "f.toml")
    message = str(e.value)
    assert "\n" not in message
    return message


def test_every_problem_is_reported_together_in_one_line():
    message = _problems({"frobnicate": {"x": 1}})
    assert message == ("f.toml: 2 problems: unknown table [frobnicate]: allowed are [link], [sweep], "
                       "[client_quic_cc]; missing key 'name'")
    message = _problems({"nam": "t", "repeats": "five", "protocols": ["h1", "h4", "http/1.1"], "sizes": ["1MB", "0"],
                         "shaper": "magic", "capture": ["pcap", "bogus"], "link": {"rate": "fast", "loss": "lots"},
                         "sweep": {"rtt": ["10ms", "soon", "10ms"], "size": []}})
    expected = ["unknown key 'nam' (did you mean 'name'?)", "missing key 'name'", "'repeats' (got 'five')",
                "unknown protocol 'h4'", "duplicate 'http/1.1' in protocols (the same as 'h1')", "'0'",
                "'bogus'", "invalid shaper 'magic'", "'fast'", "'lots'", "sweep.rtt: invalid rtt 'soon'",
                "duplicate '10ms' in sweep.rtt", "sweep.size must be a non-empty list"]
    assert message.startswith(f"f.toml: {len(expected)} problems: ")
    problems = message.split(": ", 2)[2].split("; ")
    assert len(problems) == len(expected)
    assert all(any(needle in p for p in problems) for needle in expected), message


def test_one_problem_keeps_the_one_problem_form():
    assert _problems({"repeats": 2}) == "f.toml: missing key 'name'"
    assert _problems({"name": "t", "colour": "red"}).startswith("f.toml: unknown key 'colour': allowed are")


def test_a_refused_value_does_not_hide_the_others_of_its_table():
    message = _problems({"name": "t", "sweep": {"loss": "1%", "rate": ["fast"]}, "client_quic_cc": {"curl": 5}})
    assert "'sweep.loss' (got '1%')" in message and "'fast'" in message and "'client_quic_cc.curl'" in message


def test_one_problem_is_not_repeated_for_every_sweep_point():
    message = _problems({"name": "t", "link": {"rate": "fast"}, "sweep": {"loss": ["0%", "1%", "2%"]}})
    assert message.count("'fast'") == 1 and "problems" not in message


def test_link_settings_are_checked_with_the_ones_they_need_given_or_swept():
    validate({"name": "t", "link": {"spikes": "5s:200ms:10%"}, "sweep": {"rate": ["5mbit", "10mbit"]}}, "t")
    validate({"name": "t", "sweep": {"rate": ["5mbit"], "spikes": ["off", "5s:200ms:10%"]}}, "t")
    assert "need a rate" in _problems({"name": "t", "link": {"spikes": "5s:200ms:10%"}})
    assert "either rtt or delay" in _problems({"name": "t", "link": {"rtt": "20ms"}, "sweep": {"delay": ["5ms"]}})


def test_a_mistyped_client_of_client_quic_cc_gets_the_nearest_client():
    assert _problems({"name": "t", "client_quic_cc": {"curll": "bbr"}}).endswith("(did you mean 'curl'?)")


def test_a_scenario_file_with_an_unknown_table_and_no_name_names_both(tmp_path: Path):
    f = tmp_path / "s.toml"
    f.write_text("[frobnicate]\nx = 1\n")
    r = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(f)], capture_output=True, text=True,
                       timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "2 problems" in lines[0] and "unknown table [frobnicate]" in lines[0] and "missing key 'name'" in lines[0]


def test_older_implementation_names_become_the_registrys_names():
    """Issue 27: nginx-1.30 and curl-8.23 are aliases of nginx-sid and curl-sid; a scenario's runs record the names."""
    s = validate({"name": "a", "clients": ["curl-8.23"], "servers": ["nginx", "nginx-1.30"],
                  "pairs": ["curl-8.23>nginx-1.30", "curl-8.23 > nginx"]}, "test")
    assert s.clients == ["curl-sid"] and s.servers == ["nginx", "nginx-sid"]
    assert s.pairs == ["curl-sid>nginx-sid", "curl-sid>nginx"]
