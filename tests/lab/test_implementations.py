"""Issue 'implementations matrix': real verified transfers with every server and client through the router, and a
quick client x server x protocol sweep whose matrix is "ok" where supported and "unsupported" elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from lab import config, docker, lab
from lab.endpoints import check_server, get_client
from lab.endpoints.registry import UNSUPPORTED_EXIT, registry
from lab.protocols import Protocol
from lab.results import store
from lab.run.transfer import run_transfer

pytestmark = pytest.mark.lab

MATRIX = """
name = "matrix"
sizes = ["100kB"]
repeats = 1
clients = ["curl", "gtlsclient"]
servers = ["nginx", "ngtcp2", "caddy"]
[link]
rtt = "10ms"
rate = "50mbit"
"""


#: Pairs that can stall with nothing received until the timeout (docs/implementations.md, "Known stalls"): curl 8.14
#: (OpenSSL's QUIC) now and then sends its request without its control and QPACK streams (curl/curl#21463, ~0.3 % of
#: connections; 1 of 400 in a captured hunt here), and a server that allows a QPACK dynamic table (gtlsserver,
#: nginx) then waits, as RFC 9204 requires, for encoder instructions that never come. In a sweep such a run is a
#: timeout result; here one more attempt is made, with a warning, and it must succeed.
KNOWN_STALLS = {("curl", "ngtcp2", Protocol.H3), ("curl", "nginx", Protocol.H3)}


def verified(client: str, server: str, protocol: Protocol, size: int = 1_000_000):
    r = run_transfer(get_client(client), server, protocol, size, timeout_s=60)
    if (client, server, protocol) in KNOWN_STALLS and r.exit_code == 28 and "0 bytes received" in r.failure:
        warnings.warn(f"{client}→{server} {protocol.label} stalled ({r.failure}); one more attempt", stacklevel=2)
        r = run_transfer(get_client(client), server, protocol, size, timeout_s=60)
    assert r.ok, f"{client}→{server} {protocol.label}: {r.failure}"
    assert r.http_version == protocol.http_version and r.bytes == size and r.sha256 == r.sha256_expected
    assert r.total_s and r.goodput_bps
    return r


def test_curl_against_ngtcp2_over_h3(clean_link):
    r = verified("curl", "ngtcp2", Protocol.H3)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s


@pytest.mark.parametrize("protocol", list(Protocol))
def test_curl_against_caddy(clean_link, protocol):
    verified("curl", "caddy", protocol)


@pytest.mark.parametrize("server", ["nginx", "ngtcp2", "caddy"])
def test_gtlsclient_over_h3(clean_link, server):
    r = verified("gtlsclient", server, Protocol.H3)
    # gtlsclient prints no times: its wrapper sees them from outside (its key log, its download folder; inotify)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s > 0


def test_objects_made_on_demand_are_served_by_every_server(clean_link):
    for server in ("nginx", "ngtcp2", "caddy"):
        verified("curl", server, Protocol.H3, size=123_457)


def test_an_unsupported_combination_is_not_a_failure(lab_up):
    # `quiclab run` asks the registry once before running (a sweep: lab/plan/support.py): h2 to ngtcp2 is reported
    # unsupported, not run and not a failure, while h3 runs
    done = subprocess.run([sys.executable, "-m", "lab", "run", "-p", "h2,h3", "--server", "ngtcp2", "--size", "1kB",
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    by = {doc["protocol"]: doc for doc in map(json.loads, done.stdout.splitlines())}
    assert by["h2"]["status"] == "unsupported" and "ngtcp2 does not speak HTTP/2" in by["h2"]["failure"]
    assert by["h3"]["status"] == "ok" and by["h3"]["sha256_ok"]
    # The wrapper itself keeps the contract when asked anyway: exit code 127, nothing run.
    p = subprocess.run(["docker", "exec", config.CLIENT_CONTAINER, "env", "PROTOCOL=h2", "URL=https://ngtcp2.quiclab/obj/1",
                        "quiclab-ngtcp2-fetch"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 127 and "HTTP/3 only" in p.stderr


def test_an_adapter_asked_for_an_unsupported_combination_says_so_itself(lab_up):
    # the caller decides support before running (lab/plan/support.py); asked anyway, the client's wrapper exits 127
    # and the result is "unsupported", never a failure
    r = run_transfer(get_client("gtlsclient"), "nginx", Protocol.H2, 1000, timeout_s=5)
    assert r.unsupported and not r.ok and r.exit_code == UNSUPPORTED_EXIT
    assert r.failure == "unsupported: gtlsclient speaks HTTP/3 only, not h2"


def test_every_server_certificate_comes_from_the_lab_ca(lab_up):
    servers = registry().names("server")
    lab.ensure_available(servers=servers)  # the stacks built on first use are started (built, if need be) here
    for name in servers:
        impl = check_server(name)
        out = docker.exec_in(config.CLIENT_CONTAINER, [
            "quiclab-fetch", "--http1.1" if impl.supports(Protocol.H1) else "--http3-only", "-sS", "--cacert",
            "/certs/ca.pem", "--max-time", "10", "-o", "/dev/null", impl.url("/obj/10000")])
        assert json.loads(out)["exit"] == 0, (name, out)


def test_quick_matrix_sweep(lab_up, tmp_path):
    scenario = tmp_path / "matrix.toml"
    scenario.write_text(MATRIX)
    p = subprocess.run([sys.executable, "-m", "lab", "sweep", "--scenario", str(scenario), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    folder = next(f for f in tmp_path.iterdir() if f.is_dir())
    runs = store.load_runs(folder)
    assert len(runs) == 3 * 2 * 3
    reg = registry()
    for r in runs:
        why = reg.unsupported(r.client, r.server, Protocol(r.protocol))
        if why:
            assert r.status == "unsupported" and r.failure == why, r
        else:
            assert r.status == "ok", (r.client, r.server, r.protocol, r.failure)
            assert r.total_s and r.goodput_bps and r.sha256_ok
            assert "unknown" not in (r.cc_client, r.cc_server) and "none" not in (r.cc_client, r.cc_server)
    ok = {(r.client, r.server, r.protocol) for r in runs if r.status == "ok"}
    assert len(ok) == 10  # curl: 3 nginx + 1 ngtcp2 + 3 caddy; gtlsclient: h3 against all 3
    unsupported = {(r.client, r.server, r.protocol) for r in runs if r.status == "unsupported"}
    assert ("gtlsclient", "nginx", "h2") in unsupported and ("curl", "ngtcp2", "h1") in unsupported
    by_key = {(r.client, r.server, r.protocol): r for r in runs}
    assert by_key["gtlsclient", "ngtcp2", "h3"].cc_client == "cubic"
    assert by_key["gtlsclient", "ngtcp2", "h3"].cc_server == "cubic"
    assert by_key["curl", "nginx", "h3"].cc_server == "newreno (nginx QUIC, fixed)"
    assert by_key["curl", "caddy", "h3"].cc_server.startswith("newreno (quic-go")

    manifest = json.loads((folder / "manifest.json").read_text())
    impls = manifest["implementations"]
    assert set(impls) == {"curl", "gtlsclient", "nginx", "ngtcp2", "caddy"}
    for name, doc in impls.items():
        assert doc["version"] and not doc["version"].startswith("unknown"), (name, doc)
        assert doc["cc"]["quic"], name
    assert impls["nginx"]["version"].startswith("nginx/1.26")
    assert impls["caddy"]["version"].startswith("2.6")
    assert "ngtcp2-server" in impls["ngtcp2"]["version"] and "ngtcp2-client" in impls["gtlsclient"]["version"]
    assert impls["curl"]["version"].startswith("curl 8.14")
    assert impls["caddy"]["cc"]["tcp"] and impls["ngtcp2"]["cc"]["tcp"] is None  # ngtcp2 speaks no TCP here
    assert impls["gtlsclient"]["quic_cc_options"] == ["cubic", "reno", "bbr"]

    summary = (folder / "summary.md").read_text()
    assert "| HTTP/2 gtlsclient→caddy | 0 | unsupported |" in summary
    assert "| HTTP/3 gtlsclient→ngtcp2 | 1 |" in summary
