"""A sweep from start (or resume) to report: folder, manifest, self-check, progress, runs, report."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from lab import config, lab, lock, signals, terminal
from lab.errors import QuiclabError
from lab.explain import folder as explain_folder
from lab.explain import tshark
from lab.link import calibrate, linkem, napi, shaper
from lab.link.model import Link
from lab.observe.push import Publisher
from lab.plan import shard
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan, points, timeout_for
from lab.plan.scenario import Scenario, runs_pair
from lab.results import store
from lab.results.report import build_report
from lab.results.schema import RunRecord
from lab.run import environment, runner, startup_cache
from lab.run.runner import Context


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_manifest(s: Scenario, preset: str | None, planned: int, folder: Path) -> dict[str, Any]:
    pts = points(s)
    return {
        "name": s.name, "preset": preset, "scenario": s.model_dump(), "seed": s.seed, "repeats": s.repeats,
        "planned_runs": planned, "points": [{"index": p.index, "label": p.label, "size_bytes": p.size}
                                            for p in pts],
        "x_name": pts[0].x_name if pts else "point", "log_y": s.log_y, "shaper_requested": s.shaper,
        "started_at": now(), "status": "running", "git": environment.git(folder), "host": environment.host(),
    }


def note_resume(folder: Path, manifest: dict[str, Any]) -> None:
    """A resume's time and the code that continues the sweep (a resume from another commit or a dirty tree is on
    record, its diff kept beside the manifest)."""
    manifest.setdefault("resumed_at", []).append(now())
    manifest.setdefault("resumed_git", []).append(
        environment.git(folder, diff_name=f"source-resume-{len(manifest['resumed_at'])}.diff"))


def cc_by_implementation(manifest: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """Congestion control per implementation, from the manifest (older manifests: curl and nginx only)."""
    impls = manifest.get("implementations")
    if impls:
        return {name: dict(doc.get("cc", {})) for name, doc in impls.items()}
    cc = manifest.get("congestion_control", {})
    return {"curl": {"tcp": cc.get("tcp client"), "quic": cc.get("quic client")},
            "nginx": {"tcp": cc.get("tcp server"), "quic": cc.get("quic server")}}


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


def _run_label(run: PlannedRun) -> str:
    return f"{run.point.label} {run.protocol.value} {run.client}→{run.server} #{run.repeat + 1}"


def execute(folder: Path, s: Scenario, manifest: dict[str, Any], todo: list[PlannedRun], done: int,
            total: int) -> bool:
    """Run `todo`; returns True when the sweep is complete, False when Ctrl-C stopped it. An environment failure
    stops the sweep too (EnvironmentFailure, raised after the manifest and the report are written)."""
    ctx = Context(sweep=s.name, shaper=manifest.get("shaper") or s.shaper, cc=cc_by_implementation(manifest),
                  timeout_for=lambda r: timeout_for(s, r.point), quic_cc=dict(s.client_quic_cc),
                  capture=tuple(s.capture), folder=folder, host_guard=manifest.get("host_guard", "flag"))
    finish = runner.Finish("interrupted")
    live = Publisher.for_sweep(s.name, total, manifest.get("x_name", "point"), manifest.get("shaper", ""))
    try:
        live.begin(store.load_runs(folder), todo, fresh=done == 0)
        finish = _run_with_progress(folder, s, ctx, live, todo, done, total)
    except KeyboardInterrupt:
        finish = runner.Finish("interrupted")
    finally:
        with signals.held_signals():  # the sweep's end is written whole, whatever arrives meanwhile
            ctx.sender.close()  # per-algorithm server instances stopped, server namespaces back to native
            live.finish(finish.outcome == "complete")
            if finish.outcome != "complete":
                runner.stop_everything()
            else:
                with contextlib.suppress(QuiclabError):
                    shaper.apply(Link())  # the lab is left unimpaired, as before the sweep
            status = {"complete": "complete", "interrupted": "interrupted", "environment": "stopped"}[finish.outcome]
            records = store.load_runs(folder)  # runs.csv as the sweep left it, read once here
            manifest.update(status=status, finished_at=now(),
                            completed_runs=len([r for r in records if store.is_result(r)]))
            if finish.error:
                manifest["stopped_by"] = finish.error
            store.write_manifest(folder, manifest)
            if finish.outcome == "complete":
                explained = explain_folder.after_sweep(folder, records, tshark.fields)
                if explained:
                    terminal.info(explained)
            build_report(folder)
    if finish.outcome == "environment":
        raise runner.EnvironmentFailure(f"the lab failed, the sweep stopped (the run was not recorded): "
                                        f"{finish.error}; fix the lab (`quiclab status`, `quiclab up`) and continue "
                                        f"with: quiclab sweep --resume {folder}")
    return finish.outcome == "complete"


def _run_with_progress(folder: Path, s: Scenario, ctx: Context, live: Publisher, todo: list[PlannedRun], done: int,
                       total: int) -> runner.Finish:
    failures, n_session, t_session = 0, 0, time.monotonic()
    log = store.RunLog(folder)
    aside = store.RunLog(folder, store.HOST_BOUND)
    ctx.host_bound_log = aside.append
    try:
        runner.warm_up(todo, ctx)  # (after runs.csv exists: a Ctrl-C here is one before the first run)
        with progress_bar() as progress:
            task = progress.add_task(s.name, total=total, completed=done, failures=0, eta=None)

            def on_start(run: PlannedRun) -> None:
                progress.update(task, description=f"{s.name}: {_run_label(run)}")

            def on_retry(run: PlannedRun, why: str) -> None:
                terminal.warning(f"{_run_label(run)}: {why}: running the run again (nothing was recorded)")

            def on_done(rec: RunRecord) -> None:
                nonlocal failures, n_session
                failures += rec.status not in ("ok", "unsupported")
                n_session += 1
                eta = (time.monotonic() - t_session) / n_session * (total - done - n_session)
                progress.update(task, advance=1, failures=failures, eta=eta)
                live.record(rec)

            return runner.run_all(todo, ctx, log, on_done, on_start, on_retry)
    finally:
        log.close()
        aside.close()


def resolve_shaper(s: Scenario) -> shaper.Choice:
    """One backend for the whole sweep (never netem at some points and linkem at others): `auto` picks netem only
    if it can emulate every point's link."""
    links = [p.link for p in points(s)] or [Link()]
    choices = [shaper.choose(s.shaper, link) for link in links]
    linkem_needed = [c for c in choices if c.backend == "linkem"]
    if linkem_needed and len(linkem_needed) < len(choices):
        return shaper.Choice("linkem", f"{linkem_needed[0].reason} at some points: linkem for every point, so the "
                                       "sweep has one emulator")
    return choices[0]


