from __future__ import annotations

from typing import Annotated

import typer

from lab import lab, terminal
from lab.sweep import environment


def register(app: typer.Typer) -> None:
    @app.command()
    def up(build: Annotated[bool, typer.Option("--build", help="Rebuild images (cached) first.")] = False) -> None:
        """Bring the lab up (client, router, servers, Prometheus) and wait until every part is healthy."""
        lab.up(build_images=build)
        terminal.success("lab is up: client 10.71.1.10 ⇄ router ⇄ servers 10.71.2.10 (nginx), .11 (ngtcp2), "
                         ".12 (caddy)")
        for problem in environment.udp_buffer_problems():
            terminal.warning(problem)
