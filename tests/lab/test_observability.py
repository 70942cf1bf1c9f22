"""Issue 'observability': Prometheus scrapes the link and the sweep results; every dashboard panel has data."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from lab import config, docker, lab, objects
from lab.endpoints import get_client
from lab.link import shaper
from lab.link.spec import parse_link
from lab.observe import services
from lab.protocols import Protocol
from lab.run.transfer import run_transfer

from .conftest import on_quiet_host

pytestmark = pytest.mark.lab

DASH_DIR = config.ROOT / "dashboards" / "json"
SWEEP = "quick"  # the preset's scenario name, which is the sweep label
RATE_BPS = 20e6


def prom(path: str, **params: str) -> dict:
    url = f"{config.prometheus_url()}api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        data = json.load(resp)
    assert data["status"] == "success", data
    return data["data"]


def query(expr: str) -> list[dict]:
    return prom("query", query=expr)["result"]


def substitute(expr: str, sweep: str) -> str:
    for var, value in (("${sweep}", sweep), ("$sweep", sweep), ("$__rate_interval", "5s"), ("$__interval", "1s"),
                       ("$__range", "15m")):
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def panel_queries() -> list[tuple[str, int, str, str]]:
    out = []
    for path in sorted(DASH_DIR.glob("*.json")):
        d = json.loads(path.read_text())
        for p in d["panels"]:
            for t in p.get("targets", []):
                out.append((d["uid"], p["id"], p["title"], t["expr"]))
    return out


def test_linkem_metrics_pass_promtool(lab_up):
    out = subprocess.run(["docker", "exec", config.PROMETHEUS_CONTAINER, "sh", "-c",
                          f"curl -fsS http://{config.ROUTER_MGMT_IP}:{config.LINKEM_PORT}/metrics "
                          "| promtool check metrics"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_dashboard_query_has_data_after_a_quick_sweep(lab_up, tmp_path):
    started = time.time()
    r = subprocess.run([sys.executable, "-m", "lab", "sweep", "quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr
    assert "not published" not in r.stderr, r.stderr
    # The sweep's own state, as Prometheus scraped it from the Pushgateway: this very sweep, finished.
    deadline = time.monotonic() + 15
    while True:
        start = query(f'quiclab_sweep_start_time_seconds{{sweep="{SWEEP}"}}')
        done = query(f'quiclab_sweep_running{{sweep="{SWEEP}"}} == 0')
        if start and done and float(start[0]["value"][1]) >= started - 1:
            break
        assert time.monotonic() < deadline, f"Prometheus has no finished sweep {SWEEP} started after the test began"
        time.sleep(1)
    assert float(query(f'quiclab_sweep_runs_done{{sweep="{SWEEP}"}}')[0]["value"][1]) == 30
    empty = []
    for uid, pid, title, expr in panel_queries():
        e = substitute(expr, SWEEP)
        deadline = time.monotonic() + 15
        while not query(e):
            if time.monotonic() > deadline:
                empty.append(f"{uid} panel {pid} ({title}): {e}")
                break
            time.sleep(1)
    assert not empty, "panels without data:\n" + "\n".join(empty)


def throughput_expr() -> str:
    d = json.loads((DASH_DIR / "live-link.json").read_text())
    panel = next(p for p in d["panels"] if p["title"] == "Throughput through the link per direction")
    return substitute(panel["targets"][0]["expr"], SWEEP)


def _panel_rate_during_bulk_transfer(size: int) -> tuple[float, list[float]]:
    """Run a bulk HTTP/1.1 transfer, then read the panel's downlink series over its steady state."""
    result: dict[str, object] = {}

    def transfer() -> None:
        result["r"] = run_transfer(get_client("curl"), "nginx", Protocol.H1, size, timeout_s=120)

    t0 = time.time()
    th = threading.Thread(target=transfer)
    th.start()
    th.join(timeout=150)
    t1 = time.time()
    r = result.get("r")
    assert r is not None and r.ok, r
    time.sleep(3)  # the last scrapes
    # steady state: skip the first 3 s (slow start, rate window filling) and the last 2 s
    data = prom("query_range", query=throughput_expr(), start=f"{t0 + 3:.3f}", end=f"{t1 - 2:.3f}", step="1")
    down = next(s for s in data["result"] if s["metric"].get("direction") == "downlink")
    values = [float(v) for _, v in down["values"]]
    assert len(values) >= 5, values
    return statistics.median(values), values


def test_link_throughput_panel_shows_a_bulk_transfer(clean_link):
    shaper.apply(parse_link({"rate": "20mbit", "rtt": "10ms"}))
    size = int(RATE_BPS / 8 * 12)  # ~12 s at the configured rate
    objects.ensure(size)  # created before the clock starts
    med, values = on_quiet_host(lambda: _panel_rate_during_bulk_transfer(size),
                                lambda m: abs(m[0] - RATE_BPS) <= 0.1 * RATE_BPS, attempts=2)[-1]
    assert abs(med - RATE_BPS) <= 0.1 * RATE_BPS, f"downlink {med / 1e6:.2f} Mbit/s, configured 20; {values}"


def test_grafana_serves_the_provisioned_dashboards(lab_up):
    grafana = lab.states((config.GRAFANA_CONTAINER,))[0]
    if grafana.state != "running":
        pytest.skip("Grafana image not available here (no registry reachable)")
    assert services.wait_up(services.GRAFANA, 60), "Grafana's /api/health does not answer"
    with urllib.request.urlopen(config.grafana_url() + "api/health", timeout=5) as resp:
        assert json.load(resp).get("database") == "ok"
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(config.grafana_url() + "api/search?type=dash-db", timeout=5) as resp:
            uids = {d["uid"] for d in json.load(resp)}
        if {"quiclab-live-link", "quiclab-sweep-results"} <= uids:
            break
        assert time.monotonic() < deadline, uids
        time.sleep(2)
    # anonymous viewers only: no login form, no basic auth (admin/admin must not work)
    req = urllib.request.Request(config.grafana_url() + "api/admin/settings",
                                 headers={"Authorization": "Basic YWRtaW46YWRtaW4="})
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(req, timeout=5)


def test_published_ports_bind_localhost_only(lab_up):
    d = docker.client()
    published = []
    for c in d.container.list(filters=[("label", lab.PROJECT_LABEL)]):
        for port, bindings in (c.network_settings.ports or {}).items():
            for b in bindings or []:
                published.append((c.name, port, b.get("HostIp")))
    assert published, "no published ports at all?"
    assert all(ip == "127.0.0.1" for _, _, ip in published), published
    assert {name for name, _, _ in published} >= {config.PROMETHEUS_CONTAINER, config.PUSHGATEWAY_CONTAINER}


def test_pushgateway_exposition_passes_promtool(lab_up):
    out = subprocess.run(["docker", "exec", config.PROMETHEUS_CONTAINER, "sh", "-c",
                          f"curl -fsS http://{config.PUSHGATEWAY_MGMT_IP}:9091/metrics | promtool check metrics"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
