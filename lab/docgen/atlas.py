"""The seed atlas (issue 26): docs/seeds.md generated from the committed reference sweeps and the seeds' own numbers.

Input: docs/seeds.toml (what each seed study measured, its numbers with their lines in ../shared/seeds/, and which
lab preset and methods stand for its QUIC and its TCP side), and results/reference/<preset>/runs.csv. Output: one
markdown document; `quiclab docs` writes it and `quiclab docs --check` (and tests/unit/test_docs_generated.py)
fails when the committed file no longer matches its data.

One definition for every comparison: **QUIC/TCP time** by verdict.judge_runs (TCP as A, QUIC as B), the rule
`quiclab compare`, `reproduce` and the reports' "In short" use: paired (the median per-repeat ratio and its
sign-based CI) where both sides ran the same repeats over the same link seeds, else unpaired (the Hodges-Lehmann
estimate and its exact CI), each with the level its CI reaches at these n; failed and timed-out runs enter censored
at their own end, never dropped. < 1: QUIC was faster. The lab's direction is that verdict at the default margins:
parity (equivalent: CI inside +-10 %), QUIC faster/slower (differs: CI wholly beyond +-10 %; unpaired also rank test
p < 0.05), else no verdict. The seed's direction is from its own numbers: its QUIC/TCP time ratio below 1/1.1 is
"QUIC faster", above 1.1 "QUIC slower", else "parity" (a seed gives one number per point, so no interval); for
seeds that published graphs only, the direction their text states, quoted with its line.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lab import config
from lab.docgen import zero_rtt
from lab.docgen.seed_verdict import Outcome, judge_arm
from lab.errors import UsageError
from lab.report.report import load_sweep
from lab.results.schema import RunRecord
from lab.stats.fmt import fmt_est
from lab.stats.stats import Est, Obs, describe, method_label
from lab.stats.verdict import (
    Bounded,
    Design,
    Judged,
    Margins,
    RatioCI,
    Unpaired,
    fmt_bounded,
    fmt_ci,
    fmt_level,
    group_samples,
    judge_runs,
)

SEEDS_TOML = config.ROOT / "docs" / "seeds.toml"
REFERENCE = config.ROOT / "results" / "reference"
Direction = Literal["QUIC faster", "QUIC slower", "parity", "no verdict"]
#: a seed ratio within this factor of 1 is "parity" (the lab's equivalence margin, so both sides use one band)
PARITY = 1.10
_PLACEHOLDER = re.compile(r"\{(ratio|quic|tcp|quic_mbps|tcp_mbps|n|verdict):([a-z0-9-]+):([^}]+)\}")


class Side(BaseModel):
    """One method of a lab arm."""

    model_config = ConfigDict(extra="forbid")
    protocol: Literal["h1", "h2", "h3"]
    client: str = "curl"
    server: str = "nginx"
    #: the lab's point label for this side; "{point}" is the seed point's label (e.g. "size=250kB {point} cc=reno")
    point: str = "{point}"
    #: the reference folder of this side when it is not the arm's (e.g. TCP from the sweep that ran it)
    preset: str | None = None

    def label(self, point: str) -> str:
        return self.point.replace("{point}", point)


class Arm(BaseModel):
    """One lab stand-in for the seed's comparison: a reference folder and its QUIC and TCP methods."""

    model_config = ConfigDict(extra="forbid")
    id: str
    preset: str
    label: str
    quic: Side
    tcp: Side
    #: where the arm's sweep has other axes than the seed's: seed point label -> this arm's point (the arm then
    #: stands only at those points), e.g. {"size=10MB loss=5% rtt=0ms" = "size=10MB rtt=0ms"} for a fixed-loss sweep
    points: dict[str, str] = {}

    def applies(self, point: str) -> bool:
        return not self.points or point in self.points

    def lab_point(self, point: str) -> str:
        return self.points.get(point, point)

    def preset_of(self, side: Side) -> str:
        return side.preset or self.preset


