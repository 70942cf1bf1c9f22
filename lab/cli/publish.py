from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lab import config, terminal
from lab.errors import UsageError
from lab.results import publish as publishing
from lab.results import store

REFERENCE = config.ROOT / "results" / "reference"


def register(app: typer.Typer) -> None:
    @app.command()
    def publish(
        folder: Annotated[Path, typer.Argument(help="A finished sweep folder (results/<...>/).")],
        name: Annotated[str, typer.Argument(help="The reference folder's name: results/reference/NAME.")],
    ) -> None:
        """Publish a complete sweep, made from committed code with its images recorded, as results/reference/NAME
        (its CSVs, summary, manifest and plots; no pcaps). Refused, with the reason, otherwise."""
        if not name or "/" in name or name.startswith("."):
            raise UsageError(f"invalid reference name {name!r}: one folder name, e.g. connectify-loss")
        if not (folder / store.MANIFEST).is_file():
            raise UsageError(f"{str(folder)!r} is not a sweep folder: it has no {store.MANIFEST}")
        manifest = store.read_manifest(folder).doc()
        why = publishing.problems(manifest)
        for sub in publishing.nested(folder):  # published with it: held to the same rule
            why += [f"{sub.relative_to(folder)}: {w}" for w in publishing.problems(store.read_manifest(sub).doc())]
        if why:
            raise UsageError(f"not publishing {folder}: {'; '.join(why)}")
        written = publishing.publish(folder, REFERENCE / name)
        terminal.success(f"published {folder} as {(REFERENCE / name).relative_to(config.ROOT)} ({len(written)} files); "
                    "run `quiclab docs` and commit both")
