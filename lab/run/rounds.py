"""The rounds of a sweep run until decided (`quiclab sweep --until-verdict BASELINE`): after each round the points'
states are read from runs.csv (what is on disk, so a resume continues where the rounds stood), the manifest's
UntilVerdict section is written, and the next round's runs are handed out: one repeat of every open point, in the
plan's shuffled order. The rule itself is lab/stats/until.py's (pure); the sweep's lifecycle (lab/run/sweep.py)
runs each round on one lab (`drive`) or feeds them to parallel labs as they drain (lab/run/parallel.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from lab.plan.plan import PlannedRun
from lab.results import store
from lab.results.folder import UntilVerdict
from lab.results.schema import RunRecord
from lab.run import runner
from lab.stats import until


class Rounds:
    """The rounds over `runs` (the plan with the most repeats) in `folder`; `put` writes the manifest section."""

    def __init__(self, folder: Path, runs: Sequence[PlannedRun], rule: until.Rule,
                 put: Callable[[UntilVerdict], None]) -> None:
        self.folder, self.rule, self.put = folder, rule, put
        self.by_key = {r.key: r for r in runs}
        self.slots = until.slots_of([(r.key, r.point.index, r.repeat) for r in runs])
        self.labels = {r.point.index: r.point.label for r in runs}

    def state(self, records: Sequence[RunRecord] | None = None) -> list[until.PointState]:
        records = store.load_runs(self.folder) if records is None else records
        return until.states(self.slots, self.labels, records, self.rule)

    def section(self, records: Sequence[RunRecord] | None = None) -> UntilVerdict:
        """The manifest's section from the records (runs.csv when not given)."""
        doc = until.record(self.rule, self.state(records)).model_dump(mode="json")
        return UntilVerdict(until_verdict=doc)

    def next(self) -> list[PlannedRun]:
        """The next round's runs in plan order (empty: every point has stopped), the section written first."""
        records = store.load_runs(self.folder)
        pts = self.state(records)
        self.put(UntilVerdict(until_verdict=until.record(self.rule, pts).model_dump(mode="json")))
        keys = until.next_round(self.slots, pts, records)
        return sorted((self.by_key[k] for k in keys), key=lambda r: r.order)


def drive(todo: list[PlannedRun], more: Callable[[], list[PlannedRun]] | None,
          run: Callable[[list[PlannedRun]], runner.Finish]) -> runner.Finish:
    """`todo`, then (a sweep run until decided) round after round from `more` until it has none: each batch to
    `run` (one lab's session), stopping at the first batch that did not finish."""
    finish = run(todo)
    while more is not None and finish.outcome == "complete" and (todo := more()):
        finish = run(todo)
    return finish