def start(s: Scenario, preset: str | None, results_dir: Path,
          part: shard.ShardSpec | None = None, host_guard: str = "flag") -> tuple[Path, bool]:
    with lock.holding():
        return _start(s, preset, results_dir, part, host_guard)


def resume(folder: Path) -> tuple[Path, bool]:
    with lock.holding():
        try:
            return _resume(folder)
        except KeyboardInterrupt:
            _mark_interrupted(folder)
            raise SweepInterrupted(folder) from None


def _mark_interrupted(folder: Path) -> None:
    """Ctrl-C outside the runs (start-up, resume bookkeeping): the folder says so, nothing runs on, the link is
    unimpaired."""
    with signals.held_signals():
        with contextlib.suppress(QuiclabError, OSError):
            manifest = store.read_manifest(folder).doc()  # the sweep's working copy
            manifest.update(status="interrupted", finished_at=now())
            store.write_manifest(folder, manifest)
        runner.stop_everything()


def _start(s: Scenario, preset: str | None, results_dir: Path, part: shard.ShardSpec | None,
           host_guard: str = "flag") -> tuple[Path, bool]:
    lab.require_up()
    lab.ensure_available(s.clients, s.servers)
    every = plan(s)
    runs = part.select(every) if part else every
    folder = store.new_folder(results_dir, shard.folder_name(s.name, part))
    manifest = new_manifest(s, preset, len(runs), folder)
    manifest.update(shard.manifest_fields(s, every, part))
    manifest["status"], manifest["host_guard"] = "starting", host_guard
    store.write_manifest(folder, manifest)  # a sweep folder from the start: resumable
    terminal.info(f"sweep {s.name}: {len(points(s))} points x {len(s.protocols)} protocols x "
                  f"{sum(runs_pair(s, c, v) for c in s.clients for v in s.servers)} client/server pairs x {s.repeats} "
                  f"repeats = {len(every)} runs{f' (shard {part}: {len(runs)} runs)' if part else ''} "
                  f"-> {folder.relative_to(config.ROOT) if folder.is_relative_to(config.ROOT) else folder}")
    try:
        _record_environment(folder, s, manifest)
        return folder, execute(folder, s, manifest, runs, 0, len(runs))
    except KeyboardInterrupt:
        _mark_interrupted(folder)
        raise SweepInterrupted(folder) from None


