"""A REPLAY of committed runs, not a new measurement (lab/stats/replay.py): `--until-verdict`'s rounds replayed in
repeat order over committed reference folders (5 fixed repeats each) against those 5 fixed repeats, for the
acceptance point "decides at least as many points as 5 fixed repeats with fewer or equal runs where effects are
large". With the rule's defaults (alpha 0.05, rho 0.3, at most 20 repeats) the first look that can decide is at 5
pairs, with the interval the fixed design uses there ([min, max] of 5 ratios): so the rounds decide every point the
fixed design decides, with the same verdicts and the same runs, and go on only where it did not decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.config import ROOT
from lab.results import store
from lab.stats import replay, until

FOLDERS = {"connectify-cc": "h1/curl/nginx", "connectify-loss": "h1/curl/nginx", "kth-size": "h2/curl/nginx",
           "validate-reno": "h1/curl/nginx"}


@pytest.mark.parametrize("name", FOLDERS)
def test_rounds_replayed_decide_what_5_fixed_repeats_decide_with_no_more_runs(name, capsys):
    folder = Path(ROOT) / "results" / "reference" / name
    records = store.load_runs(folder)
    if not records:
        pytest.skip(f"{folder} has no runs.csv")
    rule = until.Rule(baseline=FOLDERS[name])
    r = replay.replay(records, rule)
    with capsys.disabled():
        print("\n" + replay.describe(f"results/reference/{name}", r, rule))
    assert r.repeats == 5 and r.fixed_runs == len(records)
    assert r.sequential_decided >= r.fixed_decided
    assert r.runs_where_fixed_decided[0] <= r.runs_where_fixed_decided[1]
    assert r.sequential_runs <= r.fixed_runs  # (the open points would run on beyond the folder)
    assert r.disagreements == []
    assert r.sequential_decided + r.sequential_open + sum(p.stop == "not comparable" for p in r.states) == r.points


def test_a_replay_stops_where_the_folder_does():
    """A point undecided after the folder's repeats is open, not decided and not at its most repeats."""
    records = store.load_runs(Path(ROOT) / "results" / "reference" / "validate-reno")
    if not records:
        pytest.skip("results/reference/validate-reno has no runs.csv")
    r = replay.replay(records, until.Rule(baseline="h1/curl/nginx"))
    assert r.sequential_open > 0
    assert all(p.repeats == 5 for p in r.states if p.stop == "open")
