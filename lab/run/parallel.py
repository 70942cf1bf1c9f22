"""Parallel labs on one host: `quiclab sweep ... --parallel N` runs one plan over N lab instances.

The sweep's own lab (QUICLAB_INSTANCE, the default lab unless set) starts measuring at once; N-1 more labs
(lab/instance.py: their own router, link, endpoints, networks) are brought up beside it meanwhile, each joining
when it is ready, and are taken down at the end (also after Ctrl-C or a failure). Each lab is driven by a worker
process (`quiclab sweep-worker FOLDER`, with QUICLAB_INSTANCE set): it records its lab's facts, then runs the
(point, repeat) groups the coordinator hands it one at a time, so a group's protocols (paired by one link seed)
always run on one lab, and the plan's shuffled order is served to whichever lab is free first: randomized
across labs, and no lab idles while another has a backlog. The worker sends each finished record back; the
coordinator writes the one ordinary sweep folder (runs.csv, every run tagged with its `lab_instance`; the
manifest lists each lab's facts). A group a lab could not finish (its lab failed, Ctrl-C) is not recorded and goes
back to the queue. Every run passes the fidelity guard (lab/run/hostload.py), so a host that became the
bottleneck never silently changes a result.

`--parallel auto` picks N = min(2 x cores, cores x AUTO_BUDGET_BPS / the plan's highest link rate, the plan's
groups), at least 1 (an unlimited rate: 1): the emulator's and endpoints' CPU cost grows with the rate, so slow
links share a core well and fast ones do not. The budget, 50 Mbit/s per core, is measured: the survey-delay preset
(33.6 MB at 40 Mbit/s, nginx 1.26 HTTP/3 and HTTP/1.1) on 4 labs of this 2-core host had 33 of its 35 HTTP/3 runs
flagged host-bound (QUIC ~10 % slower), on 2 labs none (2026-11-24; results/reference/survey-delay). At most
min(MAX_LABS, 4 x cores) labs run on one host."""

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lab import config, docker, instance, lab, lock, optional, signals, terminal
from lab.endpoints.registry import registry
from lab.errors import QuiclabError, UsageError
from lab.explain import folder as explain_folder
from lab.explain import tshark
from lab.link import shaper
from lab.link.model import Link
from lab.observe.push import Publisher
from lab.plan import shard
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, groups, plan, timeout_for
from lab.plan.scenario import Scenario
from lab.results import store
from lab.results.report import build_report
from lab.results.schema import RunRecord, from_row, to_row
from lab.run import runner, session