class SeedPoint(BaseModel):
    """One condition of the seed with its number (or its stated direction) and the lab point that matches it."""

    model_config = ConfigDict(extra="forbid")
    condition: str
    point: str  # the lab's point label, e.g. "loss=5%"
    lines: str  # the seed file's lines it comes from
    quic_s: float | None = None
    tcp_s: float | None = None
    claim: str = ""  # a graph-only seed: what its text says (quoted or close), with `direction`
    direction: Direction | None = None

    def seed_ratio(self) -> float | None:
        return self.quic_s / self.tcp_s if self.quic_s and self.tcp_s else None

    def seed_direction(self) -> Direction:
        r = self.seed_ratio()
        if r is None:
            return self.direction or "no verdict"
        return "QUIC faster" if r < 1 / PARITY else "QUIC slower" if r > PARITY else "parity"


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    title: str
    conditions: str
    lines: str
    metric: Literal["time", "page time"] = "time"
    #: what the two sides are called (default QUIC and TCP; e.g. reuse vs new connections)
    names: tuple[str, str] = ("QUIC", "TCP")
    points: list[SeedPoint]
    arms: list[Arm]
    notes: list[str] = []  # why the lab differs; placeholders {ratio:ARM:POINT} etc. take numbers from the data
    #: a preset whose folder's resume/0rtt runs carry sessions.json: what 0-RTT moved earlier (lab/docgen/zero_rtt.py)
    sessions: str = ""


class Seed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    file: str
    title: str
    summary: str
    experiments: list[Experiment] = []
    not_here: list[str] = Field(default=[], description="experiments of the seed the lab cannot run, and why")


class Atlas(BaseModel):
    model_config = ConfigDict(extra="forbid")
    intro: str
    seeds: list[Seed]


def load_atlas(path: Path = SEEDS_TOML) -> Atlas:
    try:
        return Atlas.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as e:
        raise UsageError(f"{path}: {' '.join(str(e).split())[:300]}") from None


# ---------------------------------------------------------------------------------------------------------------
# The lab's side of one comparison


@dataclass(frozen=True)
class LabCell:
    """QUIC vs TCP at one point of one arm, or why there is nothing to show."""

    missing: str = ""  # "" or why there is no comparison (folder not committed, point or method absent)
    n_quic: int = 0
    n_tcp: int = 0
    censored_quic: int = 0
    censored_tcp: int = 0
    quic_median: Est | None = None  # s (a bound when censoring leaves it one)
    tcp_median: Est | None = None
    quic_goodput: Est | None = None  # median goodput, bit/s
    tcp_goodput: Est | None = None
    ratio: str = ""  # QUIC/TCP time, formatted (may be a bound)
    ratio_value: float | None = None
    ci: RatioCI | None = None
    direction: Direction = "no verdict"
    reason: str = ""
    design: Design = "unpaired"  # paired: ratio, CI and direction from the per-pair ratios (lab/stats/paired.py)
    pairing: str = ""  # "5 pairs (same repeat and link seed)", or why unpaired
    unpaired: Unpaired | None = None  # beside a paired verdict: the unpaired estimate and its verdict
    judged: Judged | None = None  # the whole verdict (None when missing)


def _median(values: Sequence[Obs]) -> Est | None:
    """The median, a bound when censoring leaves it one (None without a result)."""
    d = describe(values)
    return d.median if d is not None else None


def _runs(records: Sequence[RunRecord], point: str, side: Side) -> list[RunRecord]:
    return [r for r in records if r.point_label == side.label(point) and r.protocol == side.protocol
            and r.client == side.client and r.server == side.server and r.status != "unsupported"]


