from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from lab import config, terminal
from lab.endpoints.registry import help_text
from lab.errors import UsageError
from lab.evidence.capture import parse_kinds
from lab.plan import checks, presets, scenario, shard
from lab.plan.plan import groups, plan
from lab.report.report import load_sweep
from lab.report.summary import stats_table
from lab.results import store
from lab.run import hostload
from lab.run import parallel as parallel_labs
from lab.run import sweep as lifecycle
from lab.stats import until
from lab.stats.stats import summarize


def _split(v: str | None) -> list[str] | None:
    return None if v is None else [x.strip() for x in v.split(",") if x.strip()]


def _overrides(data: dict[str, Any], repeats: int | None, protocols: str | None, sizes: str | None,
               seed: int | None, clients: str | None, servers: str | None, shaper: str | None,
               capture: str | None = None, workload: str | None = None,
               sender_cc: str | None = None) -> dict[str, Any]:
    data = dict(data)
    workloads = _split(workload)
    if workloads is not None:  # one: the scenario's workload; several: swept (lab/workloads/spec.py)
        if len(workloads) == 1 and "workload" not in data.get("sweep", {}):
            data["workload"] = workloads[0]
        else:
            data["sweep"] = {**data.get("sweep", {}), "workload": workloads}
    cc_list = _split(sender_cc)
    if cc_list is not None:  # one value: the scenario's default; several: swept
        sweep = {k: v for k, v in data.get("sweep", {}).items() if k != "cc"}
        data["sweep"], data["cc"] = ({**sweep, "cc": cc_list}, None) if len(cc_list) > 1 else (sweep, cc_list[0])
    if capture is not None:
        data["capture"] = list(parse_kinds(capture))
    for key, value in (("repeats", repeats), ("seed", seed), ("shaper", shaper), ("protocols", _split(protocols)),
                       ("clients", _split(clients)), ("servers", _split(servers))):
        if value is not None:
            data[key] = value
    size_list = _split(sizes)
    if size_list is not None:
        if "size" in data.get("sweep", {}):
            data["sweep"] = {**data["sweep"], "size": size_list}
        else:
            data["sizes"] = size_list
    return data


def _default(field: str) -> str:
    """A scenario's default clients or servers, for the help text."""
    return ", ".join(scenario.Scenario.model_fields[field].default)


