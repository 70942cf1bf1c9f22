"""What the seed atlas found (issue 37, item 3): a verdict line per seed and experiment, and the lab's own findings.

Both come from the committed folders only, through atlas.Renderer's cells (the one comparison rule, paired where the
design pairs) and lab/docgen/seed_verdict.py's rule; nothing here is typed prose about results. The lab's own
findings are the cells where the lab decides a direction (QUIC faster or slower) that the seed did not report: at a
seed point where the seed saw parity, the opposite or stated nothing, or at a point of the arm's folder that is not
one of the seed's (e.g. another object size of the same sweep).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.docgen import answers, censored
from lab.docgen.atlas import (
    REFERENCE,
    SEEDS_TOML,
    Arm,
    Atlas,
    Experiment,
    LabCell,
    Renderer,
    Seed,
    Side,
    compare_methods,
    load_atlas,
    n_text,
    ratio_cell,
    seconds,
    shown,
)
from lab.docgen.seed_verdict import (
    CAUSES,
    RULE,
    Found,
    Outcome,
    best_arm,
    dominant_cause,
    judge_arm,
    judge_seed,
)
from lab.stats.stats import method_label

#: why a decided lab direction is listed among the lab's own findings
WHY = {"no (opposite)": "the seed saw the opposite", "no (seed parity)": "the seed saw parity",
       "unstated": "the seed states no result here", "extra": "not a point of the seed's"}
DECIDED = ("QUIC faster", "QUIC slower")


@dataclass(frozen=True)
class ExperimentFound:
    exp: Experiment
    arm: Arm
    found: Found
    outcomes: list[Outcome]


def experiment_found(r: Renderer, exp: Experiment) -> ExperimentFound:
    """The experiment's verdict: its best arm's (seed_verdict.best_arm)."""
    per_arm = {a.id: [o for _, _, o in r.cells(exp, a)] for a in exp.arms}
    arm_id, found = best_arm([(a.id, judge_arm(per_arm[a.id])) for a in exp.arms])
    arm = next(a for a in exp.arms if a.id == arm_id)
    return ExperimentFound(exp, arm, found, per_arm[arm_id])


def seed_line(seed: Seed, found: list[ExperimentFound]) -> str:
    """One line: the seed's verdict and its cause in one clause with the folders behind it."""
    verdict = judge_seed([f.found for f in found])
    head = f"- **{seed.id}** {seed.title}: **{verdict}**"
    if verdict == "no claim":
        return f"{head}: no experiment of the seed has a comparable point with data"
    if verdict == "reproduced":
        folders = list(dict.fromkeys(d for f in found for d in f.found.folders))
        return f"{head}: every experiment goes the seed's way ({', '.join(f'`{d}/`' for d in folders)})"
    held = [f"{f.exp.id} (arm {f.arm.id})" for f in found if f.found.verdict == "reproduced"]
    rest = [f for f in found if f.found.verdict in ("partly", "not")]
    cause, folders = dominant_cause([o for f in rest for o in f.outcomes])
    where = ", ".join(f"`{d}/`" for d in folders)
    kept = f"{', '.join(held)} reproduced; " if held else ""
    return (f"{head}: {kept}{', '.join(f.exp.id for f in rest)} mostly {CAUSES[cause]} "
            f"({where})") if cause else f"{head}: {kept.rstrip('; ')}"


def verdict_section(r: Renderer, atlas: Atlas) -> list[str]:
    out = ["## What the atlas found", "", RULE, ""]
    rows = ["| seed | experiment | verdict | arm | why |", "|---|---|---|---|---|"]
    for seed in atlas.seeds:
        found = [experiment_found(r, e) for e in seed.experiments]
        if not found:
            continue
        out.append(seed_line(seed, found))
        rows += [f"| {seed.id} | {f.exp.id} | {f.found.verdict} | {f.arm.id} | {f.found.clause()} |" for f in found]
    return [*out, "", "Per experiment (its best arm; every arm's verdict is in the table above):", "", *rows, ""]


# ---------------------------------------------------------------------------------------------------------------
# The lab's own findings


def _pattern(side: Side) -> re.Pattern[str]:
    return re.compile(re.escape(side.point).replace(re.escape("{point}"), "(.+)") + r"\Z")


