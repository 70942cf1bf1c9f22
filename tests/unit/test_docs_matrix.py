"""The stack matrix in the docs (lab/docgen/matrix.py; issue 33 item 5) on a small synthetic matrix folder written as
`quiclab publish` leaves one (runs.csv, manifest.json, plots/matrix.svg): the section's table is the folder's own
report's (lab/report/matrix.py table), a failed cell shows its reason, the heatmap is linked from the document's
place, the README's sentence counts the folder's own verdicts, an absent folder says "Not run yet" with its command,
and the folder's summary.md and matrix.md are what `quiclab report` writes (so `quiclab docs` keeps them)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from lab.docgen import blocks
from lab.errors import UsageError
from lab.report import matrix
from lab.report.report import folder_texts, summary_text
from lab.report.summary import md_table
from lab.results.schema import csv_text
from tests.unit.test_matrix_report import records, scenario

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FAILURE = "QUIC handshake did not complete (curl exit 28)"


def publish(reference: Path, rs: list, link: str = "goodput", name: str | None = None) -> Path:
    folder = reference / (name or f"matrix-{link}")
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "matrix.svg").write_text("<svg/>")
    (folder / "runs.csv").write_text(csv_text(rs))
    manifest = {**scenario(link), "name": f"matrix-{link}", "preset": f"matrix-{link}", "status": "complete",
                "started_at": "2026-11-26T14:00:00Z", "git": {"commit": COMMIT, "dirty": False},
                "parallel": {"labs": 3}, "planned_runs": len(rs)}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "results" / "reference").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    return tmp_path


def render(root: Path, name: str, doc: str = "docs/results.md") -> str:
    return blocks.render(name, root / "results" / "reference", root / doc)


def test_an_absent_folder_says_not_run_yet_with_its_command(root: Path) -> None:
    for link in ("goodput", "crosstraffic", "satellite", "satellite-loss"):
        text = render(root, f"matrix-{link}")
        assert text == f"Not run yet: `uv run quiclab matrix --link {link} --parallel auto`\n"
    grid = render(root, "matrixgrid-all", "docs/implementations.md")
    assert grid.count("Not run yet: `uv run quiclab matrix --link ") == 4
    summary = render(root, "matrixsummary-all", "README.md")
    assert summary == ("Not run yet: the stack matrix on the goodput, crosstraffic, satellite, satellite-loss "
                       "links: `uv run quiclab matrix --link goodput,crosstraffic,satellite,satellite-loss "
                       "--parallel auto`.\n")


def test_the_section_is_the_folders_own_table_heatmap_and_needs_a_why(root: Path) -> None:
    rs = records()
    folder = publish(root / "results" / "reference", rs)
    text = render(root, "matrix-goodput")
    assert text.startswith(f"From `results/reference/matrix-goodput/` (complete: {len(rs)} runs, 2026-11-26, "
                           "commit 0123456 on 3 parallel labs;")
    m = matrix.build(rs, json.loads((folder / "manifest.json").read_text()), folder)
    assert md_table(matrix.table(m)) in text  # the report's one table, not a copy of its cell format
    assert "[plots/matrix.svg](../results/reference/matrix-goodput/plots/matrix.svg)" in text
    # a failed cell shows its reason in its row
    row = next(ln for ln in text.splitlines() if ln.startswith("| ngtcp2 | curl |"))
    assert f"{FAILURE} (5 of 5 failed runs)" in row and "failed (5 of 5)" in row
    unsupported = next(ln for ln in text.splitlines() if ln.startswith("| ngtcp2 | gtlsclient |"))
    assert "cannot agree on an ALPN" in unsupported
    # needs a why: the failed cell and both nginx cells under 0.8, each with the command that explains it
    why = text.split("Needs a why.", 1)[1]
    items = [ln for ln in why.splitlines() if ln.startswith("- ")]
    assert len(items) == 3
    assert any("HTTP/3 curl\u2192ngtcp2" in w and FAILURE in w and "quiclab matrix --why "
               "results/reference/matrix-goodput" in w for w in items)
    # from the README (the clone's root) the heatmap is reached without ../
    assert "(results/reference/matrix-goodput/plots/matrix.svg)" in render(root, "matrix-goodput", "README.md")


def test_a_folder_without_its_heatmap_says_how_to_draw_it(root: Path) -> None:
    folder = publish(root / "results" / "reference", records())
    (folder / "plots" / "matrix.svg").unlink()
    text = render(root, "matrix-goodput")
    assert "no plots/matrix.svg in `results/reference/matrix-goodput/` (`quiclab report" in text
    assert "](../results/reference/matrix-goodput/plots/matrix.svg)" not in text


def _counts(sentence: str) -> dict[str, int]:
    tail = sentence.rsplit("): ", 1)[1].rstrip(".")
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"(\d+) ([a-z ]+?)(?:,|$)", tail)}


def _expected(m: matrix.Matrix) -> dict[str, int]:
    """By hand from the cells: a failed or unsupported cell by its status, every other by its verdict."""
    out = {o: 0 for o in ("faster", "equivalent", "slower", "inconclusive", "failed")}
    for c in m.cells.values():
        key = c.status if c.status in ("failed", "unsupported") else c.verdict.verdict
        out[key] = out.get(key, 0) + 1
    return out


@pytest.mark.parametrize("scale", [1.25, 0.8, 1.02])
def test_the_readme_sentence_counts_the_folders_own_verdicts(root: Path, scale: float) -> None:
    """gtlsclient→nginx 25 % slower, 20 % faster or 2 % slower (equivalent) on every repeat: the counts follow."""
    rs = [replace(r, total_s=r.total_s * scale / 1.25, goodput_bps=r.goodput_bps * 1.25 / scale)
          if (r.client, r.server, r.protocol) == ("gtlsclient", "nginx", "h3") else r for r in records()]
    folder = publish(root / "results" / "reference", rs)
    text = render(root, "matrixsummary-all", "README.md")
    sentence, missing = text.split("\n\n")
    m = matrix.build(rs, json.loads((folder / "manifest.json").read_text()), folder)
    assert _counts(sentence) == _expected(m)
    assert sum(_counts(sentence).values()) == len(m.cells) == 4
    want = {1.25: "slower", 0.8: "faster", 1.02: "equivalent"}[scale]
    assert m.cell("nginx", "gtlsclient").verdict.verdict == want
    assert sentence.startswith(f"Stack matrix, goodput link (`results/reference/matrix-goodput/`, complete: {len(rs)} "
                               "runs, 2026-11-26, commit 0123456): of its 4 HTTP/3 server x client cells against the "
                               "TCP baseline (HTTP/2 curl\u2192nginx;")
    assert missing.startswith("Not run yet: the stack matrix on the crosstraffic, satellite, satellite-loss links")
    assert "--link goodput" not in missing


def test_a_partly_failed_cell_is_counted_by_its_verdict_and_said(root: Path) -> None:
    rs = [replace(r, status="timeout", failure="curl exit 28", total_s=None, goodput_bps=None, timeout_s=60.0)
          if (r.client, r.server, r.protocol, r.repeat) == ("curl", "nginx", "h3", 4) else r for r in records()]
    publish(root / "results" / "reference", rs)
    sentence = render(root, "matrixsummary-all", "README.md").split("\n\n")[0]
    assert "; 1 of them with some runs failed (counted by their verdict)." in sentence
    assert sum(_counts(sentence.split("; 1 of them")[0] + ".").values()) == 4


def test_the_grid_gives_each_cells_outcome_per_server_and_client(root: Path) -> None:
    publish(root / "results" / "reference", records())
    text = render(root, "matrixgrid-all", "docs/implementations.md")
    assert "| server \\ client | curl | gtlsclient |" in text
    assert "| nginx | equivalent | slower |" in text
    assert "| ngtcp2 | failed | unsupported |" in text
    assert "[plots/matrix.svg](../results/reference/matrix-goodput/plots/matrix.svg)" in text
    assert text.count("Not run yet") == 3


def test_a_folder_of_another_link_or_an_unknown_link_is_refused(root: Path) -> None:
    publish(root / "results" / "reference", records(), link="satellite", name="matrix-goodput")
    with pytest.raises(UsageError, match="not a stack matrix of the goodput link"):
        render(root, "matrix-goodput")
    with pytest.raises(UsageError, match="unknown matrix link 'moon': allowed are goodput, crosstraffic"):
        render(root, "matrix-moon")
    with pytest.raises(UsageError, match="`matrixgrid-all`"):
        render(root, "matrixgrid-goodput")


def test_the_folders_summary_and_matrix_md_are_what_report_writes(root: Path) -> None:
    rs = records()
    folder = publish(root / "results" / "reference", rs)
    manifest = json.loads((folder / "manifest.json").read_text())
    texts = folder_texts(folder, rs, manifest)
    md = texts[folder / matrix.MATRIX_MD]
    assert md.startswith("# Stack matrix: goodput link")
    summary = texts[folder / "summary.md"]
    assert summary.startswith(summary_text(rs, manifest, False).rstrip("\n"))
    assert "\n## Stack matrix: goodput link" in summary and "\n### Needs a why" in summary
    plain = {k: v for k, v in manifest.items() if k != "scenario"}
    assert folder_texts(folder, rs, plain) == {folder / "summary.md": summary_text(rs, plain, False)}


def test_a_published_folder_without_its_captures_gives_the_run_to_make_not_an_explain_that_cannot_work(
        root: Path) -> None:
    """runs.csv names a client-side capture, but a reference folder keeps none (lab/results/publish.py): the why
    line gives the one-pair matrix to run; with the capture there, `quiclab explain` of the folder's run."""
    rs = records()
    failed = next(r for r in rs if (r.client, r.server) == ("curl", "ngtcp2"))
    pcap = f"evidence/{failed.run_key.replace('/', '_')}/client-side.pcap"
    rs = [replace(r, evidence=pcap) if r.run_key == failed.run_key else r for r in rs]
    folder = publish(root / "results" / "reference", rs)

    def line() -> str:
        why = render(root, "matrix-goodput").split("Needs a why.", 1)[1]
        return next(ln for ln in why.splitlines() if ln.startswith("- HTTP/3 curl\u2192ngtcp2"))

    assert "`quiclab matrix --why results/reference/matrix-goodput`" in line()
    (folder / pcap).parent.mkdir(parents=True)
    (folder / pcap).write_bytes(b"")
    assert f"`quiclab explain results/reference/matrix-goodput --run {failed.run_key}`" in line()
