"""A number in the docs comes from a committed folder: the blocks docs/benchmarks.md marks as generated must equal
what their reference folder renders to now (results/reference/)."""

from __future__ import annotations

import re

from lab import config
from lab.bench import parallel

DOC = config.ROOT / "docs" / "benchmarks.md"
BLOCK = re.compile(r"<!-- generated from (\S+) -->\n(.*?)<!-- end generated -->", re.S)


def test_the_parallel_labs_table_is_generated_from_its_committed_folder():
    blocks = {src: text for src, text in BLOCK.findall(DOC.read_text())}
    src = "results/reference/parallel-labs-20261124/parallel.json"
    assert src in blocks, "docs/benchmarks.md lost its generated parallel-labs table"
    assert blocks[src] == parallel.markdown(parallel.load(config.ROOT / src))


def test_every_folder_the_parallel_figures_name_is_committed():
    found = sorted((config.ROOT / "results" / "reference").glob("*/parallel.json"))
    assert len(found) >= 1
    for path in found:
        for f in parallel.load(path):
            folder = config.ROOT / f.folder
            assert (folder / "runs.csv").is_file() and (folder / "manifest.json").is_file(), f.folder
            assert f.folder.startswith(f"results/reference/{path.parent.name}/"), f.folder


def test_every_benchmark_folder_the_docs_cite_is_rendered_there():
    """Each committed benchmark json (parallel, startup) appears in docs/benchmarks.md as its own generated table."""
    blocks = {src for src, _ in BLOCK.findall(DOC.read_text())}
    ref = config.ROOT / "results" / "reference"
    for path in sorted([*ref.glob("*/parallel.json"), *ref.glob("*/startup.json")]):
        assert str(path.relative_to(config.ROOT)) in blocks, path


def test_the_explain_worked_example_is_generated_from_its_committed_folder():
    from lab.explain import example

    blocks = {src: text for src, text in BLOCK.findall((config.ROOT / "docs" / "explain.md").read_text())}
    folder = "results/reference/explain-nginx"
    versus = f"{folder}/explain/versus-h3_curl_nginx-h3_curl_nginx_sid-base.json"
    pages, rtt = "results/reference/explain-pages", "results/reference/explain-rtt"
    assert set(blocks) == {folder, versus, pages, rtt}, "docs/explain.md lost a generated table of a worked example"
    assert blocks[rtt] == example.limits_table(config.ROOT / rtt)
    assert blocks[folder] == example.table(config.ROOT / folder)
    assert blocks[versus] == example.split(config.ROOT / versus)
    assert blocks[pages] == example.hol_table(config.ROOT / pages)
    # the page-load example shows what the acceptance asks: HTTP/2 streams held behind TCP holes, with delays
    h2 = next(line for line in blocks[pages].splitlines() if line.startswith("| HTTP/2"))
    cells = [c.strip() for c in h2.strip("|").split("|")]
    assert cells[3] == "every stream above it" and int(cells[4].split()[0]) > 0 and float(cells[6]) > 0


def test_the_per_run_overhead_figures_are_generated_from_their_committed_benchmark():
    from lab.bench import overhead

    folder = "results/reference/overhead-20261126"
    small, large = (overhead.load(config.ROOT / folder / f"overhead-{s}.json") for s in ("10kB", "10MB"))
    docs = {src: text for src, text in BLOCK.findall(DOC.read_text())}
    assert docs[f"{folder}/overhead-10kB.json"] == overhead.markdown(*small)
    assert docs[f"{folder}/overhead-10MB.json"] == overhead.markdown(*large)
    readme = {src: text for src, text in BLOCK.findall((config.ROOT / "README.md").read_text())}
    assert readme[folder] == overhead.sentence(small[0], large[0], folder)


def test_the_default_job_on_parallel_labs_meets_issue_32s_bound():
    """The committed side-by-side run of the set-up's default job: `--parallel auto` at most 0.4x one lab's wall
    time, no run flagged host-bound in either sweep, and no point that differs from the reference connectify-loss."""
    import csv

    figs = parallel.load(config.ROOT / "results/reference/default-job-20261126/parallel.json")
    one, auto = parallel.baseline(figs), next(f for f in figs if f.requested == "auto")
    assert auto.wall_s <= 0.4 * one.wall_s and auto.labs > 1
    assert one.reference == auto.reference == "results/reference/connectify-loss"
    for f in figs:
        rows = list(csv.DictReader((config.ROOT / f.folder / "runs.csv").open()))
        assert len(rows) == f.runs == f.ok and not any(r["host_bound"] for r in rows), f.folder
        assert f.reference_any_differs is False and " 0 differ" in f.vs_reference
