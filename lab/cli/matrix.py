"""`quiclab matrix`: the stack matrix (issue 33) — every server x client of the registry over HTTP/3 and the TCP
baselines over HTTP/1.1 and HTTP/2, on the QUIC interop runner's links. Each link is one ordinary sweep of its
preset (lab/plan/presets/matrix-*.toml, completed from the registry by lab/plan/matrix.py) through the sweep's one
lifecycle (lab/run/sweep.py: folder, resume, parallel labs, the report); the report adds the heatmap, the table and
the verdicts per cell (lab/report/matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from lab import config, terminal
from lab.endpoints.registry import help_text, registry
from lab.errors import UsageError
from lab.evidence.capture import parse_kinds
from lab.plan import checks, presets, scenario
from lab.plan import matrix as plan_matrix
from lab.plan.plan import groups, plan
from lab.report import matrix as report_matrix
from lab.report.html import shown_folder
from lab.report.report import build as build_report
from lab.report.report import load_sweep
from lab.results import store
from lab.run import parallel as parallel_labs
from lab.run import sweep as lifecycle

LINK_HELP = ", ".join(plan_matrix.LINKS)


def scenario_data(link: str, servers: list[str] | None, clients: list[str] | None, repeats: int | None,
                  capture: str | None, seed: int | None = None, size: str | None = None) -> tuple[str, dict[str, Any]]:
    """The preset's scenario for `link` with the options given (before the registry completes it)."""
    name = plan_matrix.LINKS[link]
    data = scenario.read(presets.PRESET_DIR / f"{name}.toml")
    for key, value in (("servers", servers), ("clients", clients), ("repeats", repeats), ("seed", seed),
                       ("sizes", [size] if size is not None else None)):
        if value is not None:
            data[key] = value
    if capture is not None:
        data["capture"] = list(parse_kinds(capture))
    return name, data


def _print_matrix(folder: Path) -> None:
    records, manifest = load_sweep(folder)
    m = report_matrix.build(records, manifest, folder)
    cols, rows = report_matrix.table(m)
    keep = [cols.index(c) for c in ("method", "status", "goodput Mbit/s median", "efficiency [CI]",
                                     "verdict (cell/baseline goodput [CI], design)")]
    terminal.table(f"{folder.name}: stack matrix ({m.link} link)", [cols[i] for i in keep],
                   [[r[i] for i in keep] for r in rows], wrap=["verdict (cell/baseline goodput [CI], design)"])
    for line in report_matrix.why_lines(m, shown_folder(folder)):
        terminal.line(f"needs a why: {line}")
    terminal.line(f"results: {folder}/ (matrix.md, plots/matrix.svg, report.html)")


def _alone(option: str, given: dict[str, object], why: str) -> None:
    """`option` takes no other option: the first one given beside it is a UsageError naming both."""
    for flag, value in given.items():
        if flag != option and value is not None:
            raise UsageError(f"{flag} cannot be given with {option} ({why})")


def _whys(folder: Path, repeats: int = 1, clients: list[str] | None = None,
          servers: list[str] | None = None) -> None:
    """`--why FOLDER`: one captured run (`repeats`) of each cell of a complete matrix folder that needs a why (of
    those `clients` and `servers`, when given), in a sweep of its own under FOLDER/whys/ (the sweep explains its
    captured runs when complete), then FOLDER's report rebuilt with the reasons beside the cells. More than one
    repeat is for a failure that does not happen every time: the cell's explanation is of a run that failed when
    one did (lab/report/matrix.py, failed runs first)."""
    manifest = store.read_manifest(folder)
    doc = manifest.doc()
    if not isinstance(manifest.scenario, dict) or not manifest.scenario.get("matrix"):
        raise UsageError(f"invalid --why {str(folder)!r}: not a matrix sweep (its scenario has no matrix)")
    if doc.get("status") != "complete":
        raise UsageError(f"invalid --why {str(folder)!r}: the matrix is {doc.get('status') or 'not complete'} "
                         f"(finish it first: quiclab matrix --resume {folder})")
    records, _ = load_sweep(folder)
    cells = [c for c in report_matrix.build(records, doc, folder).needs_why()
             if (clients is None or c.client in clients) and (servers is None or c.server in servers)]
    if not cells:
        terminal.success(f"{folder}: no cell{' of those clients and servers' if clients or servers else ''} "
                         "needs a why")
        return
    data = plan_matrix.why_scenario(manifest.scenario, [(c.protocol, c.client, c.server) for c in cells], repeats)
    s = checks.validate(data, f"the why runs of {folder}")
    config.check_all()
    runs = "one captured run" if repeats == 1 else f"{repeats} captured runs"
    terminal.info(f"{len(cells)} cell(s) need a why: {runs} each into {folder / report_matrix.WHYS_DIR}/")
    sub, complete = lifecycle.start(s, None, folder / report_matrix.WHYS_DIR, labs=1,  # not a preset's plan
                                    host_guard="flag")
    if not complete:
        raise lifecycle.SweepInterrupted(sub)
    build_report(folder)
    _print_matrix(folder)