def _record_environment(folder: Path, s: Scenario, manifest: dict[str, Any]) -> None:
    """Versions, congestion control, the one shaper of the sweep and its self-check, into the manifest. Ctrl-C
    here leaves a resumable folder (the resume records them) and an unimpaired link."""
    try:
        manifest.update(environment_facts(s))
        manifest["status"] = "running"
    except KeyboardInterrupt:
        for key in ("versions", "shaper"):  # incomplete: the resume records the environment again
            manifest.pop(key, None)
        store.write_manifest(folder, manifest)
        raise
    store.write_manifest(folder, manifest)


def environment_facts(s: Scenario) -> dict[str, Any]:
    """What a sweep's manifest records about the lab it runs on (this process's lab): versions, congestion control,
    the one shaper of the sweep and its self-check, the forwarding, the calibration of the lab's own path."""
    with terminal.status("recording versions and checking the shaper"):
        choice = resolve_shaper(s)
        terminal.info(f"shaper: {choice.backend} ({choice.reason})")
        # how the router's kernel forwards what linkem writes (QUICLAB_LINKEM_NAPI), put in force and read back
        forwarding = napi.apply_setting().mode if choice.backend == "linkem" else "kernel (netem)"
        pts = points(s)
        first = pts[0].link if pts else None
        impls = [*s.clients, *s.servers]

        def measure() -> dict[str, Any]:
            return {"versions": environment.versions(),
                    "congestion_control": environment.congestion_control(),
                    "implementations": environment.implementations(impls, s.client_quic_cc),
                    "self_check": environment.self_check(first, choice.backend) if first else {}}

        parts = {"implementations": impls, "quic_cc": s.client_quic_cc, "backend": choice.backend,
                 "link": linkem.to_json(first) if first else None, "forwarding": forwarding}
        facts, provenance = startup_cache.cached(parts, measure)
        facts = dict(facts)
        facts["startup_cache"] = provenance
        facts["base_path"] = calibrate.manifest_facts()  # what the link subtracts for the lab's own path
        facts["shaper"], facts["shaper_reason"] = choice.backend, choice.reason
        facts["link_forwarding"] = forwarding
        facts["images"] = environment.images(impls)  # read now, never from the startup cache
        if provenance["reused"]:
            terminal.info(f"versions and shaper self-check: unchanged lab, reusing those measured at "
                          f"{provenance['measured_at']}")
    return facts


class SweepInterrupted(QuiclabError):
    """Ctrl-C (or SIGTERM) stopped the sweep cleanly: exit 130, with the command that continues it."""

    exit_code = 130

    def __init__(self, folder: Path) -> None:
        super().__init__(f"sweep interrupted; continue with: quiclab sweep --resume {folder}")


def _resume(folder: Path) -> tuple[Path, bool]:
    lab.require_up()
    manifest = store.read_manifest(folder).doc()  # the sweep's working copy
    s = validate(manifest["scenario"], str(folder / store.MANIFEST))
    lab.ensure_available(s.clients, s.servers)
    runs = shard.restrict(manifest, plan(s))  # a shard's folder holds its shard of the plan
    kept = store.completed_runs(store.load_runs(folder, report_torn=True), {r.key for r in runs})
    store.rewrite_runs(folder, list(kept.values()))
    todo = [r for r in runs if r.key not in kept]
    terminal.info(f"resuming {s.name}: {len(kept)} runs done, {len(todo)} to go")
    manifest["status"] = "running"
    manifest.pop("stopped_by", None)
    note_resume(folder, manifest)
    store.write_manifest(folder, manifest)
    if "versions" not in manifest or "shaper" not in manifest:  # interrupted before they were recorded
        _record_environment(folder, s, manifest)
    return folder, execute(folder, s, manifest, todo, len(kept), len(runs))
