"""A sweep from start (or resume) to finish, on one lab or on parallel labs: the one lifecycle.

    start / resume     the folder and its manifest (the Sweep section once; End and, parallel, Labs), the runs to do
    run                one lab: a LabSession in this process (lab/run/lab_session.py), its facts recorded first;
                       N labs: lab/run/parallel.py's coordinator, each lab a LabSession in its worker. Both get the
                       same callbacks: each record to runs.csv, the progress bar and the live push; a sweep run
                       until decided (--until-verdict) runs in rounds (lab/run/rounds.py), each from runs.csv
    finish             one `finally`, whatever ended the sweep (complete, Ctrl-C/SIGTERM, the lab's failure, a bug):
                       the End section (status, stop reason, tear-down problems), the labs' facts, the explanations
                       of a complete sweep, the report

The manifest is written by sections (lab/results/folder.py), each whole, all through `_Book.put` here."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from lab import config, lab, lock, signals, terminal
from lab.errors import EnvironmentFailure, QuiclabError
from lab.explain import folder as explain_folder
from lab.explain import tshark
from lab.observe.push import Publisher
from lab.plan import shard
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan, points
from lab.plan.scenario import Scenario, runs_pair
from lab.report.report import build_report
from lab.results import store
from lab.results.folder import End, Environment, Labs, Manifest, Section, Sweep
from lab.results.schema import RunRecord
from lab.run import environment, parallel, runner
from lab.run.lab_session import Callbacks, LabSession, close_lab, measure, run_label
from lab.run.rounds import Rounds, drive
from lab.stats import until


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class SweepInterrupted(QuiclabError):
    """Ctrl-C (or SIGTERM) stopped the sweep cleanly: exit 130, with the command that continues it."""

    exit_code = 130

    def __init__(self, folder: Path) -> None:
        super().__init__(f"sweep interrupted; continue with: {resume_command(folder)}")


def resume_command(folder: Path) -> str:
    """The command that continues the sweep in `folder`: `quiclab matrix --resume` for a stack matrix's (its
    scenario has a matrix link; that command takes no other folder), else `quiclab sweep --resume`."""
    try:
        data = store.read_manifest(folder, required=False).scenario
    except QuiclabError:
        data = None
    matrix = isinstance(data, dict) and bool(data.get("matrix"))
    return f"quiclab {'matrix' if matrix else 'sweep'} --resume {folder}"


# --- the manifest, by sections ----------------------------------------------------------------------------------

@dataclass
class _Book:
    """The sweep's manifest as this process keeps it: each section replaced whole, the file rewritten at once."""

    folder: Path
    manifest: Manifest = field(default_factory=Manifest)

    def put(self, *sections: Section) -> None:
        for section in sections:
            self.manifest.put(section)
        store.write_manifest(self.folder, self.manifest)

    @property
    def end(self) -> End:
        return self.manifest.section(End)


def _sweep_section(s: Scenario, preset: str | None, every: list[PlannedRun], part: shard.ShardSpec | None,
                   folder: Path, host_guard: str) -> Sweep:
    pts = points(s)
    mine = part.select(every) if part else every
    return Sweep(name=s.name, preset=preset, scenario=s.model_dump(), seed=s.seed, repeats=s.repeats,
                 planned_runs=len(mine), points=[{"index": p.index, "label": p.label, "size_bytes": p.size}
                                                 for p in pts],
                 x_name=pts[0].x_name if pts else "point", log_y=s.log_y, shaper_requested=s.shaper,
                 started_at=now(), git=environment.git(folder), host=environment.host(),
                 **shard.manifest_fields(s, every, part), host_guard=host_guard)


def _resumed(book: _Book) -> End:
    """The End section of a resumed sweep: running again, this resume's time and the code that continues the sweep
    (a resume from another commit or a dirty tree is on record, its diff kept beside the manifest)."""
    end = book.end
    at = [*(end.resumed_at or []), now()]
    code = environment.git(book.folder, diff_name=f"source-resume-{len(at)}.diff")
    return End(status="running", resumed_at=at, resumed_git=[*(end.resumed_git or []), code])


# --- start and resume -------------------------------------------------------------------------------------------