MAX_LABS = instance.MAX_INSTANCE + 1
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
    cores = cores or os.cpu_count() or 1
    rates = [r.link().downlink.effective_rate_bps for r in runs]
    if not runs or any(rate is None for rate in rates):
        return 1
    top = max(rate for rate in rates if rate is not None)
    by_rate = int(cores * AUTO_BUDGET_BPS // top) if top else 1
    return max(1, min(2 * cores, by_rate, len(groups(runs)), host_limit(cores)))


def labs_in_use() -> set[int]:
    """Lab numbers with any container on this host (another user's lab, a lab left up)."""
    names = docker.container_names("quiclab")
    used = set()
    for n in range(MAX_LABS):
        prefix = instance.Instance(n).project + "-"
        if any(name.startswith(prefix) and (n or not name[len(prefix):][:1].isdigit()) for name in names):
            used.add(n)
    return used


def pick_labs(n: int) -> list[int]:
    """This process's lab first, then n-1 free lab numbers; exit 2 when the host has not that many free."""
    own = config.INSTANCE.number
    free = [k for k in range(MAX_LABS) if k != own and k not in labs_in_use()]
    if len(free) < n - 1:
        raise UsageError(f"invalid --parallel {n}: only {len(free) + 1} labs can run here now (lab numbers in use: "
                         f"{sorted(labs_in_use())}; lab numbers are 0..{MAX_LABS - 1})")
    return [own, *free[: n - 1]]


def _env(k: int) -> dict[str, str]:
    # every lab gets this process's settings (forwarding, tag, ...); Grafana only for the sweep's own lab
    env = {**os.environ, config.ENV_INSTANCE: instance.Instance(k).tag}
    if k != config.INSTANCE.number:
        env[config.ENV_GRAFANA] = "off"
    return env


def _quiclab(*args: str) -> list[str]:
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


class _SentLog:
    """runner.run_all's RunLog: a finished record goes to the coordinator, which writes runs.csv."""

    def __init__(self, channel: _Channel, kind: str) -> None:
        self.channel, self.kind = channel, kind

    def append(self, rec: RunRecord) -> None:
        self.channel.send(**{self.kind: to_row(rec)})


def _parts(s: Scenario) -> tuple[str, ...]:
    """The optional parts of the lab (lab/optional.py) the scenario's implementations need."""
    reg = registry()
    return optional.needed([reg.client(c).container for c in s.clients] + [reg.server(v).container for v in s.servers])


def worker(folder: Path) -> int:
    """`quiclab sweep-worker FOLDER`: drive this process's lab for the parallel sweep in FOLDER. Reads run keys
    (one JSON list per line) on stdin, answers on stdout; exits 0 at end of input, 130 when stopped, 2 when its lab
    failed."""
    channel = _Channel()
    signals.terminate_as_interrupt()  # the coordinator stops a worker with SIGTERM (SIGINT may be ignored)
    manifest = store.read_manifest(folder)
    s = validate(manifest.scenario, str(folder / store.MANIFEST))
    by_key = {r.key: r for r in plan(s)}
    outcome = "complete"
    try:
        with lock.holding():
            lab.require_up(tuple(p for p in _parts(s) if p not in optional.ON_DEMAND))
            lab.ensure_available(s.clients, s.servers)  # an on-demand part: started here if it is not yet
            facts = session.environment_facts(s)
            ctx = runner.Context(sweep=s.name, shaper=facts["shaper"], cc=session.cc_by_implementation(facts),
                                 timeout_for=lambda r: timeout_for(s, r.point), quic_cc=dict(s.client_quic_cc),
                                 capture=tuple(s.capture), folder=folder,
                                 host_guard=manifest.host_guard or "repeat",
                                 host_bound_log=_SentLog(channel, "host_bound").append)
            runner.warm_up(list(by_key.values()), ctx)
            channel.send(ready=facts)
            log = _SentLog(channel, "record")
            try:
                for line in sys.stdin:
                    keys = json.loads(line)
                    finish = runner.run_all([by_key[k] for k in keys], ctx, log, lambda _rec: None,
                                            on_retry=lambda run, why: channel.send(retry=f"{run.key}: {why}"))
                    channel.send(finish=finish.outcome, error=finish.error)
                    if finish.outcome != "complete":
                        outcome = finish.outcome
                        break
            finally:
                with signals.held_signals():
                    ctx.sender.close()
                    if outcome == "complete":
                        with contextlib.suppress(QuiclabError):
                            shaper.apply(Link())
                    else:
                        runner.stop_everything()
    except KeyboardInterrupt:
        with signals.held_signals():
            runner.stop_everything()
        channel.send(finish="interrupted", error="")
        return 130
    except QuiclabError as e:
        channel.send(finish="environment", error=str(e))
        return 2
    return {"complete": 0, "interrupted": 130}.get(outcome, 2)


# --- the coordinator ---------------------------------------------------------------------------------------------

@dataclass
class _Lab:
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
    record: Callable[[RunRecord], None]
    aside: Callable[[RunRecord], None]
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0  # groups handed to a lab and not yet finished
    parts: tuple[str, ...] = ()  # the optional parts of the lab the plan needs (extra labs start only those)

    def take(self) -> list[str] | None:
        with self.lock:
            if self.stopping.is_set() or not self.queue:
                return None
            self.in_flight += 1
            return self.queue.popleft()

    def settle(self, unfinished: list[str]) -> None:
        """A group handed out is over: finished, or (what was not recorded) back to the queue's front."""
        with self.lock:
            self.in_flight -= 1
            if unfinished:
                self.queue.appendleft(unfinished)

    @property
    def drained(self) -> bool:
        """Nothing left to hand out and nothing in flight: labs still coming up will get no work."""
        with self.lock:
            return not self.queue and self.in_flight == 0


def _bring_up(lab_: _Lab, shared: _Shared) -> bool:
    """`quiclab up` of an extra lab; given up (killed; the tear-down removes what it made) once no work is left."""
    with (lab_.logs / f"lab{lab_.number}-up.log").open("w") as log:
        lab_.up = subprocess.Popen(_quiclab("up", "--parts", ",".join(shared.parts) or "none"), env=_env(lab_.number),
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    deadline = time.monotonic() + UP_TIMEOUT_S
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


def _drive(lab_: _Lab, folder: Path, shared: _Shared, t0: float, bring_up: bool) -> None:
    """One lab's thread: bring it up if needed, start its worker, feed it groups until the queue is empty; an
    extra lab is taken down as soon as it has no more work (while the others finish theirs)."""
    try:
        _work(lab_, folder, shared, t0, bring_up)
    finally:
        if bring_up and not shared.stopping.is_set():
            problems = _take_down([lab_])
            lab_.down, lab_.down_problem = True, "; ".join(problems)


def _work(lab_: _Lab, folder: Path, shared: _Shared, t0: float, bring_up: bool) -> None:
    if bring_up and (shared.stopping.is_set() or not _bring_up(lab_, shared)):
        return
    if shared.stopping.is_set() or shared.drained:
        return
    with (lab_.logs / f"lab{lab_.number}-worker.log").open("w") as log:
        proc = subprocess.Popen(_quiclab("sweep-worker", str(folder)), env=_env(lab_.number), stdin=subprocess.PIPE,
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
                    shared.record(rec)
                elif "host_bound" in msg:
                    shared.aside(from_row(msg["host_bound"]))
                elif "retry" in msg:
                    terminal.warning(f"lab {lab_.number}: {msg['retry']}: running the run again (nothing was "
                                     "recorded)")
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
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _queue(todo: list[PlannedRun]) -> deque[list[str]]:
    """The (point, repeat) groups in the plan's shuffled order (of each group's first run), each group's runs in
    plan order: a lab runs a whole group, so the protocols compared at one link seed share a lab."""
    by: dict[tuple[int, int], list[str]] = {}
    for r in sorted(todo, key=lambda r: r.order):
        by.setdefault((r.point.index, r.repeat), []).append(r.key)
    return deque(by.values())


def _read(stream: IO[str]) -> dict[str, Any]:
    line = stream.readline()
    if not line:
        return {"finish": "gone"}
    try:
        return json.loads(line)
    except ValueError:
        return {"finish": "gone", "error": f"unreadable worker output: {line[:120]!r}"}


def _stop_workers(labs: list[_Lab]) -> None:
    for lab_ in labs:
        if lab_.proc is not None and lab_.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(lab_.proc.pid, signal.SIGTERM)


def _take_down(labs: list[_Lab]) -> list[str]:
    """`quiclab down` of the labs this sweep brought up, side by side; returns what failed (one line each)."""
    procs = [(lab_, subprocess.Popen(_quiclab("down"), env=_env(lab_.number), stdin=subprocess.DEVNULL,
                                     stdout=(lab_.logs / f"lab{lab_.number}-down.log").open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)) for lab_ in labs]
    failed = []
    for lab_, p in procs:
        try:
            if p.wait(timeout=300) != 0:
                failed.append(f"lab {lab_.number}: `quiclab down` failed (see lab{lab_.number}-down.log)")
        except subprocess.TimeoutExpired:
            p.kill()
            failed.append(f"lab {lab_.number}: `quiclab down` did not finish")
    return failed


def start(s: Scenario, preset: str | None, results_dir: Path, n: int | None, host_guard: str) -> tuple[Path, bool]:
    """A new sweep over n labs (None: auto). Ctrl-C (or SIGTERM) ends it cleanly: session.SweepInterrupted."""
    every = plan(s)
    count = n if n is not None else auto(every)
    if count > len(groups(every)):
        raise UsageError(f"invalid --parallel {count}: the plan has {len(groups(every))} (point, repeat) groups, so "
                         f"at most {len(groups(every))} labs")
    lab.require_up()
    lab.ensure_available(s.clients, s.servers)
    numbers = pick_labs(count)
    folder = store.new_folder(results_dir, s.name)
    manifest = session.new_manifest(s, preset, len(every), folder)
    manifest.update(shard.manifest_fields(s, every, None))
    manifest.update(status="starting", host_guard=host_guard,
                    parallel={"labs": count, "instances": numbers, "auto": n is None})
    store.write_manifest(folder, manifest)
    terminal.info(f"sweep {s.name}: {len(every)} runs in {len(groups(every))} (point, repeat) groups over {count} "
                  f"labs ({', '.join(f'lab {k}' for k in numbers)}{'; --parallel auto' if n is None else ''}) -> "
                  f"{folder}")
    return folder, _interruptible(folder, lambda: _run(folder, s, manifest, every, 0))


def _interruptible(folder: Path, body: Callable[[], bool]) -> bool:
    try:
        with signals.terminate_interrupts():
            return body()
    except KeyboardInterrupt:
        raise session.SweepInterrupted(folder) from None


def resume(folder: Path) -> tuple[Path, bool]:
    manifest = store.read_manifest(folder).doc()  # the sweep's working copy
    s = validate(manifest["scenario"], str(folder / store.MANIFEST))
    every = plan(s)
    kept = store.completed_runs(store.load_runs(folder, report_torn=True), {r.key for r in every})
    store.rewrite_runs(folder, list(kept.values()))
    todo = [r for r in every if r.key not in kept]
    lab.require_up()
    lab.ensure_available(s.clients, s.servers)
    count = min(int(manifest["parallel"]["labs"]), max(1, len(groups(todo))))
    manifest["parallel"]["instances"] = pick_labs(count)
    manifest.update(status="running")
    manifest.pop("stopped_by", None)
    session.note_resume(folder, manifest)
    terminal.info(f"resuming {s.name}: {len(kept)} runs done, {len(todo)} to go, over {count} labs")
    return folder, _interruptible(folder, lambda: _run(folder, s, manifest, todo, len(kept)))


def _run(folder: Path, s: Scenario, manifest: dict[str, Any], todo: list[PlannedRun], done: int) -> bool:
    total = int(manifest["planned_runs"])
    logs = folder / "labs"
    logs.mkdir(exist_ok=True)
    numbers = list(manifest["parallel"]["instances"])
    labs = [_Lab(k, logs) for k in numbers]
    queue = _queue(todo)
    log, aside = store.RunLog(folder), store.RunLog(folder, store.HOST_BOUND)
    live = Publisher.for_sweep(s.name, total, manifest.get("x_name", "point"), "")
    failures = 0
    t0 = time.monotonic()
    interrupted = False
    with session.progress_bar() as progress:
        task = progress.add_task(f"{s.name} ({len(labs)} labs)", total=total, completed=done, failures=0, eta=None)
        write = threading.Lock()

        def record(rec: RunRecord) -> None:
            nonlocal failures
            with write:
                log.append(rec)
                failures += rec.status not in ("ok", "unsupported")
                finished = progress.tasks[0].completed + 1 - done
                eta = (time.monotonic() - t0) / finished * (total - done - finished)
                progress.update(task, advance=1, failures=failures, eta=eta)
                with contextlib.suppress(Exception):
                    live.record(rec)

        def set_aside(rec: RunRecord) -> None:
            with write:
                aside.append(rec)

        shared = _Shared(queue, record, set_aside, parts=_parts(s))
        threads = [threading.Thread(target=_drive, args=(lab_, folder, shared, t0, i > 0), daemon=True)
                   for i, lab_ in enumerate(labs)]
        try:
            live.begin(store.load_runs(folder), todo, fresh=done == 0)
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
                    t.join(timeout=120)
        finally:
            with signals.held_signals():  # the sweep's end is written whole, whatever arrives (or fails) meanwhile
                log.close()
                aside.close()
                down_problems = _take_down([lab_ for lab_ in labs[1:] if not lab_.down])
                down_problems += [lab_.down_problem for lab_ in labs if lab_.down_problem]
                left = [k for g in queue for k in g]
                complete = not left and not interrupted
                errors = _finalize(folder, manifest, labs, complete, interrupted, down_problems, t0)
                with contextlib.suppress(Exception):
                    live.finish(complete)
    for problem in down_problems:
        terminal.warning(problem)
    if interrupted:
        raise KeyboardInterrupt
    if left:
        raise runner.EnvironmentFailure(
            f"{len(left)} runs not done: {'; '.join(errors) or 'no lab was left to run them'}; fix the lab "
            f"(`quiclab status`) and continue with: quiclab sweep --resume {folder}")
    return complete


def _finalize(folder: Path, manifest: dict[str, Any], labs: list[_Lab], complete: bool, interrupted: bool,
              down_problems: list[str], t0: float) -> list[str]:
    """The sweep's manifest (each lab's facts and share, the end state) and its report; returns the labs' errors."""
    errors = [f"lab {lab_.number}: {lab_.error}" for lab_ in labs if lab_.error]
    own = labs[0].facts or next((lab_.facts for lab_ in labs if lab_.facts), None) or {}
    manifest.update(own)
    manifest["labs"] = {str(lab_.number): {"runs": lab_.runs, "joined_s": lab_.joined_s, "error": lab_.error,
                                           "facts": lab_.facts} for lab_ in labs}
    records = store.load_runs(folder)  # runs.csv as the sweep left it, read once here
    manifest.update(status="complete" if complete else "interrupted" if interrupted else "stopped",
                    finished_at=session.now(), wall_s=round(time.monotonic() - t0, 1),
                    completed_runs=len([r for r in records if store.is_result(r)]))
    if errors and not complete:
        manifest["stopped_by"] = "; ".join(errors)
    if down_problems:
        manifest["teardown_problems"] = down_problems
    store.write_manifest(folder, manifest)
    if complete:
        explained = explain_folder.after_sweep(folder, records, tshark.fields)
        if explained:
            terminal.info(explained)
    build_report(folder)
    return errors
