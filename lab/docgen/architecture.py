"""docs/architecture.md's layers diagram (block `layers`), rendered from the one written order (lab/layers.py): top
layer first, each folder with its module count, each layer with what it holds."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lab.errors import UsageError
from lab.layers import LAB, LAYERS

WIDTH = 118  # the diagram's widest line
COLUMN = 48  # where a layer's description starts


def label(unit: str, lab: Path = LAB) -> str:
    """lab/run/ (13) for a folder (its module count, __init__.py included), lab/lab.py for a module."""
    if unit == "lab":
        return "lab/__init__.py"
    name = unit.removeprefix("lab.")
    folder = lab / name
    if folder.is_dir():
        return f"lab/{name}/ ({sum(1 for _ in folder.glob('*.py'))})"
    return f"lab/{name}.py"


def diagram(lab: Path = LAB) -> str:
    lines = ["```"]
    for i, (units, what) in enumerate(reversed(LAYERS)):
        if i:
            lines.append("   │")
        names = " " + "  ".join(label(u, lab) for u in units)
        body = textwrap.wrap(what, WIDTH - COLUMN, break_on_hyphens=False)
        if len(names) < COLUMN - 1:
            lines.append(names.ljust(COLUMN) + body[0])
            body = body[1:]
        else:
            lines.append(names)
        lines += [" " * COLUMN + b for b in body]
    return "\n".join([*lines, "```"]) + "\n"


def render(name: str, lab: Path = LAB) -> str:
    if name != "layers":
        raise UsageError(f"generated block {name!r} in docs/architecture.md: expected layers")
    return diagram(lab)