def start(s: Scenario, preset: str | None, results_dir: Path, *, part: shard.ShardSpec | None = None,
          labs: int | None = 1, host_guard: str = "flag", rule: until.Rule | None = None) -> tuple[Path, bool]:
    """A new sweep on this process's lab (`labs` 1), or over `labs` labs (None: parallel.auto). Returns the folder
    and True (complete); Ctrl-C: SweepInterrupted, the lab's failure: EnvironmentFailure, both after the finish.
    With a `rule` (--until-verdict; the scenario's repeats are its most) the runs go in rounds until decided."""
    every = plan(s)
    runs = part.select(every) if part else every
    count = 1 if labs == 1 else labs if labs is not None else parallel.auto(every)
    if labs != 1:
        parallel.check_count(count, every)
    with _holding(labs == 1):
        lab.require_up()
        lab.ensure_available(s.clients, s.servers)
        numbers = parallel.pick_labs(count) if labs != 1 else []
        folder = store.new_folder(results_dir, shard.folder_name(s.name, part))
        book = _Book(folder)
        sections: list[Section] = [_sweep_section(s, preset, every, part, folder, host_guard), End(status="starting")]
        if numbers:
            sections.append(Labs(parallel={"labs": count, "instances": numbers, "auto": labs is None}))
        book.put(*sections)  # a sweep folder from the start: resumable
        rounds = Rounds(folder, runs, rule, book.put) if rule is not None else None
        where = folder.relative_to(config.ROOT) if folder.is_relative_to(config.ROOT) else folder
        if numbers:
            terminal.info(f"sweep {s.name}: {len(every)} runs in {len(parallel.units(every))} units over "
                          f"{count} labs ({', '.join(f'lab {k}' for k in numbers)}"
                          f"{'; --parallel auto' if labs is None else ''}) -> {where}")
        else:
            methods = sum(runs_pair(s, c, v, p) for p in s.protocols for c in s.clients for v in s.servers)
            terminal.info(f"sweep {s.name}: {len(points(s))} points x {methods} methods (protocol, client, "
                          "server) x "
                          f"{'at most ' if rule else ''}{s.repeats} repeats = {len(every)} runs"
                          f"{' at most' if rule else ''}"
                          f"{f' (shard {part}: {len(runs)} runs)' if part else ''} -> {where}")
        if rounds is not None:
            terminal.info(_until_line(rounds.rule))
        return folder, _run(book, s, lambda: (rounds.next() if rounds else runs, 0), numbers, rounds)


def resume(folder: Path) -> tuple[Path, bool]:
    """Continue the sweep in `folder` (its own scenario, shard and number of labs): the runs not yet recorded."""
    book = _Book(folder, store.read_manifest(folder))  # the sweep's working copy
    m = book.manifest
    s = validate(m.scenario, str(folder / store.MANIFEST))
    with _holding(m.parallel is None):
        lab.require_up()
        lab.ensure_available(s.clients, s.servers)
        mine = shard.restrict(m.doc(), plan(s))  # a shard's folder holds its shard of the plan
        numbers: list[int] = []
        rule = until.Rule.model_validate((m.until_verdict or {}).get("rule")) if m.until_verdict else None
        rounds = Rounds(folder, mine, rule, book.put) if rule is not None else None

        def begin() -> tuple[list[PlannedRun], int]:
            nonlocal numbers
            kept = store.completed_runs(store.load_runs(folder, report_torn=True), {r.key for r in mine})
            store.rewrite_runs(folder, list(kept.values()))
            todo = rounds.next() if rounds else [r for r in mine if r.key not in kept]
            sections: list[Section] = [_resumed(book)]
            if m.parallel is not None:
                # (a sweep run until decided: as many labs as it started with; later rounds may be larger)
                count = (int(m.parallel["labs"]) if rounds
                         else min(int(m.parallel["labs"]), max(1, len(parallel.units(todo)))))
                numbers = parallel.pick_labs(count)
                sections.append(Labs(parallel={**m.parallel, "instances": numbers}))
            book.put(*sections)
            terminal.info(f"resuming {s.name}: {len(kept)} runs done, {len(todo)} to go"
                          f"{' in this round' if rounds else ''}{f', over {len(numbers)} labs' if numbers else ''}")
            return todo, len(kept)

        return folder, _run(book, s, begin, lambda: numbers, rounds)


