"""Which lab does what next in the calibration benchmark (`quiclab bench calibrate`, lab/bench/calibration.py), and
where an interrupted benchmark stands (its folder): pure, no lab, no threads.

Every hidden link is two jobs: `hidden` (a lab puts the link in force and measures it as a user would) and then
`calibrate` (another lab calibrates from those files and runs the held-out sender on the fitted link). The one rule
that keeps the calibration blind: a link is never calibrated on the lab that measured its hidden side. With one
lab for each role (`--parallel 1`: the hidden lab only measures, this lab only calibrates) the two roles overlap in
time; with N labs every lab does both, hidden sides first (each about a minute), so that the calibrations (each
about a quarter of an hour) spread over the labs.

A lab asks `next(lab)`: a job, WAIT (nothing for it now, but a job in flight elsewhere may give it one), or None
(nothing left it could ever do: its thread ends and an extra lab is taken down). A job ends with `finished(job, lab,
ok)`: ok records it (a hidden side measured, a link scored); not ok (the lab failed) returns the job and takes that
lab out of the schedule. An interrupted job is neither: the caller stops asking.

On disk (from_folder), per link `link-N/`: `hidden/` exists only when complete (written under a partial name and
renamed at its end), with `done.json` naming the lab that measured it; `score.json` exists only when the link is
scored (written whole, then renamed). Anything partial (`*.partial*`) is removed on resume and measured again: a
half-measured link is never recorded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Kind = Literal["hidden", "calibrate"]
WAIT: Literal["wait"] = "wait"
HIDDEN_DIR = "hidden"
DONE = "done.json"
SCORE = "score.json"
PARTIAL = ".partial"


@dataclass(frozen=True)
class Job:
    kind: Kind
    link: int


@dataclass
class Schedule:
    links: list[int]  # the link indices, in order
    labs: list[int]  # every lab taking part
    hidden_on: Collection[int] | None = None  # labs that may measure hidden sides (None: every lab)
    calibrate_on: Collection[int] | None = None  # labs that may calibrate (None: every lab)
    measured: dict[int, int] = field(default_factory=dict)  # link -> the lab that measured its hidden side
    scored: set[int] = field(default_factory=set)
    running: dict[int, tuple[Job, int]] = field(default_factory=dict)  # link -> (its job, the lab running it)
    gone: set[int] = field(default_factory=set)  # labs that failed: no more work for them

    def _holds(self, lab: int) -> bool:
        return lab not in self.gone and (self.hidden_on is None or lab in self.hidden_on)

    def _calibrates(self, lab: int, hidden_lab: int) -> bool:
        return lab not in self.gone and lab != hidden_lab and (self.calibrate_on is None or lab in self.calibrate_on)

    def next(self, lab: int) -> Job | Literal["wait"] | None:
        """The next job for `lab` (marked running on it), WAIT, or None (see the module's docstring). Hidden sides
        first, each in link order."""
        if lab in self.gone:
            return None
        for i in self.links:
            if i not in self.measured and i not in self.running and self._holds(lab):
                return self._start(Job("hidden", i), lab)
        for i in self.links:
            if i in self.measured and i not in self.scored and i not in self.running \
                    and self._calibrates(lab, self.measured[i]):
                return self._start(Job("calibrate", i), lab)
        return WAIT if any(self._may_come(lab, i) for i in self.left) else None

    def _may_come(self, lab: int, i: int) -> bool:
        """Whether link i, not scored, may yet give `lab` a job."""
        alive = [k for k in self.labs if k not in self.gone]
        if i in self.running:
            job, at = self.running[i]
            if job.kind == "hidden":  # measured there (then calibrated elsewhere), or back here if `at` fails
                return self._calibrates(lab, at) or self._holds(lab)
            return self._calibrates(lab, self.measured[i])  # back to the queue if its lab fails
        if i in self.measured:
            return self._calibrates(lab, self.measured[i])
        return any(self._holds(k) and self._calibrates(lab, k) for k in alive if k != lab)

    def _start(self, job: Job, lab: int) -> Job:
        self.running[job.link] = (job, lab)
        return job

    def finished(self, job: Job, lab: int, ok: bool) -> None:
        """A job is over: recorded (ok), or the lab failed: the job goes back, the lab leaves."""
        self.running.pop(job.link, None)
        if not ok:
            self.gone.add(lab)
        elif job.kind == "hidden":
            self.measured[job.link] = lab
        else:
            self.scored.add(job.link)

    def interrupted(self, job: Job) -> None:
        """A job stopped by Ctrl-C: not recorded, not the lab's failure (a resume runs it again)."""
        self.running.pop(job.link, None)

    @property
    def left(self) -> list[int]:
        """The links not scored yet."""
        return [i for i in self.links if i not in self.scored]

    @property
    def drained(self) -> bool:
        """Nothing left to hand out and nothing in flight."""
        return not self.running and all(self.next_free(k) is None for k in self.labs)

    def next_free(self, lab: int) -> Job | None:
        """The job `lab` would get now, without starting it (None: none now)."""
        probe = Schedule(self.links, self.labs, self.hidden_on, self.calibrate_on, dict(self.measured),
                         set(self.scored), dict(self.running), set(self.gone))
        got = probe.next(lab)
        return got if isinstance(got, Job) else None


def roles(labs: Sequence[int], hidden_lab: int, both: bool) -> tuple[Collection[int] | None,
                                                                    Collection[int] | None]:
    """(hidden_on, calibrate_on): every lab does both (`both`), or the hidden lab only measures and the others only
    calibrate (`--parallel 1`)."""
    if both:
        return None, None
    return {hidden_lab}, {k for k in labs if k != hidden_lab}


def link_dir(out: Path, i: int) -> Path:
    return out / f"link-{i}"


def partial(final: Path, tag: str) -> Path:
    """Where a job writes before its result is complete: renamed to `final` at its end."""
    return final.with_name(f"{final.name}{PARTIAL}-{tag}")


def from_folder(out: Path, links: Sequence[int], labs: Sequence[int], hidden_on: Collection[int] | None,
                calibrate_on: Collection[int] | None) -> Schedule:
    """The schedule of a benchmark folder as an interrupted run left it: complete hidden sides and scores kept,
    anything partial removed (it runs again)."""
    s = Schedule(list(links), list(labs), hidden_on, calibrate_on)
    for i in links:
        d = link_dir(out, i)
        if not d.is_dir():
            continue
        for p in d.glob(f"*{PARTIAL}-*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        done = d / HIDDEN_DIR / DONE
        if done.is_file():
            s.measured[i] = int(json.loads(done.read_text())["lab"])
        elif (d / HIDDEN_DIR).exists():  # (a hidden side without its record: not complete)
            shutil.rmtree(d / HIDDEN_DIR)
        if (d / SCORE).is_file() and i in s.measured:
            s.scored.add(i)
    return s
