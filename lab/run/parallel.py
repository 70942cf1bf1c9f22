"""Parallel labs on one host: `quiclab sweep ... --parallel N` runs one plan over N lab instances.

The sweep's own lab (QUICLAB_INSTANCE, the default lab unless set) starts measuring at once; N-1 more labs
(lab/instance.py: their own router, link, endpoints, networks) are brought up beside it meanwhile, each joining
when it is ready, and are taken down at the end (also after Ctrl-C or a failure). Each lab is driven by a worker
process (`quiclab sweep-worker FOLDER`, with QUICLAB_INSTANCE set): it records its lab's facts, then runs the
units the coordinator hands it one at a time, and the plan's shuffled order is served to whichever lab is free first:
randomized across labs, and no lab idles while another has a backlog. A unit is a (point, repeat) group, so the
protocols of a sweep's paired comparison (one link seed) run on one lab; a group of more than UNIT_RUNS runs (a stack
matrix's ~94 pairs and baselines at one seed) is dealt in near-equal chunks of its shuffled runs instead, because 5
such groups over 4 labs leave the fifth on one lab alone while the others idle. A chunk's runs keep their
group's link seed, so the pairing (lab/stats/verdict.py: partners on the same seed) holds across labs, whose
software and link are identical; each run records its `lab_instance`. The worker sends each finished record back; the
coordinator writes the one ordinary sweep folder (runs.csv, every run tagged with its `lab_instance`; the
manifest lists each lab's facts). A group a lab could not finish (its lab failed, Ctrl-C) is not recorded and goes
back to the queue. Every run passes the fidelity guard (lab/run/hostload.py), so a host that became the
bottleneck never silently changes a result.

`--parallel auto` picks N = min(2 x cores, cores x AUTO_BUDGET_BPS / the plan's highest link rate, the plan's
units), at least 1 (an unlimited rate: 1): the emulator's and endpoints' CPU cost grows with the rate, so slow
links share a core well and fast ones do not. N then drops to the fewest labs that finish the units in as many
rounds (`fewest_for_rounds`): 5 units on 4 labs would leave the fifth alone on one lab, and 3 labs take as long
with less load on the host. The budget, 50 Mbit/s per core, is measured: the survey-delay preset
(33.6 MB at 40 Mbit/s, nginx 1.26 HTTP/3 and HTTP/1.1) on 4 labs of this 2-core host had 33 of its 35 HTTP/3 runs
flagged host-bound (QUIC ~10 % slower), on 2 labs none (2026-11-24; results/reference/survey-delay). At most
min(MAX_LABS, 4 x cores) labs run on one host.

The labs' threads, their bring-up, tear-down and Ctrl-C (`over_labs`), the choice of lab numbers (`pick_labs`) and
`auto`'s rule (`auto_for`) serve other work over parallel labs too: the calibration benchmark's links
(lab/bench/calibration.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from lab import config, docker, instance, lab, lock, optional, signals
from lab.endpoints.registry import registry
from lab.errors import QuiclabError, UsageError
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan
from lab.plan.scenario import Scenario
from lab.results import store
from lab.results.folder import Environment
from lab.results.schema import from_row, to_row
from lab.run import runner
from lab.run.lab_session import Callbacks, LabSession, close_lab, measure

MAX_LABS = instance.MAX_INSTANCE + 1
#: A (point, repeat) group larger than this is dealt to the labs in chunks (`units`); a sweep's usual groups (a few
#: protocols, clients and servers) are far smaller and stay whole.
UNIT_RUNS = 24
AUTO_BUDGET_BPS = 50e6  # emulated link rate per core that `auto` plans for (see the docstring)
UP_TIMEOUT_S = 600.0  # an extra lab's bring-up (images are built: containers, health checks)
ALLOWED = "a number of labs 1..{top} (this host: at most 4 per core) or auto"


def host_limit(cores: int | None = None) -> int:
    return max(1, min(MAX_LABS, 4 * (cores or os.cpu_count() or 1)))


def parse(text: str) -> int | None:
    """`--parallel N|auto` -> N, or None for auto; bad values are one line naming them (exit 2)."""
    top = host_limit()
    value = text.strip().lower()
    if value == "auto":
        return None
    if not value.isdigit() or not 1 <= int(value) <= top:
        raise UsageError(f"invalid --parallel {text!r}: allowed is {ALLOWED.format(top=top)}")
    return int(value)


def auto(runs: list[PlannedRun], cores: int | None = None) -> int:
    """The number of labs `--parallel auto` uses for these runs (the rule is in the module's docstring)."""
    return auto_for([r.link().downlink.effective_rate_bps for r in runs], len(units(runs)), cores)


def units(runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """What one lab takes whole, in the plan's shuffled order (of each unit's first run), each unit's runs in plan
    order: the (point, repeat) groups, a group of more than UNIT_RUNS runs in near-equal chunks of consecutive runs
    (the module's docstring says why)."""
    by: dict[tuple[int, int], list[PlannedRun]] = {}
    for r in sorted(runs, key=lambda r: r.order):
        by.setdefault((r.point.index, r.repeat), []).append(r)
    out: list[list[PlannedRun]] = []
    for group in by.values():
        parts = -(-len(group) // UNIT_RUNS)
        size, extra = divmod(len(group), parts)
        start = 0
        for k in range(parts):
            end = start + size + (1 if k < extra else 0)
            out.append(group[start:end])
            start = end
    return sorted(out, key=lambda u: u[0].order)


def auto_for(rates: Sequence[float | None], units: int, cores: int | None = None) -> int:
    """`--parallel auto`'s rule for any work spread over labs: the links' rates (None: unlimited) and the number of
    units a lab takes whole (a sweep's `units`, a benchmark's links)."""
    cores = cores or os.cpu_count() or 1
    if not rates or any(rate is None for rate in rates):
        return 1
    top = max(rate for rate in rates if rate is not None)
    by_rate = int(cores * AUTO_BUDGET_BPS // top) if top else 1
    labs = max(1, min(2 * cores, by_rate, units, host_limit(cores)))
    return fewest_for_rounds(units, labs)


def fewest_for_rounds(count: int, labs: int) -> int:
    """The fewest labs that take `count` whole units in as many rounds as `labs` do: 5 units on 4 labs take two
    rounds (the fifth alone on one lab), and so do 3 labs, which load the host less meanwhile (fewer runs flagged
    host-bound, the same wall time)."""
    if count <= 0 or labs <= 1:
        return max(1, labs)
    rounds = -(-count // labs)
    return -(-count // rounds)


def labs_in_use() -> set[int]:
    """Lab numbers with any container on this host (another user's lab, a lab left up)."""
    names = docker.container_names("quiclab")
    used = set()
    for n in range(MAX_LABS):
        prefix = instance.Instance(n).project + "-"
        if any(name.startswith(prefix) and (n or not name[len(prefix):][:1].isdigit()) for name in names):
            used.add(n)
    return used


def pick_labs(n: int, given: Sequence[int] = ()) -> list[int]:
    """This process's lab first, then the labs `given` (up already, e.g. a benchmark's hidden lab), then free lab
    numbers up to n; exit 2 when the host has not that many free, and LabBusy (one line) when this process's own
    lab is held by another command: said before any lab is brought up, not as a worker's error mid-sweep (the
    sweep's other labs would carry it alone)."""
    own = config.INSTANCE.number
    if (who := lock.holder()) is not None:
        raise lock.LabBusy(f"{lock.busy_message(who)}; or run this sweep from another lab "
                           f"({config.ENV_INSTANCE}=N, N free: not in {sorted(labs_in_use())})")
    given = [k for k in dict.fromkeys(given) if k != own]
    free = [k for k in range(MAX_LABS) if k != own and k not in given and k not in labs_in_use()]
    if len(free) < n - 1 - len(given):
        raise UsageError(f"invalid --parallel {n}: only {len(free) + 1 + len(given)} labs can run here now (lab "
                         f"numbers in use: {sorted(labs_in_use())}; lab numbers are 0..{MAX_LABS - 1})")
    return [own, *given, *free[: max(0, n - 1 - len(given))]]


def lab_env(k: int) -> dict[str, str]:
    # every lab gets this process's settings (forwarding, tag, ...); Grafana only for the sweep's own lab
    env = {**os.environ, config.ENV_INSTANCE: instance.Instance(k).tag}
    if k != config.INSTANCE.number:
        env[config.ENV_GRAFANA] = "off"
    return env


def quiclab_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "lab", *args]


# --- the worker: one per lab --------------------------------------------------------------------------------------

class _Channel:
    """The worker's line protocol to the coordinator on the stdout it was started with (everything else the worker
    prints goes to stderr, its log)."""

    def __init__(self) -> None:
        self._out: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        self._lock = threading.Lock()

    def send(self, **msg: Any) -> None:
        with self._lock:
            self._out.write(json.dumps(msg, default=str) + "\n")
            self._out.flush()


def _parts(s: Scenario) -> tuple[str, ...]:
    """The optional parts of the lab (lab/optional.py) the scenario's implementations need."""
    reg = registry()
    return optional.needed([reg.client(c).container for c in s.clients] + [reg.server(v).container for v in s.servers])


def worker(folder: Path) -> int:
    """`quiclab sweep-worker FOLDER`: drive this process's lab for the parallel sweep in FOLDER (a LabSession, as a
    sweep on one lab does in-process). Reads run keys (one JSON list per line) on stdin, answers on stdout; exits 0
    at end of input, 130 when stopped, 2 when its lab failed."""
    channel = _Channel()
    signals.terminate_as_interrupt()  # the coordinator stops a worker with SIGTERM (SIGINT may be ignored)
    manifest = store.read_manifest(folder)
    s = validate(manifest.scenario, str(folder / store.MANIFEST))
    by_key = {r.key: r for r in plan(s)}
    outcome: runner.Outcome = "complete"
    calls = Callbacks(record=lambda rec: channel.send(record=to_row(rec)),
                      aside=lambda rec: channel.send(host_bound=to_row(rec)),
                      retry=lambda label, why: channel.send(retry={"run": label, "why": why}))
    session: LabSession | None = None
    try:
        with lock.holding():
            try:
                lab.require_up(tuple(p for p in _parts(s) if p not in optional.ON_DEMAND))
                lab.ensure_available(s.clients, s.servers)  # an on-demand part: started here if it is not yet
                session = LabSession(s, folder, measure(s), manifest.host_guard or "repeat", calls)
                session.warm_up(list(by_key.values()))
                channel.send(ready=session.facts.model_dump(mode="json", exclude_unset=True))
                for line in sys.stdin:
                    finish = session.run([by_key[k] for k in json.loads(line)])
                    channel.send(finish=finish.outcome, error=finish.error)
                    if finish.outcome != "complete":
                        outcome = finish.outcome
                        break
            except BaseException:
                outcome = "interrupted"  # (or the lab failed: either way nothing is left running)
                raise
            finally:
                with signals.held_signals():
                    if session is not None:
                        session.close(outcome == "complete")
                    elif outcome != "complete":
                        close_lab(complete=False)
    except KeyboardInterrupt:
        channel.send(finish="interrupted", error="")
        return 130
    except QuiclabError as e:
        channel.send(finish="environment", error=str(e))
        return 2
    return {"complete": 0, "interrupted": 130}.get(outcome, 2)


# --- the coordinator ---------------------------------------------------------------------------------------------

@dataclass
class LabSlot:
    number: int
    logs: Path
    proc: subprocess.Popen[str] | None = None
    up: subprocess.Popen[bytes] | None = None  # its `quiclab up` while it comes up
    facts: dict[str, Any] | None = None
    error: str = ""
    runs: int = 0
    joined_s: float | None = None  # when it took its first group (s after the sweep's start)
    down: bool = False  # taken down (an extra lab, as soon as it had no more work)
    down_problem: str = ""


@dataclass
class _Shared:
    queue: deque[list[str]]
    calls: Callbacks  # the sweep's (records to runs.csv, its progress and live push): called from the labs' threads
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0  # units handed to a lab and not yet finished
    parts: tuple[str, ...] = ()  # the optional parts of the lab the plan needs (extra labs start only those)
    #: a sweep run until decided: the next round's runs, asked for once the queue is empty and nothing is in flight
    #: (every group of the round recorded); None once it had none
    more: Callable[[], list[PlannedRun]] | None = None
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def take(self) -> list[str] | None:
        """The next unit; with `more`, waits while a round is still in flight, then asks for the next round."""
        with self.changed:
            while True:
                if self.stopping.is_set():
                    return None
                if self.queue:
                    self.in_flight += 1
                    return self.queue.popleft()
                if self.more is None:
                    return None
                if self.in_flight == 0:
                    batch = self.more()
                    if not batch:
                        self.more = None
                    self.queue.extend(_queue(batch))
                    continue
                self.changed.wait(timeout=0.5)

    def settle(self, unfinished: list[str]) -> None:
        """A unit handed out is over: finished, or (what was not recorded) back to the queue's front."""
        with self.changed:
            self.in_flight -= 1
            if unfinished:
                self.queue.appendleft(unfinished)
            self.changed.notify_all()

    @property
    def drained(self) -> bool:
        """Nothing left to hand out, nothing in flight and no round to come: labs still coming up get no work."""
        with self.lock:
            return not self.queue and self.in_flight == 0 and self.more is None


class Pool(Protocol):
    """What the labs' threads share (over_labs): a sweep's queue of units (_Shared), or another user's work (the
    calibration benchmark's links, lab/bench/calibration.py)."""

    stopping: threading.Event  # set on Ctrl-C: no lab takes more work
    parts: tuple[str, ...]  # the optional parts of the lab the work needs (an extra lab starts only those)

    @property
    def drained(self) -> bool:
        """Nothing left to hand out or in flight: a lab still coming up gets no work."""
        ...


def _bring_up(lab_: LabSlot, shared: Pool) -> bool:
    """`quiclab up` of an extra lab; given up (killed; the tear-down removes what it made) once no work is left."""
    with (lab_.logs / f"lab{lab_.number}-up.log").open("w") as log:
        lab_.up = subprocess.Popen(quiclab_argv("up", "--parts", ",".join(shared.parts) or "none"),
                                   env=lab_env(lab_.number),
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    deadline = time.monotonic() + config.deadline(UP_TIMEOUT_S)
    while lab_.up.poll() is None:
        if shared.stopping.is_set() or shared.drained or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(lab_.up.pid, signal.SIGTERM)
            lab_.up.wait()
            if time.monotonic() > deadline:
                lab_.error = f"`quiclab up` of lab {lab_.number} did not finish within {UP_TIMEOUT_S:g} s"
            return False
        time.sleep(0.2)
    if lab_.up.returncode != 0:
        lab_.error = f"lab {lab_.number} did not come up (see {lab_.logs.name}/lab{lab_.number}-up.log)"
        return False
    return True


def _drive(lab_: LabSlot, shared: Pool, work: Callable[[LabSlot], None], bring_up: bool) -> None:
    """One lab's thread: bring it up if needed, then its work (unless none is left); an extra lab is taken down as
    soon as its work is over (while the others finish theirs)."""
    try:
        if bring_up and (shared.stopping.is_set() or not _bring_up(lab_, shared)):
            return
        if shared.stopping.is_set() or shared.drained:
            return
        work(lab_)
    finally:
        if bring_up and not shared.stopping.is_set():
            problems = _take_down([lab_])
            lab_.down, lab_.down_problem = True, "; ".join(problems)


def over_labs(labs: list[LabSlot], shared: Pool, work: Callable[[LabSlot], None],
              up: Collection[int]) -> tuple[bool, list[str]]:
    """work(lab) on every lab at once, each in its thread; the labs not in `up` are brought up first (given up once
    no work is left) and taken down as soon as their work is over, and in any case before this returns. A lab's
    work runs its lab's process as `lab.proc` (started in a new session). Ctrl-C (or SIGTERM): `shared.stopping`
    is set, every lab's process gets SIGTERM (its own clean-up runs), the threads are joined. Returns (interrupted,
    the tear-down's problems)."""
    threads = [threading.Thread(target=_drive, args=(lab_, shared, work, lab_.number not in up), daemon=True)
               for lab_ in labs]
    interrupted = False
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        interrupted = True
        with signals.held_signals():
            shared.stopping.set()
            _stop_workers(labs)
            for t in threads:
                t.join(timeout=config.deadline(120))
    finally:
        with signals.held_signals():  # every lab brought up here is taken down, whatever arrives meanwhile
            problems = _take_down([lab_ for lab_ in labs if lab_.number not in up and not lab_.down])
            problems += [lab_.down_problem for lab_ in labs if lab_.down_problem]
    return interrupted, problems


def _work(lab_: LabSlot, folder: Path, shared: _Shared, t0: float) -> None:
    """A sweep's lab: start its worker, feed it units until the queue is empty."""
    with (lab_.logs / f"lab{lab_.number}-worker.log").open("w") as log:
        proc = subprocess.Popen(quiclab_argv("sweep-worker", str(folder)), env=lab_env(lab_.number),
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    lab_.proc = proc
    assert proc.stdin is not None and proc.stdout is not None
    pending: list[str] | None = None
    try:
        first = _read(proc.stdout)
        if "ready" not in first:
            lab_.error = first.get("error") or f"lab {lab_.number}'s worker ended before it was ready"
            return
        lab_.facts = first["ready"]
        while (keys := shared.take()) is not None:
            lab_.joined_s = lab_.joined_s if lab_.joined_s is not None else time.monotonic() - t0
            pending = list(keys)
            proc.stdin.write(json.dumps(keys) + "\n")
            proc.stdin.flush()
            while True:
                msg = _read(proc.stdout)
                if "record" in msg:
                    rec = from_row(msg["record"])
                    pending.remove(rec.run_key)
                    lab_.runs += 1
                    shared.calls.record(rec)
                elif "host_bound" in msg:
                    shared.calls.aside(from_row(msg["host_bound"]))
                elif "retry" in msg:
                    shared.calls.retry(f"lab {lab_.number}: {msg['retry']['run']}", msg["retry"]["why"])
                else:  # finish (or the worker is gone)
                    break
            if msg.get("finish") != "complete":
                lab_.error = msg.get("error") or ("" if msg.get("finish") == "interrupted"
                                                  else f"lab {lab_.number}'s worker ended unexpectedly")
                return
            shared.settle([])
            pending = None
    except (BrokenPipeError, OSError) as e:
        lab_.error = lab_.error or f"lab {lab_.number}'s worker: {e}"
    finally:
        if pending is not None:
            shared.settle(pending)  # not recorded: another lab (or a resume) runs them
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=config.deadline(60))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _queue(todo: list[PlannedRun]) -> deque[list[str]]:
    """The plan's units (`units`) as run keys, in its shuffled order."""
    return deque([r.key for r in unit] for unit in units(todo))


def _read(stream: IO[str]) -> dict[str, Any]:
    line = stream.readline()
    if not line:
        return {"finish": "gone"}
    try:
        return json.loads(line)
    except ValueError:
        return {"finish": "gone", "error": f"unreadable worker output: {line[:120]!r}"}


def _stop_workers(labs: list[LabSlot]) -> None:
    for lab_ in labs:
        if lab_.proc is not None and lab_.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(lab_.proc.pid, signal.SIGTERM)


def _take_down(labs: list[LabSlot]) -> list[str]:
    """`quiclab down` of the labs this sweep brought up, side by side; returns what failed (one line each)."""
    procs = [(lab_, subprocess.Popen(quiclab_argv("down"), env=lab_env(lab_.number),
                                     stdin=subprocess.DEVNULL,
                                     stdout=(lab_.logs / f"lab{lab_.number}-down.log").open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)) for lab_ in labs]
    failed = []
    for lab_, p in procs:
        try:
            if p.wait(timeout=config.deadline(300)) != 0:
                failed.append(f"lab {lab_.number}: `quiclab down` failed (see lab{lab_.number}-down.log)")
        except subprocess.TimeoutExpired:
            p.kill()
            failed.append(f"lab {lab_.number}: `quiclab down` did not finish")
    return failed


def check_count(count: int, runs: list[PlannedRun]) -> None:
    """No more labs than units (`units`): exit 2 naming the limit."""
    top = len(units(runs))
    if count > top:
        raise UsageError(f"invalid --parallel {count}: the plan has {top} units a lab runs whole ((point, repeat) "
                         f"groups; a larger group in chunks of at most {UNIT_RUNS} runs), so at most {top} labs")


@dataclass
class Result:
    """What the labs did, for the sweep's finish (lab/run/sweep.py)."""

    outcome: runner.Outcome
    error: str  # the labs' errors, one per lab ("" when none)
    own: Environment | None  # the facts of the sweep's own lab (the first lab that reported them)
    labs: dict[str, Any]  # per lab: {runs, joined_s, error, facts} (the manifest's Labs section)
    teardown_problems: list[str]


def run(folder: Path, s: Scenario, todo: list[PlannedRun], numbers: list[int], calls: Callbacks,
        more: Callable[[], list[PlannedRun]] | None = None) -> Result:
    """Run `todo` over the labs `numbers` (the first this process's own, up; the others brought up here and taken
    down as soon as they have no more work, and in any case before this returns); with `more` (a sweep run until
    decided), then its rounds as each one is recorded whole. Ctrl-C (or SIGTERM): the workers are stopped, the
    outcome is "interrupted"; a group not finished is not recorded."""
    logs = folder / "labs"
    logs.mkdir(exist_ok=True)
    labs = [LabSlot(k, logs) for k in numbers]
    shared = _Shared(_queue(todo), calls, parts=_parts(s), more=more)
    t0 = time.monotonic()
    interrupted, problems = over_labs(labs, shared, lambda lab_: _work(lab_, folder, shared, t0), {numbers[0]})
    errors = [f"lab {lab_.number}: {lab_.error}" for lab_ in labs if lab_.error]
    left = sum(len(g) for g in shared.queue)
    outcome: runner.Outcome = "interrupted" if interrupted else "environment" if left else "complete"
    error = (f"{left} runs not done: {'; '.join(errors) or 'no lab was left to run them'}" if outcome == "environment"
             else "; ".join(errors) if outcome != "complete" else "")
    own = next((lab_.facts for lab_ in labs if lab_.facts), None)
    return Result(outcome, error, Environment.model_validate(own) if own else None,
                  {str(lab_.number): {"runs": lab_.runs, "joined_s": lab_.joined_s, "error": lab_.error,
                                      "facts": lab_.facts} for lab_ in labs}, problems)
