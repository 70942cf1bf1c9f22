from __future__ import annotations

from typing import Annotated

import typer

from lab import lab, optional, terminal


def register(app: typer.Typer) -> None:
    @app.command()
    def build(parts: Annotated[str | None, typer.Option(
            "--parts", help="Optional parts to build besides the required images: a comma list of "
                            + ", ".join(optional.ALL) + ", all, or none (default: " + ", ".join(optional.PARTS)
                            + "; " + ", ".join(optional.ON_DEMAND) + " are otherwise built on first use)")] = None
              ) -> None:
        """Build (or refresh, cached) the lab's images."""
        lab.build(optional.parse_parts(parts) if parts is not None else None)
        terminal.success("images built")
