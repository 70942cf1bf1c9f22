"""Issue 10 point 4, "a newer nginx": Debian unstable's nginx and curl (1.30 and 8.23 when added; any version with
the capabilities the lab relies on: issue 27) beside trixie's nginx 1.26 and curl 8.14, each in its own container.
Real verified transfers over HTTP/1.1, HTTP/2 and HTTP/3 through the router,
and everything the lab does per client (evidence, receive-buffer drops, stopping after Ctrl-C, the manifest)
following curl 8.23 into its container."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from lab import agent, config, docker
from lab.endpoints import check_server, get_client
from lab.evidence.capture import collecting
from lab.protocols import Protocol
from lab.results import store
from lab.run import environment
from lab.run.transfer import run_transfer, stop_clients
from tests.lab.parts import require_part

pytestmark = pytest.mark.lab


@pytest.fixture(autouse=True)
def _sid_part_built():
    require_part("sid")

PAIRS = [("curl-sid", "nginx-sid"), ("curl-sid", "nginx"), ("curl", "nginx-sid")]

VERSIONS = """
name = "versions"
sizes = ["100kB"]
repeats = 1
clients = ["curl", "curl-sid"]
servers = ["nginx", "nginx-sid"]
[link]
rtt = "10ms"
rate = "50mbit"
"""


def verified(client: str, server: str, protocol: Protocol, size: int = 1_000_000):
    r = run_transfer(get_client(client), server, protocol, size, timeout_s=60)
    assert r.ok, f"{client}→{server} {protocol.label}: {r.failure}"
    assert r.http_version == protocol.http_version and r.bytes == size and r.sha256 == r.sha256_expected
    return r


@pytest.mark.parametrize("protocol", list(Protocol), ids=lambda p: p.value)
@pytest.mark.parametrize(("client", "server"), PAIRS, ids=lambda x: x)
def test_verified_transfers_between_the_versions(clean_link, client, server, protocol):
    r = verified(client, server, protocol)
    assert r.handshake_s and r.ttfb_s and r.total_s and r.total_s >= r.ttfb_s >= r.handshake_s
    assert r.goodput_bps
    assert r.client_rcvbuf_drops is not None  # counted in the client's own network namespace


def test_nginx_130_serves_the_shared_objects_read_only(clean_link):
    verified("curl-sid", "nginx-sid", Protocol.H3, size=123_461)  # made on demand by nginx 1.26's container
    with pytest.raises(docker.DockerError) as e:
        docker.exec_in(config.SERVER_NGINX130_CONTAINER, ["touch", "/srv/www/obj/x"])
    assert "read-only" in (e.value.stderr or "").lower()


def test_the_implementations_have_what_the_lab_relies_on(lab_up):
    """Capabilities, not minor versions (unstable moves): whatever version the unstable images hold was accepted by
    their build-time check (images/*/capabilities.sh) and is what the manifest records."""
    impls = environment.implementations(["curl", "curl-sid", "nginx", "nginx-sid"])
    assert impls["nginx"]["version"].startswith("nginx/1.26.")
    assert impls["curl"]["version"].startswith("curl 8.14.")
    recorded = {c: dict(line.split("=", 1) for line in docker.exec_in(c, ["cat", "/usr/share/quiclab/implementation"])
                        .splitlines()) for c in (config.SERVER_NGINX130_CONTAINER, config.CLIENT_SID_CONTAINER)}
    nginx, curl = recorded[config.SERVER_NGINX130_CONTAINER], recorded[config.CLIENT_SID_CONTAINER]
    assert nginx["capabilities"].split() == ["h3", "cubic", "0rtt"] and nginx["version"].startswith("nginx/")
    assert curl["capabilities"].split() == ["h3", "ngtcp2"] and "ngtcp2/" in curl["version"]
    assert impls["nginx-sid"]["version"] == nginx["version"]  # what ran is what the build checked
    assert impls["curl-sid"]["version"] == curl["version"]
    assert impls["curl-sid"]["container"] == config.CLIENT_SID_CONTAINER
    assert impls["nginx-sid"]["cc"]["quic"].startswith("cubic") and impls["nginx"]["cc"]["quic"].startswith("newreno")
    for name in ("curl-sid", "nginx-sid"):
        assert impls[name]["cc"]["tcp"] and not impls[name]["cc"]["tcp"].startswith("unknown"), name
    v = environment.versions()
    assert v["nginx-sid"] == nginx["version"] and v["curl-sid"] == curl["version"]
    for container in ("server-nginx130", "client-sid"):
        assert v[f"openssl ({container})"].startswith("OpenSSL 3."), container
    # one Debian suite per image: unstable for the two new containers, trixie for the others
    for container in (config.SERVER_NGINX130_CONTAINER, config.CLIENT_SID_CONTAINER):
        assert "sid" in docker.exec_in(container, ["cat", "/etc/debian_version"]), container
    for container in (config.SERVER_CONTAINER, config.CLIENT_CONTAINER):
        assert docker.exec_in(container, ["cat", "/etc/debian_version"]).startswith("13."), container


def test_nginx_130s_quic_has_cubic_and_nginx_126s_has_not(lab_up):
    """The registry's claim, checked against the binaries: nginx 1.30's QUIC code logs its CUBIC steps (debug
    messages compiled in: Debian builds --with-debug); nginx 1.26's knows slow start and avoidance only."""
    def cc_messages(container: str) -> str:
        return docker.exec_in(container, ["sh", "-c", "grep -a -o 'quic congestion ack cubic\\|quic congestion "
                                                      "avoidance' /usr/sbin/nginx | sort -u"])
    assert cc_messages(config.SERVER_NGINX130_CONTAINER).split() == ["quic", "congestion", "ack", "cubic"]
    assert cc_messages(config.SERVER_CONTAINER).split() == ["quic", "congestion", "avoidance"]


def test_curl_823s_evidence_is_taken_in_its_own_container(clean_link, tmp_path):
    adapter = get_client("curl-sid")
    with collecting(("keylog", "qlog"), tmp_path, tmp_path / "h3", adapter.name, adapter.container,
                    check_server("nginx-sid")) as ev:
        r = run_transfer(adapter, "nginx-sid", Protocol.H3, 1_000_000, timeout_s=60, env=ev.client_env,
                         port=ev.server_port)
    assert r.ok, r.failure
    assert not ev.problems, ev.problems
    keys = ev.find("keys.log")
    assert keys is not None and "CLIENT_TRAFFIC_SECRET_0" in keys.read_text()
    qlogs = [f for f in ev.files if f.name.startswith("client-") and f.name.endswith(".sqlog")]
    assert len(qlogs) == 1
    head = json.loads(qlogs[0].read_text().lstrip("\x1e").splitlines()[0])
    assert head["trace"]["vantage_point"] == {"name": "ngtcp2", "type": "client"}
    left = docker.exec_in(adapter.container, ["sh", "-c", "ls -A /tmp/quiclab-evidence 2>/dev/null | wc -l"])
    assert left.strip() == "0"


def _curls(container: str) -> int:
    return int(docker.exec_in(container, ["sh", "-c", "pgrep -c -x curl || true"]).strip() or 0)


def test_stop_clients_stops_a_transfer_in_the_second_client_container(clean_link, monkeypatch):
    """After Ctrl-C the lab stops every client's processes in that client's container, not only quiclab-client's.
    (stop_clients() sees only curl 8.23's registry entry here: the shared lab's other clients may be busy.)"""
    import lab.run.transfer
    from lab.endpoints.registry import Registry, registry

    monkeypatch.setattr(lab.run.transfer, "registry", lambda: Registry({"curl-sid": registry().client("curl-sid")}))
    container = get_client("curl-sid").container
    server = check_server("nginx-sid")
    agent.close_all()  # this process's own client agents may keep a curl started for their next fetch: not counted
    docker.client().container.execute(container, ["quiclab-fetch", "--http3-only", "-sS", "--cacert", config.CA_FILE,
                                                  "--resolve", f"{server.host}:443:{server.address}",
                                                  "--limit-rate", "50k", server.url("/obj/10000000")], detach=True)
    deadline = time.monotonic() + 10
    while _curls(container) == 0:
        assert time.monotonic() < deadline, "the slow transfer did not start"
        time.sleep(0.1)
    stop_clients()
    deadline = time.monotonic() + 5
    while _curls(container):
        assert time.monotonic() < deadline, "curl 8.23 was left running after stop_clients()"
        time.sleep(0.1)


def test_every_client_container_trusts_every_server(lab_up):
    from lab.endpoints.registry import registry

    reg = registry()
    # curl's and gtlsclient's containers: the browser's container trusts the CA through its NSS database, which
    # tests/lab/test_workloads.py checks by loading pages
    curl_containers = {reg.client(n).container for n in reg.names("client") if (reg.client(n).adapter or "").startswith(
        ("lab.endpoints.curl", "lab.endpoints.ngtcp2"))}
    for container in sorted(curl_containers):
        for name in reg.names("server"):
            impl = check_server(name)
            flag = "--http1.1" if impl.supports(Protocol.H1) else "--http3-only"
            out = docker.exec_in(container, ["quiclab-fetch", flag, "-sS", "--cacert", config.CA_FILE, "--max-time",
                                             "10", "--resolve", f"{impl.host}:{impl.port}:{impl.address}",
                                             "-o", "/dev/null", impl.url("/obj/10000")])
            assert json.loads(out)["exit"] == 0, (container, name, out)


def test_a_sweep_over_both_versions_records_them(lab_up, tmp_path):
    scenario = tmp_path / "versions.toml"
    scenario.write_text(VERSIONS)
    p = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    folder = next(f for f in tmp_path.iterdir() if f.is_dir())
    runs = store.load_runs(folder)
    assert len(runs) == 2 * 2 * 3 and all(r.status == "ok" and r.sha256_ok for r in runs), \
        [(r.client, r.server, r.protocol, r.failure) for r in runs if r.status != "ok"]
    by_key = {(r.client, r.server, r.protocol): r for r in runs}
    assert by_key["curl", "nginx-sid", "h3"].cc_server.startswith("cubic (nginx QUIC")
    assert by_key["curl", "nginx", "h3"].cc_server.startswith("newreno (nginx QUIC")
    assert by_key["curl-sid", "nginx", "h3"].cc_client.startswith("cubic (curl: ngtcp2")
    assert all(r.client_rcvbuf_drops is not None for r in runs if r.client == "curl-sid")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["implementations"]["nginx-sid"]["version"].startswith("nginx/")
    assert "ngtcp2/" in manifest["implementations"]["curl-sid"]["version"]
    assert manifest["versions"]["nginx-sid"] == manifest["implementations"]["nginx-sid"]["version"]
    assert "HTTP/3 curl-sid→nginx-sid" in (folder / "summary.md").read_text()
