"""Dashboards (JSON in dashboards/json) and the sweep results' exposition text, without the lab."""

from __future__ import annotations

import base64
import http.server
import json
import re
import shutil
import subprocess
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

from lab import config
from lab.observe import push
from lab.observe.exposition import Family, number, render
from lab.observe.push import Publisher, Pushgateway
from lab.observe.sweep_metrics import SweepState
from lab.plan.plan import plan
from lab.plan.presets import get
from lab.results.schema import RunRecord

DASH_DIR = config.ROOT / "dashboards" / "json"
PROVISIONED = config.ROOT / "dashboards" / "provisioning" / "datasources" / "prometheus.yaml"
UIDS = {"live-link.json": "quiclab-live-link", "sweep-results.json": "quiclab-sweep-results"}
PROM_IMAGE = "quiclab/prometheus:dev"


def dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASH_DIR.glob("*.json"))}


def panels(d: dict) -> list[dict]:
    out = []
    for p in d["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # collapsed rows
    return out


def provisioned_uid() -> str:
    m = re.search(r"^\s*uid:\s*(\S+)\s*$", PROVISIONED.read_text(), re.M)
    assert m, "no datasource uid in the provisioning file"
    return m.group(1)


def test_dashboards_are_valid_json_with_stable_uids():
    ds = dashboards()
    assert set(ds) == set(UIDS)
    for name, d in ds.items():
        assert d["uid"] == UIDS[name]
        assert d["title"] and d["panels"]


def test_datasource_uid_matches_the_provisioned_one():
    uid = provisioned_uid()
    for name, d in dashboards().items():
        for p in panels(d):
            refs = [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]
            for ref in refs:
                if ref is not None:
                    assert ref == {"type": "prometheus", "uid": uid}, f"{name} panel {p['id']}: {ref}"
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                assert v["datasource"]["uid"] == uid


def test_panel_ids_are_unique_and_every_panel_has_a_query():
    for name, d in dashboards().items():
        ids = [p["id"] for p in panels(d)]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids {ids}"
        for p in panels(d):
            if p["type"] != "row":
                assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), f"{name} panel {p['id']}"


def test_sweep_dashboard_selects_the_sweep_and_hard_codes_none():
    d = dashboards()["sweep-results.json"]
    names = {v["name"] for v in d["templating"]["list"]}
    assert "sweep" in names
    for name, dash in dashboards().items():
        for p in panels(dash):
            for t in p.get("targets", []):
                for m in re.finditer(r'sweep\s*(=~?|!=)\s*"([^"]*)"', t["expr"]):
                    assert m.group(2) == "$sweep", f"{name} panel {p['id']} hard-codes a sweep: {t['expr']}"
    for p in panels(d):
        for t in p["targets"]:
            if "quiclab_sweep_" in t["expr"]:
                assert '"$sweep"' in t["expr"], f"sweep-results panel {p['id']} ignores $sweep: {t['expr']}"


def record(run, status: str = "ok", total_s: float = 0.5) -> RunRecord:
    return RunRecord(
        sweep="quick", run_key=run.key, point=run.point.index, point_label=run.point.label, x_name=run.point.x_name,
        x=run.point.x, protocol=run.protocol.value, client=run.client, server=run.server, repeat=run.repeat,
        order=run.order, seed=run.seed, shaper="linkem", rate_bps=2e7, rtt_s=0.02, loss_pct=0.0, jitter_s=0.0,
        link="{}", size_bytes=run.point.size, status=status, failure="" if status == "ok" else "boom",
        http_version="1.1", bytes=run.point.size, sha256_ok=status == "ok", handshake_s=0.01, ttfb_s=0.02,
        total_s=total_s if status == "ok" else None,
        goodput_bps=run.point.size * 8 / total_s if status == "ok" else None,
        wall_s=1.0, overhead_s=0.1, wire_down_bytes=None, wire_up_bytes=None, wire_overhead=None, cc_client="cubic",
        cc_server="cubic", started_at="2025-01-01T00:00:00Z")


def sample_texts() -> list[str]:
    runs = plan(get("quick"))
    state = SweepState("quick", len(runs), "loss_pct", "linkem")
    keys = [state.add(record(r, "ok" if i % 4 else "timeout", 0.4 + i / 100)) for i, r in enumerate(runs[:8])]
    state.current = runs[8]
    return [state.sweep_text(), *(state.point_text(k) for k in set(keys))]


def test_exposition_text_shape():
    text = Family("quiclab_x_total", "counter", 'a "help"\nline').add(3, {"a": 'q"\\\n'}).text()
    assert text.splitlines() == ['# HELP quiclab_x_total a "help"\\nline', "# TYPE quiclab_x_total counter",
                                 'quiclab_x_total{a="q\\"\\\\\\n"} 3.0']
    assert render([Family("quiclab_empty", "gauge", "nothing")]) == ""
    with pytest.raises(ValueError, match="_total"):
        Family("quiclab_x", "counter", "a counter's name ends in _total")


