from __future__ import annotations

import typer

from lab import lab, terminal
from lab.errors import EnvironmentProblem


def register(app: typer.Typer) -> None:
    @app.command()
    def down() -> None:
        """Stop the lab and remove its containers, networks and volumes (results/ is kept)."""
        lab.down()
        left = lab.leftovers()
        if left:
            raise EnvironmentProblem(f"these lab resources are still there: {', '.join(left)}")
        terminal.success("lab is down; no containers, networks or volumes left")