def extra_points(r: Renderer, arm: Arm, seen: set[str]) -> Iterator[tuple[str, LabCell]]:
    """The arm's points in its folder that are no seed point (`seen`: the lab points the seed's points use), with
    the cell compared by the one rule; points where one side has no runs are left out."""
    fq, ft = r.folder(arm.preset_of(arm.quic)), r.folder(arm.preset_of(arm.tcp))
    if fq is None or ft is None:
        return
    pat = _pattern(arm.quic)
    labels = dict.fromkeys(rec.point_label for rec in fq.records if rec.protocol == arm.quic.protocol
                           and rec.client == arm.quic.client and rec.server == arm.quic.server)
    for label in labels:
        m = pat.match(label)
        if m is None or m.group(1) in seen:
            continue
        c = compare_methods(fq.records, ft.records, m.group(1), arm.quic, arm.tcp)
        if not c.missing:
            yield m.group(1), c


def _side_key(arm: Arm, side: Side) -> tuple[str, ...]:
    return (arm.preset_of(side), side.protocol, side.client, side.server, side.point)


def _row(seed: Seed, exp: Experiment, arm: Arm, r: Renderer, point: str, c: LabCell, why: str) -> str:
    folders = ", ".join(f"`{d}/`" for d in r.folders(arm))
    methods = " vs ".join(method_label(s.protocol, s.client, s.server) for s in (arm.quic, arm.tcp))
    return (f"| {seed.id} | {exp.id}, arm {arm.id} ({methods}) | {folders} | {point} | "
            f"{seconds(c.quic_median)} / {seconds(c.tcp_median)} ({n_text(c)}) | {ratio_cell(c)} | "
            f"{shown(c.direction, exp.names)} | {why} |")


def findings_section(r: Renderer, atlas: Atlas) -> list[str]:
    """Every cell where the lab decides a direction the seed did not report, once per folder pair and methods."""
    rows: list[str] = []
    # each (QUIC side, TCP side) once: the arm a folder stands in for in several experiments lists its points once
    seed_points: dict[tuple[tuple[str, ...], tuple[str, ...]], set[str]] = {}
    first: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[Seed, Experiment, Arm]] = {}
    for seed in atlas.seeds:
        for exp in seed.experiments:
            for arm in exp.arms:
                key = (_side_key(arm, arm.quic), _side_key(arm, arm.tcp))
                seed_points.setdefault(key, set()).update(arm.lab_point(p.point) for p in exp.points
                                                         if arm.applies(p.point))
                first.setdefault(key, (seed, exp, arm))
                for p, c, o in r.cells(exp, arm):
                    if c.direction not in DECIDED:
                        continue
                    why = o.agreement if o.comparable else "unstated"
                    if why in WHY:
                        rows.append(_row(seed, exp, arm, r, arm.lab_point(p.point), c, WHY[why]))
    for key, (seed, exp, arm) in first.items():
        for point, c in extra_points(r, arm, seed_points[key]):
            if c.direction in DECIDED:
                rows.append(_row(seed, exp, arm, r, point, c, WHY["extra"]))
    intro = ("Every cell where the lab decides a direction (its CI wholly beyond +-10 %, by the rule of the tables) "
             "that the seed did not report: at a seed point where the seed saw parity, the opposite or states "
             "nothing, or at a point of the same folder and methods that is not one of the seed's. Each sweep's "
             "methods and points are listed once, under the first experiment that uses them.")
    if not rows:
        return ["## The lab's own findings", "", intro, "", "None in the committed folders.", ""]
    return ["## The lab's own findings", "", intro, "",
            "| seed | experiment, arm (methods) | folder | lab point | lab: first / second median (n) | "
            "lab ratio [CI, level] | lab says | why listed |", "|---|---|---|---|---|---|---|---|", *rows, ""]


def generate(atlas_path: Path = SEEDS_TOML, reference: Path = REFERENCE) -> str:
    """docs/seeds.md: the atlas with what it found after the overview, and its censored runs diagnosed
    (lab/docgen/censored.py): the total after the findings, each seed's at the end of its section; then the open
    questions answered (lab/docgen/answers.py)."""
    r, atlas = Renderer(reference), load_atlas(atlas_path)
    total, per_seed = censored.sections(r, atlas)
    return r.document(atlas, [*verdict_section(r, atlas), *findings_section(r, atlas), *total,
                                      *answers.section(r, atlas)], per_seed)
