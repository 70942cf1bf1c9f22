from __future__ import annotations

import typer

from lab import config, lab, terminal
from lab.observe import services


def register(app: typer.Typer) -> None:
    @app.command()
    def status() -> None:
        """Show the lab's containers and the URLs of its UIs (Prometheus, Pushgateway, Grafana)."""
        rows: list[list[terminal.Cell]] = []
        for s in lab.states((*lab.LAB_CONTAINERS, config.GRAFANA_CONTAINER)):
            if s.name == config.GRAFANA_CONTAINER and s.state == "missing":
                rows.append([s.name, terminal.styled("-", "dim"), "not started (optional)", "-"])
                continue
            mark = terminal.styled("up", "green") if s.ready else terminal.styled("down", "red")
            rows.append([s.name, mark, s.state, s.health or "-"])
        terminal.table("quiclab", ["container", "", "state", "health"], rows)
        for svc in services.ALL:
            up = services.is_up(svc)
            note = ""
            if svc is services.GRAFANA and not up:
                note = f" — image {config.grafana_image()} not started here (`quiclab up` says why)"
            terminal.line(f"{svc.name}: {svc.url()} ({'up' if up else 'down'}){note}")
