"""A sweep from start (or resume) to report: folder, manifest, self-check, progress, runs, report."""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from lab import config, lab, terminal
from lab.errors import QuiclabError
from lab.link import shaper
from lab.link.model import Link
from lab.observe.push import Publisher
from lab.results.report import build_report
from lab.results.schema import RunRecord
from lab.sweep import environment, shard, store
from lab.sweep.plan import PlannedRun, plan, points, timeout_for
from lab.sweep.runner import Context, run_all, stop_everything
from lab.sweep.scenario import Scenario, validate


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _manifest(s: Scenario, preset: str | None, planned: int) -> dict[str, Any]:
    pts = points(s)
    return {
        "name": s.name, "preset": preset, "scenario": s.model_dump(), "seed": s.seed, "repeats": s.repeats,
        "planned_runs": planned, "points": [{"index": p.index, "label": p.label, "size_bytes": p.size}
                                            for p in pts],
        "x_name": pts[0].x_name if pts else "point", "log_y": s.log_y, "shaper_requested": s.shaper,
        "started_at": _now(), "status": "running", "git": environment.git(), "host": environment.host(),
    }


def _cc(manifest: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """Congestion control per implementation, from the manifest (older manifests: curl and nginx only)."""
    impls = manifest.get("implementations")
    if impls:
        return {name: dict(doc.get("cc", {})) for name, doc in impls.items()}
    cc = manifest.get("congestion_control", {})
    return {"curl": {"tcp": cc.get("tcp client"), "quic": cc.get("quic client")},
            "nginx": {"tcp": cc.get("tcp server"), "quic": cc.get("quic server")}}


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}", justify="left"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("failures {task.fields[failures]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=terminal.err, transient=False)


def execute(folder: Path, s: Scenario, manifest: dict[str, Any], todo: list[PlannedRun], done: int,
            total: int) -> bool:
    ctx = Context(sweep=s.name, shaper=s.shaper, cc=_cc(manifest), timeout_for=lambda r: timeout_for(s, r.point),
                  quic_cc=dict(s.quic_cc), capture=tuple(s.capture), folder=folder)
    failures, complete = 0, False
    live = Publisher.for_sweep(s.name, total, manifest.get("x_name", "point"), manifest.get("shaper", ""))
    live.begin(store.load_runs(folder), todo, fresh=done == 0)
    log = store.RunLog(folder)
    try:
        with _progress() as progress:
            task = progress.add_task(s.name, total=total, completed=done, failures=0)

            def on_done(rec: RunRecord) -> None:
                nonlocal failures
                failures += rec.status not in ("ok", "unsupported")
                progress.update(task, advance=1 if rec.status != "interrupted" else 0, failures=failures,
                                description=f"{s.name}: {rec.point_label} {rec.protocol}")
                live.record(rec)

            complete = run_all(todo, ctx, log, on_done)
    finally:
        log.close()
        live.finish(complete)
    if not complete:
        stop_everything()
    else:
        with contextlib.suppress(QuiclabError):
            shaper.apply(Link())  # the lab is left unimpaired, as before the sweep
    manifest.update(status="complete" if complete else "interrupted", finished_at=_now(),
                    completed_runs=len([r for r in store.load_runs(folder) if r.status != "interrupted"]))
    store.write_json_atomic(folder / store.MANIFEST, manifest)
    build_report(folder)
    return complete


def start(s: Scenario, preset: str | None, results_dir: Path,
          part: shard.ShardSpec | None = None) -> tuple[Path, bool]:
    lab.require_up()
    every = plan(s)
    runs = part.select(every) if part else every
    folder = store.new_folder(results_dir, shard.folder_name(s.name, part))
    manifest = _manifest(s, preset, len(runs))
    manifest.update(shard.manifest_fields(s, every, part))
    terminal.info(f"sweep {s.name}: {len(points(s))} points x {len(s.protocols)} protocols x "
                  f"{len(s.clients) * len(s.servers)} client/server pairs x {s.repeats} repeats = {len(every)} runs"
                  f"{f' (shard {part}: {len(runs)} runs)' if part else ''} "
                  f"-> {folder.relative_to(config.ROOT) if folder.is_relative_to(config.ROOT) else folder}")
    with terminal.status("recording versions and checking the shaper"):
        manifest["versions"] = environment.versions()
        manifest["congestion_control"] = environment.congestion_control()
        manifest["implementations"] = environment.implementations([*s.clients, *s.servers], s.quic_cc)
        first = runs and min(runs, key=lambda r: r.point.index)
        choice = shaper.choose(s.shaper, first.point.link if first else Link())
        terminal.info(f"shaper: {choice.backend} ({choice.reason})")
        manifest["shaper"] = choice.backend
        manifest["self_check"] = environment.self_check(first.point.link, s.shaper) if first else {}
    store.write_json_atomic(folder / store.MANIFEST, manifest)
    return folder, execute(folder, s, manifest, runs, 0, len(runs))


def resume(folder: Path) -> tuple[Path, bool]:
    lab.require_up()
    manifest = store.read_manifest(folder)
    s = validate(manifest["scenario"], str(folder / store.MANIFEST))
    runs = shard.restrict(manifest, plan(s))  # a shard's folder holds its shard of the plan
    kept = store.completed_runs(store.load_runs(folder), {r.key for r in runs})
    store.rewrite_runs(folder, list(kept.values()))
    todo = [r for r in runs if r.key not in kept]
    terminal.info(f"resuming {s.name}: {len(kept)} runs done, {len(todo)} to go")
    manifest["status"] = "running"
    manifest.setdefault("resumed_at", []).append(_now())
    store.write_json_atomic(folder / store.MANIFEST, manifest)
    return folder, execute(folder, s, manifest, todo, len(kept), len(runs))
