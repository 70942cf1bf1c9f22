from __future__ import annotations

import json
from typing import Annotated

import typer

from lab import config, lab, optional, terminal
from lab.observe import services


def register(app: typer.Typer) -> None:
    @app.command()
    def status(
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object on stdout: containers (name, state, "
                                                               "health, ready, optional) and services (name, url, "
                                                               "up).")] = False,
    ) -> None:
        """Show the lab's containers and the URLs of its UIs (Prometheus, Pushgateway, Grafana)."""
        found = lab.states((*lab.LAB_CONTAINERS, config.GRAFANA_CONTAINER))
        ups = [(svc, services.is_up(svc)) for svc in services.ALL]
        # an optional part of the lab that could not be built here (lab/optional.py): why, instead of "missing"
        why = {c: optional.unavailable(p) for c in optional.unavailable_containers() if (p := optional.part_of(c))}
        if json_out:
            terminal.raw(json.dumps({
                "containers": [{"name": s.name, "state": s.state, "health": s.health or None, "ready": s.ready,
                                "optional": s.name == config.GRAFANA_CONTAINER or optional.part_of(s.name) is not None,
                                "unavailable": why.get(s.name)} for s in found],
                "services": [{"name": svc.name, "url": svc.url(), "up": up} for svc, up in ups],
            }, indent=2))
            return
        rows: list[list[terminal.Cell]] = []
        for s in found:
            if s.name == config.GRAFANA_CONTAINER and s.state == "missing":
                rows.append([s.name, terminal.styled("-", "dim"), "not started (optional)", "-"])
                continue
            if s.name in why:
                rows.append([s.name, terminal.styled("-", "dim"), f"unavailable: {why[s.name]}", "-"])
                continue
            if s.state == "missing" and optional.part_of(s.name) in optional.ON_DEMAND:
                rows.append([s.name, terminal.styled("-", "dim"), "not started (on demand: the first run that needs "
                                                                  "it builds and starts it)", "-"])
                continue
            mark = terminal.styled("up", "green") if s.ready else terminal.styled("down", "red")
            rows.append([s.name, mark, s.state, s.health or "-"])
        terminal.table("quiclab", ["container", "", "state", "health"], rows, wrap=["state"])
        for svc, up in ups:
            note = ""
            if svc is services.GRAFANA and not up:
                note = f" — image {config.grafana_image()} not started here (`quiclab up` says why)"
            terminal.line(f"{svc.name}: {svc.url()} ({'up' if up else 'down'}){note}")