def compare_methods(quic_records: Sequence[RunRecord], tcp_records: Sequence[RunRecord], point: str, quic: Side,
                    tcp: Side, margins: Margins | None = None) -> LabCell:
    """QUIC/TCP time at one seed point by the one comparison rule (verdict.judge_runs: paired where every run has
    its partner over the same repeat and link seed, else unpaired), its CI and level, and the direction."""
    margins = margins or Margins()
    rq, rt = _runs(quic_records, point, quic), _runs(tcp_records, point, tcp)
    if not rq or not rt:
        gone = " and ".join(f"{method_label(s.protocol, s.client, s.server)} at {s.label(point)}"
                            for s, rs in ((quic, rq), (tcp, rt)) if not rs)
        return LabCell(missing=f"no runs of {gone}")
    sq, st = group_samples(rq), group_samples(rt)
    j = judge_runs(rt, rq, margins)
    return LabCell(n_quic=len(sq.time), n_tcp=len(st.time), censored_quic=sq.n_censored, censored_tcp=st.n_censored,
                   quic_median=_median(sq.time), tcp_median=_median(st.time),
                   quic_goodput=_median(sq.goodput), tcp_goodput=_median(st.goodput),
                   ratio=fmt_bounded(Bounded.of(j.ratio)),
                   ratio_value=j.ratio.value if j.ratio.exact else None, ci=j.ci, direction=direction_of(j),
                   reason=j.reason, design=j.design, pairing=j.pairing, unpaired=j.unpaired, judged=j)


def direction_of(j: Judged) -> Direction:
    """The lab's direction from a verdict of QUIC/TCP time: parity (equivalent), QUIC faster or slower (differs:
    the side of 1 the CI lies on), else no verdict."""
    if j.verdict == "equivalent":
        return "parity"
    if j.verdict == "inconclusive" or j.ci is None:
        return "no verdict"
    below = j.ci.hi.value is not None and j.ci.hi.bound in ("", "<") and j.ci.hi.value < 1
    return "QUIC faster" if below else "QUIC slower"


# ---------------------------------------------------------------------------------------------------------------
# Reading the reference folders


@dataclass(frozen=True)
class Folder:
    path: Path
    records: list[RunRecord]
    manifest: dict[str, object]


def load_folder(preset: str, reference: Path = REFERENCE) -> Folder | None:
    path = reference / preset
    if not (path / "runs.csv").is_file():
        return None
    records, manifest = load_sweep(path)
    return Folder(path, records, manifest)


def senders(records: Sequence[RunRecord], side: Side, points: Collection[str] | None = None) -> str:
    """The sender's congestion control as the runs read it back (the most common value; the server sends), over
    the side's runs at `points` (lab point labels; None: all its runs). A folder that sweeps the sender (cc=reno,
    cc=cubic) names the one the arm's points ran, not the folder's most common."""
    c = Counter(r.cc_sender for r in records if r.protocol == side.protocol and r.client == side.client
                and r.server == side.server and r.cc_sender and (points is None or r.point_label in points))
    return c.most_common(1)[0][0] if c else "?"


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def ratio_cell(c: LabCell) -> str:
    """The lab's QUIC/TCP cell: the design's ratio [CI, level], the design, and beside a paired ratio the unpaired
    estimate with its verdict."""
    main = f"{c.ratio} [{fmt_ci(c.ci)}, {fmt_level(c.ci)}]" if c.ci else c.ratio
    if c.design == "paired":
        u = c.unpaired
        beside = ""
        if u is not None:
            ci = f" [{fmt_ci(u.ci)}, {fmt_level(u.ci)}]" if u.ci else ""
            beside = f"; unpaired {fmt_bounded(u.ratio)}{ci}: {UNPAIRED_WORDS[u.verdict]}"
        return f"{main} paired{beside}"
    return f"{main} unpaired" + (f" ({c.pairing.removeprefix('unpaired (').rstrip(')')})"
                                 if c.pairing.startswith("unpaired (") else "")


UNPAIRED_WORDS = {"equivalent": "parity", "differs": "a difference", "inconclusive": "no verdict"}


def seconds(v: Est | None) -> str:
    return f"{fmt_est(v)} s" if v is not None else "-"


def n_text(cell: LabCell) -> str:
    cens = cell.censored_quic + cell.censored_tcp
    return f"{cell.n_quic}/{cell.n_tcp}" + (f" ({cens} censored)" if cens else "")


def shown(d: Direction, names: tuple[str, str]) -> str:
    return d.replace("QUIC", names[0], 1) if names[0] != "QUIC" else d