def _until_line(rule: until.Rule) -> str:
    lv = until.levels(rule)
    return (f"until decided against {rule.baseline}: a look after every round (one repeat of each open point), "
            f"a verdict possible from {lv.first_look} pairs on, at most {rule.max_repeats} repeats; each error at "
            f"most {rule.alpha:g} per comparison (spent {lv.spent:.3g}), margin \u00b1{rule.margin * 100:g} %")


@contextlib.contextmanager
def _holding(one_lab: bool) -> Iterator[None]:
    """The lab lock for a sweep on this process's lab (parallel labs: each worker holds its own lab's)."""
    with lock.holding() if one_lab else contextlib.nullcontext():
        yield


# --- the run and the one finish ---------------------------------------------------------------------------------

def _run(book: _Book, s: Scenario, begin: Callable[[], tuple[list[PlannedRun], int]],
         labs: list[int] | Callable[[], list[int]], rounds: Rounds | None = None) -> bool:
    """begin() -> (the runs to do, the runs already done; with `rounds`, the first round's); then the runs on one
    lab or on `labs` (with `rounds`, round after round); then the finish. Returns True (complete), or raises
    SweepInterrupted or EnvironmentFailure once the folder says so."""
    folder, total = book.folder, int(book.manifest.planned_runs or 0)
    finish = runner.Finish("interrupted")  # anything that ends the sweep before it says otherwise
    result: parallel.Result | None = None
    logs: list[store.RunLog] = []
    live: Publisher | None = None
    t0 = time.monotonic()
    try:
        with signals.terminate_interrupts():  # SIGTERM stops the sweep as Ctrl-C does, at any moment of it
            todo, done = begin()
            numbers = labs() if callable(labs) else labs
            facts = None if numbers else _facts(book, s)
            log, aside = store.RunLog(folder), store.RunLog(folder, store.HOST_BOUND)
            logs = [log, aside]
            live = Publisher.for_sweep(s.name, total, book.manifest.x_name or "point",
                                       (facts.shaper or "") if facts else "")
            live.begin(store.load_runs(folder), todo, fresh=done == 0)
            with progress_bar() as bar:
                calls = _Progress(bar, s.name, f" ({len(numbers)} labs)" if numbers else "", total, done, log, aside,
                                  live).callbacks(per_run=not numbers)
                if numbers:
                    result = parallel.run(folder, s, todo, numbers, calls, more=rounds.next if rounds else None)
                    finish = runner.Finish(result.outcome, result.error)
                else:
                    assert facts is not None
                    finish = _one_lab(s, book, facts, todo, calls, rounds)
    except KeyboardInterrupt:
        finish = runner.Finish("interrupted")
    finally:
        with signals.held_signals():  # the sweep's end is written whole, whatever arrives meanwhile
            for log_ in logs:
                log_.close()
            _finish(book, finish, result, time.monotonic() - t0, rounds)
            if live is not None:
                with contextlib.suppress(Exception):
                    live.finish(finish.outcome == "complete")
    for problem in result.teardown_problems if result else []:
        terminal.warning(problem)
    if finish.outcome == "interrupted":
        raise SweepInterrupted(folder)
    if finish.outcome == "environment":
        raise EnvironmentFailure(f"the lab failed, the sweep stopped (the run was not recorded): {finish.error}; "
                                 f"fix the lab (`quiclab status`, `quiclab up`) and continue with: "
                                 f"{resume_command(folder)}")
    return True


def _facts(book: _Book, s: Scenario) -> Environment:
    """This lab's facts: as the manifest has them, else measured now and written (Ctrl-C meanwhile: not written,
    the resume measures them)."""
    m = book.manifest
    if m.versions is not None and m.shaper is not None:
        facts = m.section(Environment)
        book.put(book.end.model_copy(update={"status": "running"}))
        return facts
    try:
        facts = measure(s)
    except BaseException:  # (the self-check may have set a link)
        with signals.held_signals():
            close_lab(complete=False)
        raise
    book.put(facts, book.end.model_copy(update={"status": "running"}))
    return facts


def _one_lab(s: Scenario, book: _Book, facts: Environment, todo: list[PlannedRun], calls: Callbacks,
            rounds: Rounds | None = None) -> runner.Finish:
    """The runs on this process's lab (a LabSession here, as each worker of parallel labs has its own); with
    `rounds`, round after round."""
    session = LabSession(s, book.folder, facts, book.manifest.host_guard or "flag", calls)
    finish = runner.Finish("interrupted")
    try:
        session.warm_up(todo)  # (after runs.csv exists: a Ctrl-C here is one before the first run)
        finish = drive(todo, rounds.next if rounds else None, session.run)
        return finish
    finally:
        with signals.held_signals():
            session.close(finish.outcome == "complete")


