from __future__ import annotations

import typer

from lab import config, terminal
from lab.observe import services

DASHBOARDS = ("quiclab-live-link", "quiclab-sweep-results")


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard() -> None:
        """Print the Grafana dashboards' URLs (or, without Grafana, Prometheus' URL)."""
        if services.is_up(services.GRAFANA):
            for uid in DASHBOARDS:
                terminal.line(f"{config.grafana_url()}d/{uid}")
            return
        terminal.line(f"Grafana is not available here (image {config.grafana_image()} not started); "
                           f"Prometheus: {config.prometheus_url()}")