def same_direction(seed: Direction, lab: Direction) -> str:
    """"yes"; "no (opposite)": both directional, opposite ways; "no (lab parity)": the seed saw a direction where
    the lab finds parity; "no (seed parity)": the other way round; "-": either side has no verdict."""
    if lab == "no verdict" or seed == "no verdict":
        return "-"
    if seed == lab:
        return "yes"
    return "no (lab parity)" if lab == "parity" else "no (seed parity)" if seed == "parity" else "no (opposite)"


def medians_disagree(c: LabCell) -> bool:
    """Whether the two medians point the other way from the ratio (opposite sides of 1, one of them beyond the +-10 %
    band): the ratio is the median of the per-repeat ratios (paired) or the Hodges-Lehmann estimate (unpaired: the
    median of every QUIC/TCP pairwise ratio), not the ratio of the medians, and with wide spreads they can differ."""
    if c.ratio_value is None or c.quic_median is None or c.tcp_median is None:
        return False
    if not (c.quic_median.exact and c.tcp_median.exact) or not c.quic_median.value or not c.tcp_median.value:
        return False
    by_medians = c.quic_median.value / c.tcp_median.value
    outside = any(v < 1 / PARITY or v > PARITY for v in (by_medians, c.ratio_value))  # not both within the band
    return (by_medians - 1) * (c.ratio_value - 1) < 0 and outside


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(config.ROOT))
    except ValueError:
        return str(path)


