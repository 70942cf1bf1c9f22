from __future__ import annotations

from typing import Annotated

import typer

from lab import config, terminal
from lab.results import generated


def register(app: typer.Typer) -> None:
    @app.command()
    def docs(
        check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when a generated document no "
                                                            "longer matches its data.")] = False,
    ) -> None:
        """Regenerate the documents built from committed data: docs/seeds.md (the seed atlas, from docs/seeds.toml
        and results/reference/), the generated blocks of README.md, docs/results.md and docs/explain.md, and the
        summary.md of every reference sweep folder."""
        if check:
            old = generated.stale()
            for p in old:
                terminal.error(f"{p.relative_to(config.ROOT)} does not match its data: run `quiclab docs`")
            if old:
                raise typer.Exit(1)
            terminal.success("every generated document matches its data")
            return
        changed = generated.write()
        for p in changed:
            terminal.success(f"rewrote {p.relative_to(config.ROOT)}")
        if not changed:
            terminal.info("every generated document already matches its data")
