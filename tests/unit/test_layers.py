"""lab/'s layers (docs/architecture.md): imports point down only, and no import cycle, counting the imports inside
functions (a function-level import must not be what keeps a cycle from failing at import time)."""

from __future__ import annotations

import ast
from pathlib import Path

LAB = Path(__file__).resolve().parents[2] / "lab"

#: What each layer must not import (the layers above it).
FORBIDDEN = {
    "lab.plan": ("lab.run", "lab.cli", "lab.explain", "lab.bench", "lab.observe", "lab.lab",
                 "lab.results.report", "lab.results.store"),
    "lab.run": ("lab.cli", "lab.bench"),
    "lab.results": ("lab.cli", "lab.run", "lab.bench"),
    "lab.link": ("lab.plan", "lab.run", "lab.results", "lab.cli", "lab.lab"),
    "lab.endpoints": ("lab.plan", "lab.run", "lab.results", "lab.cli"),
    "lab.workloads": ("lab.plan", "lab.run", "lab.cli"),
    "lab.evidence": ("lab.plan", "lab.run", "lab.cli"),
    "lab.docker": ("lab.plan", "lab.run", "lab.results", "lab.cli", "lab.lab", "lab.link"),
}


def modules() -> dict[str, Path]:
    out = {}
    for path in LAB.rglob("*.py"):
        parts = path.relative_to(LAB.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def graph() -> dict[str, set[str]]:
    """module -> the lab modules it imports anywhere (top level or inside functions)."""
    mods = modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                o = owner(t) if t.startswith("lab") else None
                if o and o != name:
                    edges[name].add(o)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_lab_has_no_import_cycle_counting_function_level_imports():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_point_down_only():
    wrong = []
    for module, targets in graph().items():
        for layer, above in FORBIDDEN.items():
            if module == layer or module.startswith(layer + "."):
                wrong += [f"{module} -> {t}" for t in sorted(targets)
                          if any(t == a or t.startswith(a + ".") for a in above)]
    assert wrong == []


def test_only_the_entry_point_imports_the_cli():
    users = sorted(m for m, targets in graph().items()
                   if any(t == "lab.cli" or t.startswith("lab.cli.") for t in targets) and not m.startswith("lab.cli"))
    assert users == ["lab.__main__"]


def test_a_sweeps_lifecycle_is_above_the_lab_session_and_the_parallel_coordination():
    """lab/run/sweep.py owns a sweep (start, resume, the one finish, the progress bar, the live push); the parallel
    labs' coordination and the lab session import nothing of it: what they report goes up through callbacks."""
    edges = graph()
    above = ("lab.run.sweep", "lab.observe", "lab.results.report", "lab.explain")
    for module in ("lab.run.parallel", "lab.run.lab_session", "lab.run.runner"):
        assert not [t for t in edges[module] if any(t == a or t.startswith(a + ".") for a in above)], module
    assert "lab.run.session" not in edges  # the one-lab copy of the lifecycle is gone