def _refuse_with_resume(given: dict[str, object]) -> None:
    """--resume continues the folder's own scenario: an option that would change it is an error, not ignored."""
    for flag, value in given.items():
        if value is not None and value is not False:
            raise UsageError(f"{flag} cannot be given with --resume (the sweep continues with the scenario and "
                             "folder it was started with)")


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        preset: Annotated[str | None, typer.Argument(help="A preset name or alias (see `quiclab presets`).")] = None,
        scenario_file: Annotated[Path | None, typer.Option("--scenario", help="A scenario TOML file.")] = None,
        repeats: Annotated[int | None, typer.Option(help="Repeats per point and protocol (default 5).")] = None,
        protocols: Annotated[str | None, typer.Option(help="Comma list: h1,h2,h3.")] = None,
        sizes: Annotated[str | None, typer.Option(help="Comma list of object sizes, e.g. 100kB,1MB.")] = None,
        seed: Annotated[int | None, typer.Option(help="Seed for the run order and the link's randomness.")] = None,
        clients: Annotated[str | None, typer.Option(
            help=f"Comma list of clients: {help_text('client')} (default {_default('clients')}).")] = None,
        servers: Annotated[str | None, typer.Option(
            help=f"Comma list of servers: {help_text('server')} (default {_default('servers')}).")] = None,
        shaper: Annotated[str | None, typer.Option(help="auto, netem or linkem.")] = None,
        capture: Annotated[str | None, typer.Option(help="Evidence kept per run: pcap,keylog,qlog (any subset, "
                                                         "or all); stored under <folder>/evidence/.")] = None,
        workload: Annotated[str | None, typer.Option(help="Workload(s), comma list (several are swept): bulk, "
                                                          "page:NxSIZE, reuse:NxSIZE, new:NxSIZE, resume:SIZE, "
                                                          "0rtt:SIZE.")] = None,
        out: Annotated[Path | None, typer.Option(help="Where result folders go (default results/).")] = None,
        sender_cc: Annotated[str | None, typer.Option(
            "--sender-cc", help="The sender's (server's) congestion control: reno, cubic, bbr, native; a comma list "
                                "sweeps it (scenario key cc).")] = None,
        resume: Annotated[Path | None, typer.Option(help="Continue an interrupted sweep in this folder.")] = None,
        reuse: Annotated[bool, typer.Option(help="If the newest sweep of this very scenario is unfinished, resume "
                                                  "it; if it is complete, show it instead of running again.")]
        = False,
        shard_of: Annotated[str | None, typer.Option(
            "--shard", help="Run only shard i of N of the plan (e.g. 2/3): whole (point, repeat) groups with the "
                            "unsharded sweep's run keys and seeds; `quiclab merge` puts the shards together.")]
        = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Check the scenario and print the plan as JSON (plan id, runs; with --shard this "
                              "shard's run keys); runs nothing and needs no lab.")] = False,
        parallel: Annotated[str | None, typer.Option(
            "--parallel", help="Run the plan over N labs on this host (N or auto; extra labs are brought up and "
                               "taken down automatically): one ordinary sweep folder, each run tagged with its "
                               "lab.")] = None,
        host_guard: Annotated[str | None, typer.Option(
            "--host-guard", help="A run during which the host, not the link, was the bottleneck: repeat (run it "
                                 "again, up to 3 times; the default with --parallel), flag (keep it, flagged; the "
                                 "default on one lab, where the run's own load is the host's) or off.")] = None,
        until_verdict: Annotated[str | None, typer.Option(
            "--until-verdict", help="Run repeats in rounds until every point's comparison of each other method "
                                    "with this BASELINE method (protocol/client/server as the run keys name it, or "
                                    "a part naming it alone, e.g. h1) is decided, equivalent or differs, by a "
                                    "sequential rule whose errors are each at most 5 % (docs/results.md), or "
                                    "--max-repeats is reached.")] = None,
        max_repeats: Annotated[int | None, typer.Option(
            "--max-repeats", help=f"With --until-verdict: the most repeats per point (default "
                                  f"{until.DEFAULT_MAX_REPEATS}).")] = None,
    ) -> None:
        """Run a sweep (a preset or --scenario FILE), or --resume one; writes results/<timestamp>-<name>/."""
        scenario.check_repeats_seed(repeats, seed)
        part = shard.parse(shard_of) if shard_of is not None else None
        labs = parallel_labs.parse(parallel) if parallel is not None else 1
        if host_guard is not None and host_guard not in hostload.GUARDS:
            raise UsageError(f"invalid --host-guard {host_guard!r}: allowed are {', '.join(hostload.GUARDS)}")
        if max_repeats is not None and until_verdict is None:
            raise UsageError("--max-repeats goes with --until-verdict (a fixed sweep takes --repeats)")
        if until_verdict is not None:
            for flag, given in (("--repeats", repeats), ("--shard", shard_of), ("--reuse", reuse or None)):
                if given is not None:
                    raise UsageError(f"{flag} cannot be given with --until-verdict (it runs rounds of one repeat "
                                     "per open point up to --max-repeats, on this host)")
            if max_repeats is not None and not 1 <= max_repeats <= scenario.MAX_REPEATS:
                raise UsageError(f"invalid --max-repeats {max_repeats}: allowed is 1..{scenario.MAX_REPEATS}")
            repeats = max_repeats if max_repeats is not None else until.DEFAULT_MAX_REPEATS
        if parallel is not None and part is not None:
            raise UsageError("--parallel and --shard cannot be combined: --parallel runs the whole plan on this host "
                             "(shards are for several machines)")
        if resume is not None:
            if preset or scenario_file:
                raise UsageError("--resume takes the scenario from the folder: give no preset or --scenario")
            _refuse_with_resume({"--repeats": repeats, "--protocols": protocols, "--sizes": sizes, "--seed": seed,
                                 "--clients": clients, "--servers": servers, "--shaper": shaper,
                                 "--capture": capture, "--out": out, "--reuse": reuse, "--shard": shard_of,
                                 "--dry-run": dry_run, "--workload": workload, "--sender-cc": sender_cc,
                                 "--parallel": parallel, "--host-guard": host_guard,
                                 "--until-verdict": until_verdict, "--max-repeats": max_repeats})
            # not a sweep folder, or a scenario that is no longer valid: say so before the lab is touched
            manifest = store.read_manifest(resume)  # (not UTF-8, not JSON, no scenario: a UsageError naming it)
            checks.validate(manifest.scenario, str(resume / store.MANIFEST))
            config.check_all()  # before the lab lock and the lab
            folder, complete = lifecycle.resume(resume)
        else:
            if (preset is None) == (scenario_file is None):
                raise UsageError("give one preset name (see `quiclab presets`) or --scenario FILE")
            if scenario_file is not None:
                data, where, name = scenario.read(scenario_file), str(scenario_file), None
            else:
                name = presets.resolve(preset or "")
                data = presets.get(name).model_dump()
                where = f"preset {name}"
            data = _overrides(data, repeats, protocols, sizes, seed, clients, servers, shaper, capture, workload,
                              sender_cc)
            s = checks.validate(data, where)
            if part:
                shard.check(part, plan(s))
            rule = _rule(until_verdict, s)
            if dry_run:
                _print_plan(s, name, part)
                return
            out = out if out is not None else config.ROOT / "results"
            if out.exists() and not out.is_dir():
                raise UsageError(f"invalid --out {str(out)!r}: not a folder")
            config.check_all()  # before the lab lock and the lab
            wanted = {"index": part.index, "count": part.count} if part else None
            previous = store.latest_matching(out, s.model_dump(), wanted) if reuse else None
            if previous is None:
                folder, complete = lifecycle.start(s, name, out, part=part, labs=labs,
                                                   host_guard=host_guard or ("flag" if labs == 1 else "repeat"),
                                                   rule=rule)
            elif store.read_manifest(previous).status == "complete":
                terminal.info(f"--reuse: {previous.name} already holds this sweep, complete; showing it")
                folder, complete = previous, True
            else:
                terminal.info(f"--reuse: continuing the unfinished sweep in {previous.name}")
                folder, complete = lifecycle.resume(previous)
        records, _ = load_sweep(folder)
        cols, rows = stats_table(summarize(records))
        terminal.table(f"{folder.name}: transfer time and goodput (median [IQR])", cols, rows, right=cols[2:])
        terminal.line(f"results: {folder}/ (summary.md, runs.csv, plots/, report.html)")
        if not complete:
            raise lifecycle.SweepInterrupted(folder)


