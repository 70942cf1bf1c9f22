"""Issue 33, first slice: the stacks built on first use (lab/optional.py ON_DEMAND) move real bytes through the
router, verified as every transfer is (protocol, size, SHA-256; HTTP/3 never falls back), with the version read
from the built binary or library. Each part is built here if it is not yet (scripts/test.sh builds them ahead) and
started in this lab by lab.ensure_available, as a run or sweep does; a part that cannot be built skips, naming why."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lab import agent, objects
from lab.endpoints import get_client
from lab.endpoints.registry import registry
from lab.protocols import Protocol
from lab.results import objects_csv as objects_file
from lab.results.schema import read_runs
from lab.run import environment
from lab.run.transfer import run_transfer
from tests.lab.parts import require_part, started

pytestmark = pytest.mark.lab


def verified(client: str, server: str, protocol: Protocol, size: int = 1_000_000, env: dict[str, str] | None = None):
    r = run_transfer(get_client(client), server, protocol, size, timeout_s=60, env=env)
    assert r.ok, f"{client}→{server} {protocol.label}: {r.failure}"
    assert r.http_version == protocol.http_version and r.bytes == size and r.sha256 == r.sha256_expected
    assert r.total_s and r.goodput_bps
    return r


def in_container(container: str, *argv: str) -> str:
    return agent.run(container, list(argv), timeout_s=30)


# --- HAProxy -----------------------------------------------------------------------------------------------------

@pytest.fixture
def haproxy(clean_link) -> None:
    started(["curl"], ["haproxy"])


@pytest.mark.parametrize("protocol", list(Protocol))
def test_curl_against_haproxy(haproxy, protocol):
    r = verified("curl", "haproxy", protocol)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s


def test_haproxy_serves_objects_made_on_demand(haproxy):
    verified("curl", "haproxy", Protocol.H3, size=123_457)  # made by nginx into the shared volume after start


def test_haproxy_is_built_with_quic_on_openssl_35_and_its_version_recorded(haproxy):
    vv = in_container(registry().server("haproxy").container, "haproxy", "-vv")
    assert "USE_QUIC=1" in vv and "USE_QUIC_OPENSSL_COMPAT=1" in vv
    assert "Running on OpenSSL version : OpenSSL 3.5" in vv
    assert environment.versions()["haproxy"].startswith("HAProxy version 3.0.")


# --- aioquic -----------------------------------------------------------------------------------------------------

@pytest.fixture
def aioquic(clean_link) -> None:
    started(["aioquic-client", "curl"], ["aioquic", "nginx"])


@pytest.mark.parametrize(("client", "server"), [("aioquic-client", "aioquic"), ("aioquic-client", "nginx"),
                                                ("curl", "aioquic")])
def test_aioquic_transfers(aioquic, client, server):
    r = verified(client, server, Protocol.H3)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s


def test_aioquic_client_writes_its_key_log_and_qlog(aioquic):
    container = registry().client("aioquic-client").container
    env = {"SSLKEYLOGFILE": "/tmp/quiclab-test-aioquic.keys", "QLOGDIR": "/tmp/quiclab-test-aioquic-qlog"}
    in_container(container, "rm", "-rf", env["SSLKEYLOGFILE"], env["QLOGDIR"])
    verified("aioquic-client", "nginx", Protocol.H3, size=100_000, env=env)
    assert "CLIENT_TRAFFIC_SECRET_0 " in in_container(container, "cat", env["SSLKEYLOGFILE"])
    qlogs = in_container(container, "ls", env["QLOGDIR"]).split()
    assert len(qlogs) == 1 and qlogs[0].endswith(".qlog"), qlogs


def test_aioquic_versions_and_the_servers_congestion_control_read_back(aioquic):
    versions = environment.versions()
    assert versions["aioquic"] == versions["aioquic-client"] == "aioquic 1.7.2"
    # the sender's algorithm, chosen per run, runs in its own instance and is read back from its command line
    done = subprocess.run([sys.executable, "-m", "lab", "run", "-p", "h3", "--client", "aioquic-client", "--server",
                           "aioquic", "--size", "100kB", "--sender-cc", "cubic", "--json"],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.splitlines()[-1])
    assert doc["status"] == "ok" and doc["cc_sender"] == "cubic" and "command line" in doc["cc_sender_source"], doc


# --- quic-go -----------------------------------------------------------------------------------------------------

@pytest.fixture
def quicgo(clean_link) -> None:
    started(["quic-go-client", "curl"], ["quic-go", "nginx"])


@pytest.mark.parametrize(("client", "server"), [("quic-go-client", "quic-go"), ("quic-go-client", "nginx"),
                                                ("curl", "quic-go")])
def test_quic_go_transfers(quicgo, client, server):
    r = verified(client, server, Protocol.H3)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s


def test_quic_go_client_writes_its_key_log_and_qlog(quicgo):
    container = registry().client("quic-go-client").container
    env = {"SSLKEYLOGFILE": "/tmp/quiclab-test-quicgo.keys", "QLOGDIR": "/tmp/quiclab-test-quicgo-qlog"}
    in_container(container, "rm", "-rf", env["SSLKEYLOGFILE"], env["QLOGDIR"])
    verified("quic-go-client", "nginx", Protocol.H3, size=100_000, env=env)
    assert "CLIENT_TRAFFIC_SECRET_0 " in in_container(container, "cat", env["SSLKEYLOGFILE"])
    qlogs = in_container(container, "ls", env["QLOGDIR"]).split()
    assert len(qlogs) == 1 and qlogs[0].endswith("_client.sqlog"), qlogs


def test_quic_go_version_is_read_from_the_binary(quicgo):
    versions = environment.versions()
    assert versions["quic-go"] == versions["quic-go-client"]
    assert versions["quic-go"].startswith("quic-go v0.65.") and "(go1.26" in versions["quic-go"]


# --- both clients verify the server's certificate ---------------------------------------------------------------

@pytest.mark.parametrize("client", ["aioquic-client", "quic-go-client"])
def test_the_new_clients_refuse_a_certificate_for_another_name(clean_link, client):
    """Sent to nginx's address under caddy's name: nginx's certificate does not carry it, so the handshake fails
    and nothing is downloaded (a client that did not verify would fetch the object)."""
    started([client], ["nginx"])
    adapter = get_client(client)
    nginx = registry().server("nginx")
    argv = ["env", "PROTOCOL=h3", "URL=https://caddy.quiclab/obj/10000", "TIMEOUT=10", f"HOST_ADDR={nginx.address}",
            adapter.processes[0]]
    doc = json.loads(in_container(adapter.container, *argv).strip().splitlines()[-1])
    assert doc["exit"] != 0 and doc["curl"]["size_download"] == 0 and doc["curl"]["http_version"] == "", doc


@pytest.mark.parametrize(("client", "server"), [("aioquic-client", "aioquic"), ("quic-go-client", "quic-go"),
                                                ("aioquic-client", "haproxy"), ("quic-go-client", "haproxy")])
def test_the_new_clients_fetch_n_objects_on_one_connection(clean_link, client, server):
    """URL may name N objects: fetched in turn on one connection, each one's size and SHA-256 reported and checked
    here against the server's objects; the line's total is their sum."""
    started([client], [server])
    fetches_n_objects(client, server)


def fetches_n_objects(client: str, server: str) -> None:
    """The client fetches three objects named in one URL over one HTTP/3 connection: each one's size, SHA-256 (the
    server's objects) and status, and the line's total, checked."""
    sizes = [10_000, 100_000, 1_000_000]
    expected = [objects.ensure(n) for n in sizes]
    adapter, target = get_client(client), registry().server(server)
    urls = " ".join(target.url(objects.path_for(n)) for n in sizes)
    argv = ["env", "PROTOCOL=h3", f"URL={urls}", "TIMEOUT=60", f"HOST_ADDR={target.address}", adapter.processes[0]]
    doc = json.loads(in_container(adapter.container, *argv).strip().splitlines()[-1])
    assert doc["exit"] == 0 and doc["curl"]["http_version"] == "3", doc
    assert [(t["size"], t["sha256"], t["status"]) for t in doc["transfers"]] == [
        (n, sha, 200) for n, sha in zip(sizes, expected, strict=True)]
    assert doc["curl"]["size_download"] == sum(sizes)


@pytest.mark.xfail(strict=False, reason=(
    "undiagnosed: in the full suite's clean-clone run of 2026-11-25 chromium loaded no page from haproxy, aioquic "
    "or quic-go (ERR_QUIC_PROTOCOL_ERROR from all three, after the earlier lab tests); alone and in its file it "
    "passed every time (3 runs). Reported as XPASS when it passes"))
def test_chromium_loads_a_page_from_each_new_server(clean_link, tmp_path):
    """The page (index.html) must come as text/html and its objects as they are: chromium renders it and checks
    every object by size and SHA-256 in the page, over HTTP/3 (quic-go's http.FileServer had redirected
    .../index.html to .../ and served that as octet-stream, which chromium did not render)."""
    require_part("browser")
    started(["chromium"], ["haproxy", "aioquic", "quic-go"])
    scenario = tmp_path / "stacks-browser.toml"
    scenario.write_text('name = "stacks-browser"\nrepeats = 1\ntimeout = 120\nprotocols = ["h3"]\n'
                        'clients = ["chromium"]\nservers = ["haproxy", "aioquic", "quic-go"]\n'
                        'workload = "page:5x20kB"\n')
    done = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out",
                           str(tmp_path / "results")], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    records = read_runs(folder / "runs.csv").records
    assert sorted(r.server for r in records) == ["aioquic", "haproxy", "quic-go"]
    assert all(r.status == "ok" and r.http_version == "3" for r in records), [(r.server, r.failure) for r in records]
    objs = objects_file.read(folder, records)
    assert all(len(objs[r.run_key]) == 5 and all(o.ok for o in objs[r.run_key]) for r in records)