def _finish(book: _Book, finish: runner.Finish, result: parallel.Result | None, wall_s: float,
            rounds: Rounds | None = None) -> None:
    """The one end of every sweep: the manifest's End (and a parallel sweep's Labs and its own lab's facts; a sweep
    run until decided, its points' states from runs.csv as it is now), the explanations of a complete sweep, the
    report (when runs.csv exists: not for a sweep stopped in its start-up)."""
    folder = book.folder
    records = store.load_runs(folder)  # runs.csv as the sweep left it, read once here
    status = {"complete": "complete", "interrupted": "interrupted", "environment": "stopped"}[finish.outcome]
    end = book.end
    sections: list[Section] = [End(
        status=status, **({"resumed_at": end.resumed_at, "resumed_git": end.resumed_git} if end.resumed_at else {}),
        finished_at=now(), wall_s=round(wall_s, 1), completed_runs=len([r for r in records if store.is_result(r)]),
        **({"stopped_by": finish.error} if finish.error and finish.outcome != "complete" else {}),
        **({"teardown_problems": result.teardown_problems} if result and result.teardown_problems else {}))]
    if rounds is not None:
        sections.append(rounds.section(records))
    if result is not None:
        sections.append(Labs(parallel=book.manifest.parallel, labs=result.labs))
        if result.own is not None:
            sections.append(result.own)
    book.put(*sections)
    if finish.outcome == "complete":
        explained = explain_folder.after_sweep(folder, records, tshark.fields)
        if explained:
            terminal.info(explained)
    if (folder / store.RUNS).exists():
        build_report(folder)


# --- progress: the callbacks handed down -------------------------------------------------------------------------

class _Eta(ProgressColumn):
    """Time left from the mean wall time of the runs finished so far in this session (rich's own estimate uses a
    30 s speed window, which is empty while runs take longer than that)."""

    def render(self, task: Task) -> Text:
        eta = task.fields.get("eta")
        return Text(f"ETA {dt.timedelta(seconds=round(eta))}" if eta is not None else "ETA -:--:--",
                    style="progress.remaining")


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TextColumn("failures {task.fields[failures]}"), TimeElapsedColumn(), _Eta(),
                    console=terminal.err, transient=False)


class _Progress:
    """A finished run to runs.csv, the bar and the live push; an attempt set aside to host-bound.csv; a retry said.
    Called from the run loop (one lab) or from the labs' threads (parallel): one at a time."""

    def __init__(self, bar: Progress, name: str, suffix: str, total: int, done: int, log: store.RunLog,
                 aside: store.RunLog, live: Publisher) -> None:
        self.bar, self.name, self.total, self.done = bar, name, total, done
        self.task = bar.add_task(f"{name}{suffix}", total=total, completed=done, failures=0, eta=None)
        self.log, self.aside, self.live = log, aside, live
        self.failures, self.finished, self.t0 = 0, 0, time.monotonic()
        self.lock = threading.Lock()

    def record(self, rec: RunRecord) -> None:
        with self.lock:
            self.log.append(rec)
            self.failures += rec.status not in ("ok", "unsupported")
            self.finished += 1
            eta = (time.monotonic() - self.t0) / self.finished * (self.total - self.done - self.finished)
            self.bar.update(self.task, advance=1, failures=self.failures, eta=eta)
            with contextlib.suppress(Exception):
                self.live.record(rec)

    def set_aside(self, rec: RunRecord) -> None:
        with self.lock:
            self.aside.append(rec)

    def started(self, run: PlannedRun) -> None:
        self.bar.update(self.task, description=f"{self.name}: {run_label(run)}")

    @staticmethod
    def retry(label: str, why: str) -> None:
        terminal.warning(f"{label}: {why}: running the run again (nothing was recorded)")

    def callbacks(self, per_run: bool) -> Callbacks:
        return Callbacks(record=self.record, aside=self.set_aside, retry=self.retry,
                         **({"start": self.started} if per_run else {}))
