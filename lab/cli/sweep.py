from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from lab import config, terminal
from lab.errors import UsageError
from lab.evidence.capture import parse_kinds
from lab.results.report import load_sweep
from lab.results.stats import summarize
from lab.results.summary import stats_table
from lab.sweep import presets, scenario, session, store


def _split(v: str | None) -> list[str] | None:
    return None if v is None else [x.strip() for x in v.split(",") if x.strip()]


def _overrides(data: dict[str, Any], repeats: int | None, protocols: str | None, sizes: str | None,
               seed: int | None, clients: str | None, servers: str | None, shaper: str | None,
               capture: str | None = None, sender_cc: str | None = None) -> dict[str, Any]:
    data = dict(data)
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


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        preset: Annotated[str | None, typer.Argument(help="A preset name or alias (see `quiclab presets`).")] = None,
        scenario_file: Annotated[Path | None, typer.Option("--scenario", help="A scenario TOML file.")] = None,
        repeats: Annotated[int | None, typer.Option(help="Repeats per point and protocol (default 5).")] = None,
        protocols: Annotated[str | None, typer.Option(help="Comma list: h1,h2,h3.")] = None,
        sizes: Annotated[str | None, typer.Option(help="Comma list of object sizes, e.g. 100kB,1MB.")] = None,
        seed: Annotated[int | None, typer.Option(help="Seed for the run order and the link's randomness.")] = None,
        clients: Annotated[str | None, typer.Option(help="Comma list of clients: curl, gtlsclient (default curl).")]
        = None,
        servers: Annotated[str | None, typer.Option(help="Comma list of servers: nginx, ngtcp2, caddy (default "
                                                          "nginx).")] = None,
        shaper: Annotated[str | None, typer.Option(help="auto, netem or linkem.")] = None,
        capture: Annotated[str | None, typer.Option(help="Evidence kept per run: pcap,keylog,qlog (any subset, "
                                                         "or all); stored under <folder>/evidence/.")] = None,
        sender_cc: Annotated[str | None, typer.Option(
            "--sender-cc", help="The sender's (server's) congestion control: reno, cubic, bbr, native; a comma list "
                                "sweeps it (scenario key cc).")] = None,
        out: Annotated[Path, typer.Option(help="Where result folders go.")] = config.ROOT / "results",
        resume: Annotated[Path | None, typer.Option(help="Continue an interrupted sweep in this folder.")] = None,
        reuse: Annotated[bool, typer.Option(help="If the newest sweep of this very scenario is unfinished, resume "
                                                  "it; if it is complete, show it instead of running again.")]
        = False,
    ) -> None:
        """Run a sweep (a preset or --scenario FILE), or --resume one; writes results/<timestamp>-<name>/."""
        if resume is not None:
            if preset or scenario_file:
                raise UsageError("--resume takes the scenario from the folder: give no preset or --scenario")
            folder, complete = session.resume(resume)
        else:
            if (preset is None) == (scenario_file is None):
                raise UsageError("give one preset name (see `quiclab presets`) or --scenario FILE")
            if scenario_file is not None:
                data, where, name = scenario.read(scenario_file), str(scenario_file), None
            else:
                name = presets.resolve(preset or "")
                data = presets.get(name).model_dump()
                where = f"preset {name}"
            data = _overrides(data, repeats, protocols, sizes, seed, clients, servers, shaper, capture, sender_cc)
            s = scenario.validate(data, where)
            previous = store.latest_matching(out, s.model_dump()) if reuse else None
            if previous is None:
                folder, complete = session.start(s, name, out)
            elif store.read_manifest(previous).get("status") == "complete":
                terminal.info(f"--reuse: {previous.name} already holds this sweep, complete; showing it")
                folder, complete = previous, True
            else:
                terminal.info(f"--reuse: continuing the unfinished sweep in {previous.name}")
                folder, complete = session.resume(previous)
        records, _ = load_sweep(folder)
        cols, rows = stats_table(summarize(records))
        terminal.table(f"{folder.name}: transfer time and goodput (median [IQR])", cols,
                       [[escape(c) for c in r] for r in rows], right=cols[2:])
        terminal.out.print(f"results: {folder}/ (summary.md, runs.csv, plots/, report.html)")
        if not complete:
            raise session.SweepInterrupted(folder)
