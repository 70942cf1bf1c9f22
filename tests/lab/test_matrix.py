"""Issue 33: `quiclab matrix` on the real lab — a tiny matrix (2 servers x 2 clients over HTTP/3, the registry's TCP
baselines over HTTP/1.1 and HTTP/2, 1 repeat, a 1 MB object on the goodput link: 10 Mbit/s each way, 30 ms RTT,
25-packet drop-tail queues): every planned pair is a verified result, and the folder holds the heatmap, the table
and a verdict per cell; `--why` explains a captured run of each cell that needs a why, beside the cell."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lab.endpoints.registry import registry
from lab.report import matrix
from lab.report.report import load_sweep
from lab.results.schema import read_runs
from tests.lab.test_sweep import only_folder, quiclab

pytestmark = pytest.mark.lab

SERVERS, CLIENTS = ("nginx", "ngtcp2"), ("curl", "gtlsclient")


def test_a_tiny_matrix_runs_every_pair_and_draws_every_cell(lab_up: None, tmp_path: Path):
    done = quiclab("matrix", "--link", "goodput", "--servers", ",".join(SERVERS), "--clients", ",".join(CLIENTS),
                   "--repeats", "1", "--size", "1MB", "--out", str(tmp_path), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = only_folder(tmp_path)
    records = read_runs(folder / "runs.csv").records
    methods = {(r.protocol, r.client, r.server) for r in records}
    baselines = registry().tcp_baselines()
    want = {("h3", c, s) for c in CLIENTS for s in SERVERS} | {(p, c, s) for c, s in baselines for p in ("h1", "h2")}
    assert methods == want
    assert len(records) == len(want)  # one repeat of each
    for r in records:
        assert r.status == "ok", (r.run_key, r.failure)
        assert r.sha256_ok and r.bytes == 1_000_000
        assert r.http_version == {"h1": "1.1", "h2": "2", "h3": "3"}[r.protocol]
        assert r.rate_bps == 10e6 and r.rtt_s == pytest.approx(0.030)
        assert r.link.count('"queue_limit_packets":25') == 2  # a 25-packet queue each way
    recs, manifest = load_sweep(folder)
    m = matrix.build(recs, manifest, folder)
    assert (m.servers, m.clients) == (list(SERVERS), list(CLIENTS))
    for c in m.cells.values():
        assert c.status == "ok" and c.n == 1
        assert 0 < c.efficiency.value <= 1.05  # goodput can not beat the 10 Mbit/s link
        assert c.verdict is not None  # n = 1: inconclusive, and it says why
    svg = (folder / "plots" / matrix.MATRIX_SVG).read_text()
    ET.fromstring(svg)
    assert all(name in svg for name in (*SERVERS, *CLIENTS))
    assert "Stack matrix" in (folder / "report.html").read_text()
    assert "| nginx | curl | HTTP/3 curl\u2192nginx | ok |" in (folder / matrix.MATRIX_MD).read_text()


def test_why_explains_a_captured_run_of_each_cell_that_needs_one(lab_up: None, tmp_path: Path):
    """`quiclab matrix --why FOLDER`: at 100 kB the handshake and slow start keep the HTTP/3 cell far under
    efficiency 0.8 on the goodput link, so it needs a why; --why runs it once more, captured, in FOLDER/whys/, the
    sweep explains it, and the rebuilt matrix.md holds its reason beside the cell."""
    done = quiclab("matrix", "--servers", "nginx", "--clients", "curl", "--repeats", "1", "--size", "100kB",
                   "--out", str(tmp_path), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = only_folder(tmp_path)
    m = matrix.build(*load_sweep(folder), folder)
    assert [c.method for c in m.needs_why()] == ["HTTP/3 curl\u2192nginx"] and not m.cell("nginx", "curl").why
    done = quiclab("matrix", "--why", str(folder), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    [sub] = sorted((folder / matrix.WHYS_DIR).iterdir())
    [run] = read_runs(sub / "runs.csv").records
    assert (run.protocol, run.client, run.server, run.repeat, run.status) == ("h3", "curl", "nginx", 0, "ok")
    assert (sub / "evidence" / run.run_key.replace("/", "_") / "explain.json").is_file()
    c = matrix.build(*load_sweep(folder), folder).cell("nginx", "curl")
    assert c.why and c.why_run == f"{matrix.WHYS_DIR}/{sub.name} {run.run_key}"
    assert c.why in (folder / matrix.MATRIX_MD).read_text()
    assert f"quiclab explain {folder}/whys/{sub.name} --run {run.run_key}" in done.stdout + done.stderr