def test_summary_quartiles_are_numpys_and_labels_keep_their_format():
    values = [4.0, 1.0, 3.0, 2.0, 10.0]
    fam = Family("quiclab_t_seconds", "summary", "t").add_summary(values, {"x": "0.5"})
    got = {s[1].get("quantile", s[0]): s[2] for s in fam.samples}
    for q in (0.25, 0.5, 0.75):
        assert got[str(q)] == pytest.approx(float(np.quantile(values, q)))
    assert got["_sum"] == 20 and got["_count"] == 5
    assert 'quiclab_t_seconds{quantile="0.5",x="0.5"} 3.0' in fam.text()
    assert number(5.0) == "5" and number(0.25) == "0.25"  # label values as the dashboards have always seen them
    empty = Family("quiclab_e_seconds", "summary", "e").add_summary([])
    assert [s[2] for s in empty.samples][-2:] == [0, 0]
    for t in sample_texts():
        assert "run_key" not in t and "repeat" not in t  # labels stay bounded: never a per-run id


def test_publisher_text_passes_promtool():
    if shutil.which("docker") is None:
        pytest.skip("promtool runs in the quiclab/prometheus image: docker is not installed")
    if subprocess.run(["docker", "image", "inspect", PROM_IMAGE], capture_output=True, check=False).returncode:
        pytest.skip(f"promtool runs in the {PROM_IMAGE} image, which is not built here (`quiclab build`)")
    for text in sample_texts():
        p = subprocess.run(["docker", "run", "--rm", "-i", "--entrypoint", "promtool", PROM_IMAGE, "check", "metrics"],
                           input=text, capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == 0, p.stdout + p.stderr + text


class _Gateway(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str]]

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self.seen.append((self.command, self.path, body))
        reply = b'{"status":"success","data":[]}' if self.path.startswith("/api/") else b""
        self.send_response(200)
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_PUT = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


def test_publisher_pushes_each_changed_group():
    _Gateway.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        runs = plan(get("quick"))
        url = f"http://127.0.0.1:{server.server_address[1]}"
        pub = Publisher(SweepState("quick", len(runs), "loss_pct"), Pushgateway([url]))
        pub.begin([], runs, fresh=True)
        pub.record(record(runs[0]))
        pub.finish(True)
    finally:
        server.shutdown()
    puts = [(path, body) for method, path, body in _Gateway.seen if method == "PUT"]
    assert any("quiclab_sweep_runs_total" in body for _, body in puts)
    assert "quiclab_sweep_running 0" in puts[-1][1]
    groups = [grouping_key(path) for path, _ in puts]
    assert all(g["job"] == "quiclab_sweep" and g["sweep"] == "quick" for g in groups)
    first = runs[0]
    assert {"job": "quiclab_sweep", "sweep": "quick", "point": str(first.point.index),
            "protocol": first.protocol.value, "client": first.client, "server": first.server} in groups
    assert not pub.dirty and not pub.warned


def grouping_key(path: str) -> dict[str, str]:
    """The labels of a Pushgateway group path /metrics/job/<job>/<label>[@base64]/<value>..."""
    parts = path.split("/")[2:]
    out = {}
    for k, v in zip(parts[::2], parts[1::2], strict=True):
        if k.endswith("@base64"):
            out[k.removesuffix("@base64")] = base64.urlsafe_b64decode(v + "=" * (-len(v) % 4)).decode() if v != "=" \
                else ""
        else:
            out[k] = urllib.parse.unquote_plus(v)
    return out


def test_any_label_value_reaches_the_gateway_intact():
    _Gateway.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    odd = {"job": "quiclab_sweep", "sweep": "a/b c", "protocol": "h3+x%", "client": ""}
    try:
        gw = Pushgateway([f"http://127.0.0.1:{server.server_address[1]}"])
        gw.put(odd, [Family("quiclab_sweep_running", "gauge", "r").add(1)])
        gw.delete(odd)
        assert gw.groups() == []
    finally:
        server.shutdown()
    seen = [s for s in _Gateway.seen if s[1] != "/-/ready"]  # the probe for an address that answers
    (put_method, put_path, body), (del_method, del_path, _), (get_method, get_path, _) = seen
    assert (put_method, del_method, get_method) == ("PUT", "DELETE", "GET") and get_path == "/api/v1/metrics"
    assert grouping_key(put_path) == grouping_key(del_path) == odd
    assert "quiclab_sweep_running 1.0" in body


def test_unreachable_gateway_warns_once_and_does_not_raise(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(push.terminal, "warning", warnings.append)
    runs = plan(get("quick"))
    pub = Publisher(SweepState("quick", len(runs), "loss_pct"), Pushgateway(["http://127.0.0.1:1"]))
    pub.begin([], runs, fresh=True)
    for r in runs[:5]:
        pub.record(record(r))
    pub.finish(False)
    assert len(warnings) == 1 and "not published" in warnings[0]
    assert pub.dirty  # kept for a later attempt


def test_pushing_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(config.ENV_PUSHGATEWAY_URL, "off")
    pub = Publisher.for_sweep("quick", 18, "loss_pct")
    assert pub.gateway is None
    pub.begin([], [], fresh=True)
    pub.finish(True)


def test_grafana_provisioning_points_at_the_lab_prometheus():
    """By its compose service name on the mgmt network (Docker's DNS), so every lab on a host has its own."""
    text = PROVISIONED.read_text()
    assert "url: http://prometheus:9090\n" in text
    scrape = (config.ROOT / "compose" / "prometheus.yml").read_text()
    assert '"router:9100"' in scrape and '"pushgateway:9091"' in scrape and "10.71." not in scrape
    compose = (config.ROOT / "docker-compose.yml").read_text()
    assert "admin/admin" not in compose and "GF_SECURITY_ADMIN_PASSWORD: admin" not in compose
    assert Path(config.ROOT / "dashboards" / "provisioning" / "dashboards" / "quiclab.yaml").exists()