class Renderer:
    def __init__(self, reference: Path = REFERENCE) -> None:
        self.reference = reference
        self._folders: dict[str, Folder | None] = {}

    def folder(self, preset: str) -> Folder | None:
        if preset not in self._folders:
            self._folders[preset] = load_folder(preset, self.reference)
        return self._folders[preset]

    def cell(self, arm: Arm, point: str) -> LabCell:
        fq, ft = self.folder(arm.preset_of(arm.quic)), self.folder(arm.preset_of(arm.tcp))
        for side, f in ((arm.quic, fq), (arm.tcp, ft)):
            if f is None:
                return LabCell(missing=f"not run yet: no {_rel(self.reference / arm.preset_of(side))}/runs.csv")
        assert fq is not None and ft is not None
        if not arm.applies(point):
            return LabCell(missing=f"arm {arm.id} has no point {point}")
        return compare_methods(fq.records, ft.records, arm.lab_point(point), arm.quic, arm.tcp)

    def folders(self, arm: Arm) -> tuple[str, ...]:
        """The arm's folders (QUIC side first), relative to the repository."""
        return tuple(dict.fromkeys(_rel(self.reference / arm.preset_of(s)) for s in (arm.quic, arm.tcp)))

    def cells(self, exp: Experiment, arm: Arm) -> list[tuple[SeedPoint, LabCell, Outcome]]:
        """The arm's seed points with data: the point, the lab's cell and its outcome for the verdict rule."""
        out = []
        for p in exp.points:
            if not arm.applies(p.point):
                continue
            c = self.cell(arm, p.point)
            if c.missing:
                continue
            seed = p.seed_direction()
            out.append((p, c, Outcome(same_direction(seed, c.direction), c.censored_quic + c.censored_tcp > 0,
                                      self.folders(arm), comparable=seed != "no verdict")))
        return out

    def fill(self, text: str, exp: Experiment) -> str:
        """Replace {ratio|quic|tcp|n|verdict:ARM:POINT} with the number from the data."""
        arms = {a.id: a for a in exp.arms}

        def one(m: re.Match[str]) -> str:
            kind, arm_id, point = m.groups()
            if arm_id not in arms:
                raise UsageError(f"docs/seeds.toml, {exp.id}: note names arm {arm_id!r}; arms: {', '.join(arms)}")
            c = self.cell(arms[arm_id], point)
            if c.missing:
                return "(not run yet)" if c.missing.startswith("not run yet") else f"(no data: {c.missing})"
            if kind == "ratio":
                return f"{c.ratio} [{fmt_ci(c.ci)}, {fmt_level(c.ci)}]" if c.ci else c.ratio
            if kind == "quic":
                return seconds(c.quic_median)
            if kind == "tcp":
                return seconds(c.tcp_median)
            if kind in ("quic_mbps", "tcp_mbps"):
                v = c.quic_goodput if kind == "quic_mbps" else c.tcp_goodput
                return f"{fmt_est(v, 1e-6)} Mbit/s" if v is not None else "-"
            if kind == "n":
                return n_text(c)
            return shown(c.direction, exp.names)

        return _PLACEHOLDER.sub(one, text)

    def side_line(self, arm: Arm, side: Side, exp: Experiment) -> str:
        """What ran on one side: the method, its sender's congestion control read back at the arm's points of
        the experiment, and the data's folder."""
        preset = arm.preset_of(side)
        method = method_label(side.protocol, side.client, side.server)
        f = self.folder(preset)
        if f is None:
            return f"{method}: **not run yet** (no {_rel(self.reference / preset)}/: `bash scripts/atlas.sh {preset}`)"
        git = f.manifest.get("git")
        commit = str(git.get("commit", "?"))[:7] if isinstance(git, dict) else "?"
        ok = sum(1 for r in f.records if r.status == "ok")
        run = sum(1 for r in f.records if r.status != "unsupported")
        flagged = sum(1 for r in f.records if r.host_bound and (r.protocol, r.client, r.server)
                      == (side.protocol, side.client, side.server))
        host = f"; {flagged} of this method's runs flagged host-bound (runs.csv host_bound)" if flagged else ""
        points = {side.label(arm.lab_point(p.point)) for p in exp.points if arm.applies(p.point)}
        return (f"{method}, sender {senders(f.records, side, points)}, from `{_rel(f.path)}/` "
                f"({f.manifest.get('status', '?')}: {ok}/{run} runs ok{host}; commit {commit})")

    def experiment(self, seed: Seed, exp: Experiment) -> list[str]:
        out = [f"### {exp.title}", "", f"Seed's conditions ({seed.id} lines {exp.lines}): {exp.conditions}", ""]
        for arm in exp.arms:
            presets = {arm.preset_of(arm.quic), arm.preset_of(arm.tcp)}
            if len(presets) == 1 and self.folder(arm.preset) is None:
                sides = (f"**not run yet** (no {_rel(self.reference / arm.preset)}/: "
                         f"`bash scripts/atlas.sh {arm.preset}`)")
            else:
                sides = "; ".join(self.side_line(arm, s, exp) for s in (arm.quic, arm.tcp))
            out.append(f"- arm **{arm.id}**: {arm.label}: {sides}")
        metric = "page time" if exp.metric == "page time" else "transfer time"
        a, b = exp.names
        out += ["", f"| seed condition | seed: {a} / {b} {metric} | seed {a}/{b} | arm | lab: {a} / {b} median "
                    f"(n) | lab {a}/{b} [CI, level] | lab says | same direction? |",
                "|---|---|---|---|---|---|---|---|"]
        flagged = False
        for p in exp.points:
            r = p.seed_ratio()
            where = f"line{'s' if any(c in p.lines for c in ',-') else ''} {p.lines}"
            seed_num = f"{p.quic_s:g} / {p.tcp_s:g} s ({where})" if r is not None else f"{p.claim} ({where})"
            seed_dir = shown(p.seed_direction(), exp.names)
            seed_ratio = f"{r:.2f} ({seed_dir})" if r is not None else seed_dir
            for i, arm in enumerate(a for a in exp.arms if a.applies(p.point)):
                c = self.cell(arm, p.point)
                head = [p.condition, seed_num, seed_ratio] if i == 0 else ["", "", ""]
                if c.missing:
                    gap = "not run yet" if c.missing.startswith("not run yet") else c.missing
                    out.append("| " + " | ".join([*head, arm.id, gap, "", "", ""]) + " |")
                    continue
                lab_ratio = ratio_cell(c)
                medians = f"{seconds(c.quic_median)} / {seconds(c.tcp_median)} ({n_text(c)})"
                if medians_disagree(c):
                    medians += " (medians point the other way: see below the table)"
                    flagged = True
                out.append("| " + " | ".join([*head, arm.id, medians, lab_ratio, shown(c.direction, exp.names),
                                              same_direction(p.seed_direction(), c.direction)]) + " |")
        if flagged:
            out += ["", "Where the two medians point the other way from QUIC/TCP: the ratio is the median of the "
                        "per-repeat QUIC/TCP time ratios (paired) or of all pairwise ones (unpaired: Hodges-Lehmann), "
                        "not the ratio of the two medians; with spreads this wide they can disagree, and the verdict "
                        "(with its CI) rests on the ratio."]
        if exp.notes:
            out += ["", "Why the lab differs:", ""] + [f"- {self.fill(n, exp)}" for n in exp.notes]
        if exp.sessions:
            f = self.folder(exp.sessions)
            where = _rel(self.reference / exp.sessions)
            out += ["", *(zero_rtt.section(f.path, f.records, where) if f is not None
                          else [f"No `{where}/` yet: `bash scripts/atlas.sh {exp.sessions}`."])]
        return [*out, ""]

    def overview(self, atlas: Atlas) -> list[str]:
        """One row per experiment and arm: at how many of the seed's points the lab agrees on the direction."""
        out = ["## At a glance", "",
               "Per experiment and arm: the seed's points where the lab has data, and at how many of them the lab's "
               "verdict goes the seed's way (same direction), the opposite way (both see a direction, opposite), "
               "finds parity where the seed saw a direction, finds a direction where the seed saw parity, or gives "
               "no verdict; in brackets how many of the points' verdicts are paired (same repeats and link seeds on "
               "both sides); and the arm's verdict by the rule under \"What the atlas found\".", "",
               "| seed | experiment | arm | points with data (paired) | same direction | opposite | lab parity, seed a "
               "direction | lab a direction, seed parity | no verdict | arm's verdict |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        for seed in atlas.seeds:
            for exp in seed.experiments:
                for arm in exp.arms:
                    pts = [p for p in exp.points if arm.applies(p.point)]
                    have = self.cells(exp, arm)
                    if not have:
                        out.append(f"| {seed.id} | {exp.id} | {arm.id} | 0 of {len(pts)} (not run yet) "
                                   "| | | | | | |")
                        continue
                    verdicts = [o.agreement for _, _, o in have]
                    paired = sum(1 for _, c, _ in have if c.design == "paired")
                    out.append(f"| {seed.id} | {exp.id} | {arm.id} | {len(have)} of {len(pts)} ({paired}) | "
                               f"{verdicts.count('yes')} | {verdicts.count('no (opposite)')} | "
                               f"{verdicts.count('no (lab parity)')} | {verdicts.count('no (seed parity)')} | "
                               f"{verdicts.count('-')} | {judge_arm([o for _, _, o in have]).verdict} |")
        return [*out, ""]

    def document(self, atlas: Atlas, found: Sequence[str] = (), per_seed: Mapping[str, Sequence[str]] | None = None
                 ) -> str:
        """The whole atlas; `found` (what the atlas found, lab/docgen/atlas_found.py) follows the overview, and
        `per_seed` (seed id -> lines, e.g. its censored runs: lab/docgen/censored.py) ends each seed's section."""
        out = ["# The seed atlas", "",
               "<!-- generated by `quiclab docs` from docs/seeds.toml and results/reference/: do not edit -->", "",
               atlas.intro.strip(), "", *self.overview(atlas), *found]
        for seed in atlas.seeds:
            out += [f"## {seed.id}: {seed.title}", "", f"`../shared/seeds/{seed.file}`. {seed.summary.strip()}", ""]
            for exp in seed.experiments:
                out += self.experiment(seed, exp)
            if seed.not_here:
                out += ["Not run here:", ""] + [f"- {t}" for t in seed.not_here] + [""]
            out += list((per_seed or {}).get(seed.id, ()))
        return "\n".join(out).rstrip() + "\n"
