from __future__ import annotations

import typer

from lab import terminal
from lab.sweep import presets as registry
from lab.sweep.plan import plan, points


def register(app: typer.Typer) -> None:
    @app.command()
    def presets() -> None:
        """List the built-in sweep presets (run one with `quiclab sweep NAME` or `just sweep NAME`)."""
        aliases = {v: k for k, v in registry.ALIASES.items()}
        rows = []
        for name in registry.names():
            s = registry.get(name)
            rows.append([name, aliases.get(name, ""), str(len(points(s))), str(len(plan(s))), s.description])
        terminal.table("sweep presets", ["preset", "alias", "points", "runs", "description"], rows,
                       right=["points", "runs"])
