"""The documents generated from committed data (`quiclab docs`): each target path and its text as the data says now.

- docs/seeds.md: the whole file (lab/docgen/atlas.py and atlas_found.py, from docs/seeds.toml and results/reference/);
- README.md, docs/results.md, docs/link.md and docs/implementations.md: the blocks between
  `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` (lab/docgen/blocks.py), the rest of those files
  written by hand;
- docs/architecture.md: its layers diagram (block `layers`, lab/docgen/architecture.py, from lab/layers.py);
- docs/explain.md: its worked examples' blocks `<!-- generated from SRC -->` (lab/explain/example.py);
- docs/benchmarks.md (and the README's overhead sentence): the blocks `<!-- generated from SRC -->`, each a
  benchmark's committed json rendered by that benchmark's own `markdown` (lab/bench/parallel.py, startup.py,
  overhead.py, hidden.py for calibrate.json) or `sentence`;
- results/reference/PRESET/summary.md of every sweep folder (what `quiclab report` writes there): their statistics
  depend on more than their own runs.csv (the Reno check's threshold comes from validate-reno), so a re-run of one
  folder can change another's; a stack matrix's matrix.md too (also at the end of its summary.md; its commands name
  the reference folder, not the one the sweep ran in).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from lab import config
from lab.docgen import architecture, atlas_found, blocks
from lab.errors import UsageError
from lab.explain import example
from lab.report.report import folder_texts, load_sweep

_BLOCK = re.compile(r"(<!-- generated: ([a-z0-9-]+) -->\n)(.*?)(<!-- end generated: \2 -->)", re.DOTALL)


_FROM = re.compile(r"<!-- generated from (\S+) -->\n(.*?)<!-- end generated -->", re.S)


def _benchmark(src: str, root: Path) -> str:
    """One docs/benchmarks.md block from its committed json, by the benchmark that wrote it."""
    from lab.bench import overhead, parallel, startup  # numpy: only when the docs are generated

    path = root / src
    if path.name == "parallel.json":
        return parallel.markdown(parallel.load(path))
    if path.name == "startup.json":
        return startup.markdown(startup.load(path))
    if path.name.startswith("overhead-") and path.suffix == ".json":
        return overhead.markdown(*overhead.load(path))
    if path.name == "calibrate.json":
        from lab.bench import hidden
        from lab.bench.calibration import held_runs

        return hidden.markdown_doc(json.loads(path.read_text(encoding="utf-8")), held_runs(path.parent))
    if path.name == "calibrate.json.sentence":  # the README's line on a calibration benchmark
        from lab.bench import hidden
        from lab.bench.calibration import held_runs

        real = path.with_name("calibrate.json")
        return hidden.sentence(json.loads(real.read_text(encoding="utf-8")), held_runs(path.parent),
                               str(real.parent.relative_to(root)) + "/")
    if path.name.startswith("overhead-") and (path / "overhead-10kB.json").is_file():  # the README's sentence
        small, large = (overhead.load(path / f"overhead-{size}.json") for size in ("10kB", "10MB"))
        return overhead.sentence(small[0], large[0], src)
    raise UsageError(f"docs/benchmarks.md: no benchmark renders {src!r} (allowed: a bench parallel's parallel.json, "
                     "a bench startup's startup.json, a bench overhead's overhead-SIZE.json, a bench calibrate's "
                     "calibrate.json or its one-line calibrate.json.sentence)")


def _fill_benchmarks(text: str, root: Path) -> str:
    """`text` with every `<!-- generated from SRC -->` block rendered from its benchmark's committed data."""
    return _FROM.sub(lambda m: f"<!-- generated from {m.group(1)} -->\n{_benchmark(m.group(1), root)}"
                               "<!-- end generated -->", text)


def fill_blocks(text: str, render: Callable[[str], str], path: Path) -> str:
    """`text` with every generated block's body replaced by render(name)."""
    def one(m: re.Match[str]) -> str:
        return m.group(1) + render(m.group(2)).rstrip("\n") + "\n" + m.group(4)

    out = _BLOCK.sub(one, text)
    opened = text.count("<!-- generated: ")
    if opened != len(_BLOCK.findall(text)):
        raise UsageError(f"{path}: a `<!-- generated: NAME -->` block has no matching `<!-- end generated: NAME -->`")
    return out


def outputs(root: Path = config.ROOT) -> dict[Path, str]:
    """Every generated file's path and its current text."""
    reference = root / "results" / "reference"
    out = {root / "docs" / "seeds.md": atlas_found.generate(root / "docs" / "seeds.toml", reference)}
    for rel in ("README.md", "docs/results.md", "docs/link.md", "docs/implementations.md"):
        path = root / rel
        out[path] = _fill_benchmarks(
            fill_blocks(path.read_text(encoding="utf-8"), lambda name, at=path: blocks.render(name, reference, at),
                        path),
            root)
    arch = root / "docs" / "architecture.md"
    out[arch] = fill_blocks(arch.read_text(encoding="utf-8"), lambda name: architecture.render(name, root / "lab"),
                            arch)
    explain_md = root / "docs" / "explain.md"
    out[explain_md] = example.fill(explain_md.read_text(encoding="utf-8"), root)
    bench_md = root / "docs" / "benchmarks.md"
    out[bench_md] = _fill_benchmarks(bench_md.read_text(encoding="utf-8"), root)
    for folder in sorted(p for p in reference.iterdir() if (p / "summary.md").is_file()):
        records, manifest = load_sweep(folder)
        if folder.name == manifest.get("preset"):  # a sweep folder (benchmark folders have their own reports)
            out.update(folder_texts(folder, records, manifest))
    return out


def stale(root: Path = config.ROOT) -> list[Path]:
    """The generated files whose committed text differs from what their data gives now."""
    return [p for p, text in outputs(root).items() if not p.is_file() or p.read_text(encoding="utf-8") != text]


def write(root: Path = config.ROOT) -> list[Path]:
    """Rewrite the stale generated files; returns them."""
    changed = []
    for p, text in outputs(root).items():
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
            changed.append(p)
    return changed
