from __future__ import annotations

import json
from typing import Annotated

import typer

from lab import terminal
from lab.errors import UsageError
from lab.plan import presets as registry
from lab.plan.plan import plan, points

COLUMNS = ["preset", "alias", "points", "runs", "description"]


def listing() -> list[dict[str, object]]:
    """Every built-in preset: name, alias (None if it has none besides its name), points, runs, description. A
    preset that cannot load here (e.g. its recorded traces are not beside the clone) is listed with points and runs
    None and why instead of its description."""
    aliases = {v: k for k, v in registry.ALIASES.items() if k != v}
    rows: list[dict[str, object]] = []
    for name in registry.names():
        try:
            s = registry.get(name)
        except UsageError as e:
            rows.append({"name": name, "alias": aliases.get(name), "points": None, "runs": None,
                         "description": f"not available here: {e}"})
            continue
        rows.append({"name": name, "alias": aliases.get(name), "points": len(points(s)), "runs": len(plan(s)),
                     "description": s.description})
    return rows


def _field(value: object) -> str:
    """One tab-separated field: no tabs or line breaks inside, '' for none."""
    return "" if value is None else " ".join(str(value).split())


def register(app: typer.Typer) -> None:
    @app.command()
    def presets(
        json_out: Annotated[bool, typer.Option("--json", help="A JSON list of objects (name, alias, points, runs, "
                                                               "description) on stdout.")] = False,
        plain_out: Annotated[bool, typer.Option("--plain", help="Tab-separated: a header line, then one preset "
                                                                 "a line.")] = False,
    ) -> None:
        """List the built-in sweep presets (run one with `quiclab sweep NAME` or `just sweep NAME`)."""
        if json_out and plain_out:
            raise UsageError("--json and --plain are two forms of the same listing: give one")
        rows = listing()
        if json_out:
            terminal.raw(json.dumps(rows, indent=2))
        elif plain_out:
            terminal.raw("\n".join("\t".join(_field(v) for v in r)
                                   for r in [COLUMNS, *([p[k] for k in p] for p in rows)]))
        else:
            terminal.table("sweep presets", COLUMNS,
                           [[p["name"], _field(p["alias"]), _field(p["points"]) or "-", _field(p["runs"]) or "-",
                             str(p["description"])]
                            for p in rows],
                           right=["points", "runs"], wrap=["description"])
