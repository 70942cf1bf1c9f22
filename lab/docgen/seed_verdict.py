"""What the atlas found (issue 37, item 3): one rule from the cells' verdicts to a verdict per arm, experiment and seed.

A cell is one seed point of one arm with data; its agreement is atlas.same_direction of the seed's direction and the
lab's verdict (the one comparison rule, paired where the design pairs). The rule, written once here and printed in
docs/seeds.md by `RULE`:

- a cell is *comparable* when the seed states a direction or parity there (a point without a stated result is not);
- an arm **reproduces** the experiment when the lab goes the seed's way at >= 2/3 of its comparable cells, **partly**
  when at at least one, **not** when at none; an arm with no comparable cell has "no claim";
- an experiment's verdict is its best arm's (reproduced > partly > not; ties: the larger share agreeing, then the
  arm listed first), named with that arm, since each arm is a stand-in the atlas declared in advance;
- a seed **reproduces** when each of its experiments with a claim does, **not** when none does even partly, else
  **partly**;
- the cause, one clause: where reproduced, how many cells agree; otherwise the most common way the cells that do not
  agree fall (ties in the order of CAUSES), with the folders of those cells.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

Verdict = Literal["reproduced", "partly", "not", "no claim"]
#: the share of comparable cells that must go the seed's way for "reproduced"
REPRODUCED_SHARE = Fraction(2, 3)
AGREE = "yes"
NO_VERDICT = "-"
#: why a cell does not agree, in the order ties are broken: atlas.same_direction's answer (and for no verdict,
#: whether censored runs are in the cell) -> the clause the atlas prints
CAUSES: dict[str, str] = {
    "no (opposite)": "the opposite direction",
    "no (lab parity)": "parity where the seed saw a direction",
    "no (seed parity)": "a difference where the seed saw parity",
    "censored": "no verdict, with censored runs in the cells",
    NO_VERDICT: "no verdict (the CI spans the +-10 % margin)",
}
_RANK: dict[Verdict, int] = {"reproduced": 3, "partly": 2, "not": 1, "no claim": 0}
RULE = (f"A seed point is *comparable* where the seed states a direction or parity. An arm **reproduces** an "
        f"experiment when the lab's verdict goes the seed's way at >= {REPRODUCED_SHARE.numerator}/"
        f"{REPRODUCED_SHARE.denominator} of its comparable points, **partly** when at one or more, **not** when at "
        f"none (no comparable point: *no claim*). An experiment takes its best arm's verdict (reproduced > partly "
        f"> not; ties: the larger share, then the arm listed first), naming the arm. A seed **reproduces** when each "
        f"of its experiments with a claim does, **not** when none does even partly, else **partly**. The cause: "
        f"where reproduced, how many points agree; else the most common way the other points fall ("
        + "; ".join(CAUSES.values()) + "), with their folders.")


@dataclass(frozen=True)
class Outcome:
    """One cell: its agreement (atlas.same_direction), whether censored runs are in it, and its folders."""

    agreement: str
    censored: bool
    folders: tuple[str, ...]
    comparable: bool = True

    @property
    def cause(self) -> str:
        """The key into CAUSES of a cell that does not agree ("" when it agrees)."""
        if self.agreement == AGREE:
            return ""
        if self.agreement == NO_VERDICT and self.censored:
            return "censored"
        return self.agreement


@dataclass(frozen=True)
class Found:
    verdict: Verdict
    agree: int
    comparable: int
    cause: str  # a key of CAUSES, "" when reproduced or no claim
    folders: tuple[str, ...]  # the cells' folders behind the clause

    @property
    def share(self) -> Fraction:
        return Fraction(self.agree, self.comparable) if self.comparable else Fraction(0)

    def clause(self) -> str:
        where = ", ".join(f"`{f}/`" for f in self.folders)
        if self.verdict == "no claim":
            return "the seed states no result at these points"
        agreed = f"the seed's way at {self.agree} of {self.comparable} points"
        if self.verdict == "reproduced":
            return f"{agreed} ({where})"
        return f"{agreed}; the others mostly {CAUSES[self.cause]} ({where})"


def _ordered(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def dominant_cause(cells: Sequence[Outcome]) -> tuple[str, tuple[str, ...]]:
    """The most common cause among the cells that do not agree (ties in CAUSES order) and those cells' folders."""
    causes = Counter(c.cause for c in cells if c.comparable and c.cause)
    if not causes:
        return "", ()
    top = max(CAUSES, key=lambda k: (causes[k], -list(CAUSES).index(k)))
    return top, _ordered([f for c in cells if c.comparable and c.cause == top for f in c.folders])


def judge_arm(cells: Sequence[Outcome]) -> Found:
    """An arm's verdict over its cells by the rule above."""
    comp = [c for c in cells if c.comparable]
    agree = sum(1 for c in comp if c.agreement == AGREE)
    if not comp:
        return Found("no claim", 0, 0, "", _ordered([f for c in cells for f in c.folders]))
    verdict: Verdict = ("reproduced" if Fraction(agree, len(comp)) >= REPRODUCED_SHARE
                        else "partly" if agree else "not")
    if verdict == "reproduced":
        return Found(verdict, agree, len(comp), "",
                     _ordered([f for c in comp if c.agreement == AGREE for f in c.folders]))
    cause, folders = dominant_cause(comp)
    return Found(verdict, agree, len(comp), cause, folders)


def best_arm(arms: Sequence[tuple[str, Found]]) -> tuple[str, Found]:
    """An experiment's verdict: its best arm (reproduced > partly > not > no claim; then the larger share; then the
    first listed)."""
    if not arms:
        raise ValueError("an experiment without arms")
    return max(arms, key=lambda a: (_RANK[a[1].verdict], a[1].share, -arms.index(a)))


def judge_seed(experiments: Sequence[Found]) -> Verdict:
    """A seed's verdict from its experiments' verdicts."""
    claims = [f.verdict for f in experiments if f.verdict != "no claim"]
    if not claims:
        return "no claim"
    if all(v == "reproduced" for v in claims):
        return "reproduced"
    return "not" if all(v == "not" for v in claims) else "partly"
