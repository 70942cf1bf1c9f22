from __future__ import annotations

from typing import Annotated

import typer

from lab import config, lab, optional, terminal
from lab.endpoints.registry import registry
from lab.run import environment


def register(app: typer.Typer) -> None:
    @app.command()
    def up(build: Annotated[bool, typer.Option("--build", help="Rebuild images (cached) first.")] = False,
           parts: Annotated[str | None, typer.Option(
               "--parts", help="Optional parts to start: a comma list of " + ", ".join(optional.ALL)
                               + ", all, or none (default: every part of " + ", ".join(optional.PARTS)
                               + " built here; the on-demand ones start when a run needs them).")] = None) -> None:
        """Bring the lab up (client, router, servers, Prometheus) and wait until every part is healthy."""
        only = optional.parse_parts(parts) if parts is not None else None
        lab.up(build_images=build, only=only)
        lab_name = f"lab {config.INSTANCE.number} ({config.PROJECT})" if config.INSTANCE.number else "lab"
        started = lab.wanted(lab.LAB_CONTAINERS, only)  # without unavailable parts and on-demand ones not asked for
        servers = ", ".join(f"{i.name} {i.address}" for i in registry().implementations.values()
                            if i.role == "server" and i.container in started)
        terminal.success(f"{lab_name} is up: client {config.CLIENT_IP} ⇄ router ⇄ servers {servers}")
        for problem in environment.udp_buffer_problems():
            terminal.warning(problem)
