from __future__ import annotations

import typer

from lab import lab, terminal


def register(app: typer.Typer) -> None:
    @app.command()
    def build() -> None:
        """Build (or refresh, cached) the lab's images."""
        lab.build()
        terminal.success("images built")
