"""docs/seeds.md's verdicts recomputed from the committed runs with this file's own arithmetic (issue 37, item 3).

`quiclab docs --check` proves docs/seeds.md is what lab/docgen renders now, not that the method is right. Here a few
lines of their own (csv, tomllib, math; nothing of lab/) recompute, for the arms whose runs all completed: each seed
point's paired QUIC/TCP verdict (per-repeat ratios over the same link seed, the sign interval at >= 90 %, +-10 %
margin), its agreement with the seed's own numbers, and the arm's verdict by the stated rule; and compare them with
the generated "At a glance" row and the lab's own findings.
"""

from __future__ import annotations

import csv
import math
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "results" / "reference"
SEEDS = ROOT / "docs" / "seeds.md"
TOML = ROOT / "docs" / "seeds.toml"
# (experiment, arm): one folder for both sides, so the design pairs; connectify gives numbers, not prose
ARMS = [("connectify-loss", "cubic"), ("connectify-rtt", "cubic"), ("connectify-rate", "cubic"),
        ("connectify-rtt", "default"), ("connectify-rate", "default"), ("connectify-loss", "default")]


def direction_of_ratio(r: float) -> str:
    return "QUIC faster" if r < 1 / 1.1 else "QUIC slower" if r > 1.1 else "parity"


def sign_ci(ratios: list[float]) -> tuple[float, float] | None:
    """The order-statistic interval of the median reaching >= 90 %: [x(k), x(n-k+1)], k the largest that does."""
    n, xs = len(ratios), sorted(ratios)
    ks = [k for k in range(1, n // 2 + 1) if 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n >= 0.90]
    return (xs[max(ks) - 1], xs[n - max(ks)]) if ks else None


def lab_direction(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "no verdict"
    lo, hi = ci
    if lo > 1 / 1.1 and hi < 1.1:
        return "parity"
    return "QUIC faster" if hi < 1 / 1.1 else "QUIC slower" if lo > 1.1 else "no verdict"


def agreement(seed: str, lab: str) -> str:
    if lab == "no verdict":
        return "-"
    if seed == lab:
        return "yes"
    return "no (lab parity)" if lab == "parity" else "no (seed parity)" if seed == "parity" else "no (opposite)"


def glance_row(exp: str, arm: str) -> list[str]:
    for line in SEEDS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 10 and cells[1:3] == [exp, arm]:
            return cells
    raise AssertionError(f"docs/seeds.md has no At a glance row for {exp} / {arm}")


def recompute(exp: dict[str, Any], arm: dict[str, Any]) -> tuple[list[str], dict[str, str]] | None:
    """The agreements at the experiment's points and the lab's direction per point, or None when a run of the
    arm's methods did not complete (then censoring enters, which these few lines do not do)."""
    with (REF / arm["preset"] / "runs.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    sides = [(s["protocol"], s.get("client", "curl"), s.get("server", "nginx")) for s in (arm["quic"], arm["tcp"])]
    mine = [r for r in rows if (r["protocol"], r["client"], r["server"]) in sides]
    if any(r["status"] != "ok" for r in mine):
        return None
    t = {((r["protocol"], r["client"], r["server"]), r["point_label"], r["repeat"], r["seed"]): float(r["total_s"])
         for r in mine}
    agreements: list[str] = []
    lab: dict[str, str] = {}
    for p in exp["points"]:
        keys = [(k[2], k[3]) for k in t if k[0] == sides[1] and k[1] == p["point"]]
        ratios = [t[(sides[0], p["point"], rep, seed)] / t[(sides[1], p["point"], rep, seed)] for rep, seed in keys]
        lab[p["point"]] = lab_direction(sign_ci(ratios))
        agreements.append(agreement(direction_of_ratio(p["quic_s"] / p["tcp_s"]), lab[p["point"]]))
    return agreements, lab


def completed_arms() -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any], tuple[list[str], Any]]]:
    """(experiment id, arm id, experiment, arm, recomputed) for each connectify arm whose runs all completed."""
    atlas = tomllib.loads(TOML.read_text(encoding="utf-8"))
    exps = {e["id"]: e for s in atlas["seeds"] for e in s.get("experiments", [])}
    for exp_id, arm_id in ARMS:
        exp = exps[exp_id]
        arm = next(a for a in exp["arms"] if a["id"] == arm_id)
        got = recompute(exp, arm)
        if got is not None:
            yield exp_id, arm_id, exp, arm, got


def test_the_arm_verdicts_of_the_connectify_arms_are_recomputed_from_their_runs() -> None:
    checked = 0
    for exp_id, arm_id, exp, _, (agreements, _) in completed_arms():
        yes = agreements.count("yes")
        verdict = "reproduced" if 3 * yes >= 2 * len(agreements) else "partly" if yes else "not"
        row = glance_row(exp_id, arm_id)
        assert row[3] == f"{len(agreements)} of {len(exp['points'])} ({len(agreements)})", row  # all paired
        assert [int(c) for c in row[4:9]] == [agreements.count(a) for a in
                                              ("yes", "no (opposite)", "no (lab parity)", "no (seed parity)", "-")]
        assert row[9] == verdict, (exp_id, arm_id, agreements, row)
        checked += 1
    assert checked >= 3, "fewer than three connectify arms have every run completed: nothing much was recomputed"


def test_the_opposite_findings_are_the_recomputed_opposite_points() -> None:
    """Every connectify point of a fully completed arm where the lab decides the direction opposite to the seed's
    is listed under the lab's own findings with its folder, and no other connectify point of that arm is."""
    text = SEEDS.read_text(encoding="utf-8")
    found = text[text.index("## The lab's own findings"):text.index("## 000")]
    for exp_id, arm_id, exp, arm, (agreements, lab) in completed_arms():
        for p, a in zip(exp["points"], agreements, strict=True):
            listed = [line for line in found.splitlines() if f"{exp_id}, arm {arm_id} " in line
                      and f"| {p['point']} |" in line and f"`results/reference/{arm['preset']}/`" in line]
            if a == "no (opposite)":
                assert len(listed) == 1 and f"| {lab[p['point']]} | the seed saw the opposite |" in listed[0]
            elif a != "no (seed parity)":
                assert not listed, listed
