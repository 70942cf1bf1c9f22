from __future__ import annotations

from typing import Annotated

import typer

from lab import config, lab, terminal
from lab.sweep import environment


def register(app: typer.Typer) -> None:
    @app.command()
    def up(build: Annotated[bool, typer.Option("--build", help="Rebuild images (cached) first.")] = False) -> None:
        """Bring the lab up (client, router, servers, Prometheus) and wait until every part is healthy."""
        lab.up(build_images=build)
        lab_name = f"lab {config.INSTANCE.number} ({config.PROJECT})" if config.INSTANCE.number else "lab"
        terminal.success(f"{lab_name} is up: client {config.CLIENT_IP} ⇄ router ⇄ servers {config.SERVER_IP} (nginx), "
                         f".11 (ngtcp2), .12 (caddy), .13 (nginx 1.30)")
        for problem in environment.udp_buffer_problems():
            terminal.warning(problem)