def register(app: typer.Typer) -> None:
    @app.command()
    def matrix(
        link: Annotated[str, typer.Option(help=f"The link(s): {LINK_HELP} (a comma list) or all; each is one sweep "
                                               "folder.")] = "goodput",
        servers: Annotated[str | None, typer.Option(
            help=f"Comma list of servers (default every one: {help_text('server')}).")] = None,
        clients: Annotated[str | None, typer.Option(
            help=f"Comma list of clients (default every one: {help_text('client')}).")] = None,
        repeats: Annotated[int | None, typer.Option(help="Repeats per pair and protocol (default 5).")] = None,
        seed: Annotated[int | None, typer.Option(help="Seed for the run order and the link's randomness.")] = None,
        size: Annotated[str | None, typer.Option(
            help="The object instead of the link's own (10 MiB; cross traffic 25 MiB), e.g. 1MB: a quicker matrix, "
                 "no longer the interop runner's measurement.")] = None,
        parallel: Annotated[str | None, typer.Option(
            "--parallel", help="Run each link's plan over N labs on this host (N or auto).")] = None,
        capture: Annotated[str | None, typer.Option(help="Evidence kept per run: pcap,keylog,qlog (any subset, or "
                                                         "all); a complete sweep explains its captured runs.")]
        = None,
        out: Annotated[Path | None, typer.Option(help="Where result folders go (default results/).")] = None,
        resume: Annotated[Path | None, typer.Option(help="Continue an interrupted matrix sweep in this folder.")]
        = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Print each link's plan as JSON (pairs, runs); runs nothing and needs no lab.")]
        = False,
        why: Annotated[Path | None, typer.Option(
            "--why", help="For a finished matrix folder: run each cell that needs a why once more, captured "
                          "(pcap, key log, qlog), into FOLDER/whys/, explain it, and put the reason beside the "
                          "cell (the folder's report rebuilt). With --clients/--servers: only those cells; with "
                          "--repeats N: N runs each (a failure that does not happen every time: a failed run is "
                          "the one explained).")] = None,
    ) -> None:
        """The stack matrix: every server x client over HTTP/3 plus the TCP baselines (HTTP/1.1 and HTTP/2), on
        the QUIC interop runner's links; writes results/<timestamp>-matrix-<link>/ with the heatmap
        (plots/matrix.svg), the table (matrix.md) and a verdict per cell against the TCP baseline."""
        scenario.check_repeats_seed(repeats, seed)
        labs = parallel_labs.parse(parallel) if parallel is not None else 1
        given = {"--servers": servers, "--clients": clients, "--repeats": repeats, "--seed": seed, "--size": size,
                 "--parallel": parallel, "--capture": capture, "--out": out, "--resume": resume,
                 "--dry-run": dry_run or None, "--link": None if link == "goodput" else link}
        if why is not None:
            narrowing = ("--repeats", "--clients", "--servers")
            _alone("--why", {k: v for k, v in given.items() if k not in narrowing},
                   "the why runs take the matrix folder's own link, pairs and seed; --repeats, --clients and "
                   "--servers narrow them")
            reg = registry()
            _whys(why, repeats or 1,
                  plan_matrix.parse_names(clients, "client", reg) if clients is not None else None,
                  plan_matrix.parse_names(servers, "server", reg) if servers is not None else None)
            return
        if resume is not None:
            _alone("--resume", given, "the matrix continues with the scenario and folder it was started with")
            manifest = store.read_manifest(resume)
            if not isinstance(manifest.scenario, dict) or not manifest.scenario.get("matrix"):
                raise UsageError(f"invalid --resume {str(resume)!r}: not a matrix sweep (its scenario has no "
                                 "matrix; continue it with `quiclab sweep --resume`)")
            checks.validate(manifest.scenario, str(resume / store.MANIFEST))
            config.check_all()
            folder, complete = lifecycle.resume(resume)
            _print_matrix(folder)
            if not complete:
                raise lifecycle.SweepInterrupted(folder)
            return
        links = plan_matrix.parse_links(link)
        reg = registry()
        chosen_servers = plan_matrix.parse_names(servers, "server", reg) if servers is not None else None
        chosen_clients = plan_matrix.parse_names(clients, "client", reg) if clients is not None else None
        todo = []
        for one in links:
            name, data = scenario_data(one, chosen_servers, chosen_clients, repeats, capture, seed, size)
            todo.append((name, checks.validate(data, f"preset {name}")))
        if dry_run:
            for name, s in todo:
                every = plan(s)
                terminal.raw(json.dumps({"preset": name, "matrix": s.matrix, "servers": s.servers,
                                         "clients": s.clients, "tcp_pairs": s.tcp_pairs, "pairs": s.pairs,
                                         "runs": len(every), "groups": len(groups(every)),
                                         "methods": sorted({f"{r.protocol.value}/{r.client}/{r.server}"
                                                            for r in every})}))
            return
        out = out if out is not None else config.ROOT / "results"
        if out.exists() and not out.is_dir():
            raise UsageError(f"invalid --out {str(out)!r}: not a folder")
        config.check_all()  # before the lab lock and the lab
        guard = "flag" if labs == 1 else "repeat"  # as `quiclab sweep` chooses
        for name, s in todo:
            folder, complete = lifecycle.start(s, name, out, labs=labs, host_guard=guard)
            _print_matrix(folder)
            if not complete:
                raise lifecycle.SweepInterrupted(folder)
