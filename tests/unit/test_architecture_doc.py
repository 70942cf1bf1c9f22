"""docs/architecture.md stays true: its layers diagram is lab/layers.py's order (a generated block, `quiclab docs`),
its size of lab/ is within a tenth of the tree's, and each row of "Where a change goes" names as many files as its
count says, each existing and naming the row's example."""

from __future__ import annotations

import re
from pathlib import Path

from lab.docgen import architecture
from lab.docgen.generated import fill_blocks
from lab.layers import LAYERS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)+|[\w-]+\.(?:md|yml|toml))`")


def rows() -> list[list[str]]:
    table = DOC.read_text(encoding="utf-8").split("## Where a change goes", 1)[1]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| a ")]


def test_the_diagram_is_the_written_order():
    text = DOC.read_text(encoding="utf-8")
    assert fill_blocks(text, architecture.render, DOC) == text, "run `uv run quiclab docs`"
    block = text.split("<!-- generated: layers -->", 1)[1]
    shown = [u for line in block.splitlines() if line.startswith(" lab/")
             for u in re.findall(r"lab/(\S+?)(?:/ \(\d+\)|\.py)", line)]
    written = ["__init__" if u == "lab" else u.removeprefix("lab.") for layer, _ in reversed(LAYERS) for u in layer]
    assert shown == written


def test_the_size_of_lab_is_true():
    m = re.search(r"`lab/`, ~(\d+)k lines in ~(\d+) modules", DOC.read_text(encoding="utf-8"))
    assert m, "docs/architecture.md no longer says lab/'s size"
    files = list((ROOT / "lab").rglob("*.py"))
    lines = sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
    assert abs(int(m.group(1)) * 1000 - lines) <= lines / 10, f"lab/ has {lines} lines"
    assert abs(int(m.group(2)) - len(files)) <= len(files) / 10, f"lab/ has {len(files)} modules"


def test_each_kind_of_change_names_its_files():
    found = rows()
    assert len(found) == 8
    for what, count, example, where in found:
        paths = PATH.findall(where)
        example = example.strip("`")
        assert int(count.split()[0]) == len(paths), (what, paths)
        for p in paths:
            assert (ROOT / p).is_file(), (what, p)
            assert example.lower() in (ROOT / p).read_text(encoding="utf-8").lower(), (what, p, example)


def test_no_file_of_the_link_impairment_is_left_out():
    """Every file of the link's code that uses `duplicate` (a field, key, option or counter) is in the row."""
    (_, _, _, where), = (r for r in rows() if r[0] == "a link impairment")
    named = set(PATH.findall(where))
    use = re.compile(r"[\"'.(]duplicate\b|\bduplicate[:=]|\bpub duplicate\b|\bduplicated\b")
    using = {str(p.relative_to(ROOT)) for d in ("lab/link", "lab/cli", "linkem/src") for p in (ROOT / d).iterdir()
             if p.suffix in (".py", ".rs") and use.search(p.read_text(encoding="utf-8"))}
    assert sorted(using - named) == []