def _rule(baseline: str | None, s: scenario.Scenario) -> until.Rule | None:
    """--until-verdict's rule: the baseline resolved among the plan's methods (exit 2 naming the value and the
    methods allowed); the most repeats are the scenario's (set from --max-repeats)."""
    if baseline is None:
        return None
    methods = sorted({(r.protocol.value, r.client, r.server) for r in plan(s)})
    base = until.resolve_baseline(baseline, methods)
    return until.Rule(baseline=until.method_name(base), max_repeats=s.repeats)


def register_worker(app: typer.Typer) -> None:
    @app.command("sweep-worker", hidden=True)
    def sweep_worker(folder: Annotated[Path, typer.Argument(help="The parallel sweep's folder.")]) -> None:
        """Drive this process's lab for a parallel sweep (started by `quiclab sweep --parallel`; a line protocol
        on stdin/stdout)."""
        raise typer.Exit(parallel_labs.worker(folder))


def _print_plan(s: scenario.Scenario, preset: str | None, part: shard.ShardSpec | None) -> None:
    every = plan(s)
    mine = part.select(every) if part else every
    terminal.raw(json.dumps({
        "name": s.name, "preset": preset, "plan_id": shard.plan_id(s, every), "runs": len(every),
        "groups": len(groups(every)), "shard": str(part) if part else None, "shard_runs": len(mine),
        "shard_groups": len(groups(mine)), "run_keys": [r.key for r in mine],
    }))
