"""report.html's "why, per point" section from the runs' explanations (lab/report/why.py), on the committed
captured sweep (tests/data/explain) explained with tshark's committed output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.explain import folder as explain_folder
from lab.report import report, why
from lab.results import store
from tests.explain_data import copied_sweep


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copied_sweep(tmp_path, monkeypatch)


def explain(folder: Path) -> None:
    assert explain_folder.after_sweep(folder, store.load_runs(folder), lambda pcap, keylog: pcap.with_suffix(".tsv")
                                      .read_text())


def test_each_point_and_method_shows_its_median_explained_run_with_its_figures_and_reasons(sweep: Path) -> None:
    explain(sweep)
    whys = why.collect(sweep, store.load_runs(sweep))
    assert {w.method for w in whys} == {"HTTP/2 curl→nginx", "HTTP/3 curl→nginx"}
    by = {w.method: w for w in whys}
    assert why.facts(by["HTTP/2 curl→nginx"].explanation).startswith("2 round trips before the request (expected 2)")
    assert why.facts(by["HTTP/3 curl→nginx"].explanation).startswith("1 round trip before the request (expected 1)")
    h3 = why.facts(by["HTTP/3 curl→nginx"].explanation)
    assert "1 packet dropped toward the client, as the emulator counted" in h3
    report.build(sweep)
    html = (sweep / "report.html").read_text()
    assert "<h2>Why, per point</h2>" in html and html.index("Why, per point") < html.index("<h2>Plots</h2>")
    assert 'href="evidence/0_h2_curl_nginx_0/explain.json"' in html
    assert all(r.text.split()[0] in html for w in whys for r in w.explanation.reasons)


def test_no_explained_run_no_section_and_the_report_unchanged(sweep: Path, tmp_path: Path) -> None:
    report.build(sweep)
    before = (sweep / "report.html").read_text()
    assert "Why, per point" not in before
    plain = tmp_path / "plain"
    shutil.copytree(sweep, plain, ignore=shutil.ignore_patterns("evidence"))
    report.build(plain)
    assert "Why, per point" not in (plain / "report.html").read_text()


def test_an_unreadable_explanation_is_left_out_not_invented(sweep: Path) -> None:
    explain(sweep)
    (sweep / "evidence" / "0_h3_curl_nginx_0" / "explain.json").write_text("{not json")
    assert [w.method for w in why.collect(sweep, store.load_runs(sweep))] == ["HTTP/2 curl→nginx"]
