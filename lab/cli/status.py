from __future__ import annotations

import typer

from lab import config, lab, terminal


def register(app: typer.Typer) -> None:
    @app.command()
    def status() -> None:
        """Show the lab's containers and the URLs of its UIs."""
        rows = []
        for s in lab.states():
            mark = "[green]up[/]" if s.ready else "[red]down[/]"
            rows.append([s.name, mark, s.state, s.health or "-"])
        terminal.table("quiclab", ["container", "", "state", "health"], rows)
        prom = next(s for s in lab.states((config.PROMETHEUS_CONTAINER,)))
        state = "up" if prom.ready else "down"
        terminal.out.print(f"Prometheus: http://127.0.0.1:{config.prometheus_port()}/ ({state})")
