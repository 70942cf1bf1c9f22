"""Issue 'the lab': real transfers over all three protocols through the router, verified."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from lab import agent, config, docker, lab
from lab.endpoints import get_client
from lab.link import router, shaper
from lab.link.spec import parse_link
from lab.protocols import Protocol
from lab.results.schema import COLUMNS
from lab.run.transfer import run_transfer

from .conftest import quiclab_popen
from .probes import client

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("protocol", list(Protocol))
def test_transfer_through_router_is_verified(clean_link, protocol):
    r = run_transfer(get_client("curl"), "nginx", protocol, 1_000_000, timeout_s=60)
    assert r.ok, r.failure
    assert r.http_version == protocol.http_version
    assert r.bytes == 1_000_000 and r.sha256 == r.sha256_expected
    assert r.handshake_s and r.ttfb_s and r.total_s and r.total_s >= r.ttfb_s >= r.handshake_s


def test_cli_h3_10MB_json(clean_link):
    p = subprocess.run([sys.executable, "-m", "lab", "run", "--protocol", "h3", "--size", "10MB", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip())
    assert doc["status"] == "ok" and doc["http_version"] == "3" and doc["bytes"] == 10_000_000 and doc["sha256_ok"]
    # the record whole, as a sweep's runs.csv row: the sender's CC read back and the link's counters included
    assert list(doc) == list(COLUMNS)
    assert doc["cc_sender"] and doc["cc_sender_source"] and doc["wire_down_bytes"] > 10_000_000


def test_ctrl_c_stops_the_transfer_and_says_so(clean_link):
    shaper.apply(parse_link({"rate": "5mbit"}))  # 20 MB take 32 s: the transfer is surely running when interrupted
    agent.close_all()  # this process's own client agent may keep a curl started for its next fetch: not counted
    p = quiclab_popen("run", "--protocol", "h3", "--size", "20MB")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _client_runs("curl"):
            time.sleep(0.2)
        assert _client_runs("curl"), "the transfer never started"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "error: interrupted", err
    assert not _client_runs("curl"), "the transfer went on in the client container after Ctrl-C"
    assert "5 Mbit/s" in subprocess.run([sys.executable, "-m", "lab", "shape", "--show"], capture_output=True,
                                        text=True, timeout=60).stdout  # the link the user set is left alone


def _client_runs(process: str) -> bool:
    return bool(docker.exec_in(config.CLIENT_CONTAINER, ["sh", "-c", f"pgrep -x {process} || true"]).strip())


def test_any_size_is_served_and_verified(clean_link):
    r = run_transfer(get_client("curl"), "nginx", Protocol.H2, 123_457, timeout_s=60)
    assert r.ok and r.bytes == 123_457, r.failure


def _reaches_server() -> bool:
    out = client("quiclab-fetch", "--http1.1", "-sS", "--cacert", config.CA_FILE, "--connect-timeout", "2",
                 "--max-time", "4", f"https://{config.SERVER_NAME}/healthz")
    return json.loads(out)["exit"] == 0


def test_router_is_the_only_path(clean_link):
    route = client("ip", "route", "get", config.SERVER_IP)
    assert f"via {config.ROUTER_CLIENT_SIDE_IP}" in route
    assert _reaches_server()
    router.run("quiclab-router", "forwarding", "off")
    try:
        assert not _reaches_server(), "the client reached the server with the router's forwarding off"
        with pytest.raises(docker.DockerError):
            client("ping", "-c", "2", "-i", "0.2", "-W", "1", config.SERVER_IP)
    finally:
        router.run("quiclab-router", "forwarding", "on")
    assert _reaches_server()


def test_client_and_server_hold_no_net_admin(lab_up):
    for container in (config.CLIENT_CONTAINER, config.SERVER_CONTAINER):
        with pytest.raises(docker.DockerError) as e:
            docker.exec_in(container, ["ip", "route", "add", "10.99.0.0/24", "dev", "eth0"])
        assert "not permitted" in (e.value.stderr or "").lower()
    caps = {c.name: c.host_config.cap_add or [] for c in docker.client().container.list(
        filters=[("label", lab.PROJECT_LABEL)])}
    holders = {n for n, c in caps.items() if "NET_ADMIN" in c}
    # the router in the lab's namespaces; `hostnet` (if this lab's compose file has it) in the host's, for the
    # bridge rules only (tests/lab/test_instances.py checks it holds nothing else)
    assert config.ROUTER_CONTAINER in holders and holders <= {config.ROUTER_CONTAINER, config.HOSTNET_CONTAINER}


def test_lab_networks_are_internal_and_ports_loopback_only(lab_up):
    d = docker.client()
    for net in (f"{config.PROJECT}_clientnet", f"{config.PROJECT}_servernet", f"{config.PROJECT}_mgmt"):
        assert d.network.inspect(net).internal is True
    for c in d.container.list():
        for bindings in (c.network_settings.ports or {}).values():
            for b in bindings or []:
                assert b["HostIp"] == "127.0.0.1", (c.name, b)
