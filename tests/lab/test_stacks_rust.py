"""Issue 33: the Rust stacks (optional parts quinn and quiche, one Cargo workspace in images/rust) move real bytes
through the router, verified as every transfer is (protocol, size, SHA-256; HTTP/3 never falls back): each new
server with a known client (curl), each new client with a known server (nginx) and with its own server. The
version is read from the built binary (the library versions it was built with), the server's congestion control
chosen per run is read back from its command line, the clients write their key log and qlog, verify the server's
certificate, and fetch N objects on one connection. curl 8.23 (curl-sid) gets whole objects from quinn (the server
once stopped the request stream). Each part is built here if it is not yet (on first use, as a run does); a part
that cannot be built skips, naming why."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from lab.endpoints import get_client
from lab.endpoints.registry import registry
from lab.protocols import Protocol
from lab.run import environment
from tests.lab.test_stacks import fetches_n_objects, in_container, started, verified

pytestmark = pytest.mark.lab


@dataclass(frozen=True)
class Stack:
    server: str
    client: str
    version: str  # how `version` starts
    other_cc: str  # a congestion control that is not the default


STACKS = {"quinn": Stack("quinn", "quinn-client", "quinn 0.11.", "bbr"),
          "quiche": Stack("quiche", "quiche-client", "quiche 0.30.", "bbr")}  # its BBRv2


@pytest.fixture(params=list(STACKS))
def stack(request, clean_link) -> Stack:
    s = STACKS[request.param]
    started([s.client, "curl"], [s.server, "nginx"])
    return s


@pytest.mark.parametrize("pair", ["own", "known-server", "known-client"])
def test_transfers(stack, pair):
    client, server = {"own": (stack.client, stack.server), "known-server": (stack.client, "nginx"),
                      "known-client": ("curl", stack.server)}[pair]
    r = verified(client, server, Protocol.H3)
    assert r.handshake_s and r.ttfb_s and r.total_s >= r.ttfb_s >= r.handshake_s


def test_the_client_writes_its_key_log_and_qlog(stack):
    container = registry().client(stack.client).container
    env = {"SSLKEYLOGFILE": f"/tmp/quiclab-test-{stack.server}.keys",
           "QLOGDIR": f"/tmp/quiclab-test-{stack.server}-qlog"}
    in_container(container, "rm", "-rf", env["SSLKEYLOGFILE"], env["QLOGDIR"])
    verified(stack.client, "nginx", Protocol.H3, size=100_000, env=env)
    assert "CLIENT_TRAFFIC_SECRET_0 " in in_container(container, "cat", env["SSLKEYLOGFILE"])
    qlogs = in_container(container, "ls", env["QLOGDIR"]).split()
    assert len(qlogs) == 1 and qlogs[0].endswith("_client.sqlog"), qlogs
    head = in_container(container, "head", "-c", "2000", f"{env['QLOGDIR']}/{qlogs[0]}")
    # quinn's qlog 0.15 says "qlog_format", quiche's qlog 0.18 "serialization_format": both JSON-SEQ
    assert '"JSON-SEQ"' in head, head[:300]


def test_the_version_is_read_from_the_binary_and_the_servers_congestion_control_read_back(stack):
    versions = environment.versions()
    assert versions[stack.server] == versions[stack.client]
    assert versions[stack.server].startswith(stack.version), versions[stack.server]
    # the sender's algorithm, chosen per run, runs in its own instance and is read back from its command line
    done = subprocess.run([sys.executable, "-m", "lab", "run", "-p", "h3", "--client", stack.client, "--server",
                           stack.server, "--size", "100kB", "--sender-cc", stack.other_cc, "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.splitlines()[-1])
    assert doc["status"] == "ok" and doc["cc_sender"] == stack.other_cc, doc
    assert "command line" in doc["cc_sender_source"], doc


def test_the_client_refuses_a_certificate_for_another_name(stack):
    """Sent to nginx's address under caddy's name: nginx's certificate does not carry it, so the handshake fails
    and nothing is downloaded (a client that did not verify would fetch the object)."""
    adapter = get_client(stack.client)
    nginx = registry().server("nginx")
    argv = ["env", "PROTOCOL=h3", "URL=https://caddy.quiclab/obj/10000", "TIMEOUT=10", f"HOST_ADDR={nginx.address}",
            adapter.processes[0]]
    doc = json.loads(in_container(adapter.container, *argv).strip().splitlines()[-1])
    assert doc["exit"] == 60 and doc["curl"]["size_download"] == 0 and doc["curl"]["http_version"] == "", doc


def test_the_client_fetches_n_objects_on_one_connection(stack):
    fetches_n_objects(stack.client, stack.server)


def test_the_server_answers_404_and_the_client_fails_without_h3(stack):
    """A path that is not an object: 404 from the server, and the client's line is a failure, not HTTP/3."""
    adapter, target = get_client(stack.client), registry().server(stack.server)
    argv = ["env", "PROTOCOL=h3", f"URL={target.url('/obj/no-such-object')}", "TIMEOUT=20",
            f"HOST_ADDR={target.address}", adapter.processes[0]]
    doc = json.loads(in_container(adapter.container, *argv).strip().splitlines()[-1])
    assert doc["exit"] == 1 and doc["curl"]["response_code"] == 404 and doc["curl"]["http_version"] == "", doc


@pytest.mark.parametrize("size", [10_000, 1_000_000])
def test_curl_8_23_gets_whole_objects_from_quinn(clean_link, size):
    """The server once dropped each request stream without reading the request's FIN: quinn then stops the stream
    (STOP_SENDING, error 0, on dropping its RecvStream), which curl 8.23 (ngtcp2 1.24, nghttp3 1.17) took for a reset
    by the server: exit 18, "HTTP/3 stream 0 reset by server (error 0x0)", with or without the whole body (curl 8.14
    ignores it). The server now reads each request to its end (images/rust/quinn-h3/src/server.rs end_request)."""
    started(["curl-sid"], ["quinn"])
    verified("curl-sid", "quinn", Protocol.H3, size=size)


@pytest.mark.parametrize("client", ["quinn-client", "kwik-client"])
def test_a_client_that_ends_the_request_stream_late_gets_objects_from_haproxy(clean_link, client):
    """quinn-client (the h3 crate) and kwik-client send the request stream's FIN in a STREAM frame of its own after
    HEADERS, so HAProxy forwards the GET to its file server with `Transfer-Encoding: chunked` and an empty body;
    lighttpd refused that (HTTP 400, "GET/HEAD with content-length") until images/server-haproxy/lighttpd.conf
    allowed it (method-get-body): the goodput matrix had quinn-client -> haproxy 5 of 5 and kwik-client -> haproxy 4
    of 5 failed with HTTP 400."""
    started([client], ["haproxy"])
    for _ in range(3):
        verified(client, "haproxy", Protocol.H3, size=1_000_000)
