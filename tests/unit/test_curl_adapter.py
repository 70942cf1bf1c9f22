import json

import pytest

from lab.endpoints.curl import CurlClient
from lab.models import TransferRequest
from lab.protocols import Protocol


def req(p: Protocol, size: int = 1000) -> TransferRequest:
    return TransferRequest(protocol=p, size=size, url=f"https://server.quiclab/obj/{size}", timeout_s=60)


def test_h3_never_falls_back():
    cmd = CurlClient().command(req(Protocol.H3))
    assert "--http3-only" in cmd and "--http3" not in cmd
    assert "--ipv4" in cmd  # the lab is IPv4 only: no wait for an AAAA answer in the measured connect time
    assert "--insecure" not in cmd and "-k" not in cmd
    assert cmd[cmd.index("--cacert") + 1] == "/certs/ca.pem"


def test_curl_connects_to_the_registrys_address_for_the_servers_name():
    """Not /etc/hosts or DNS: the server's address comes from the registry (the TLS name stays its host)."""
    cmd = CurlClient().command(req(Protocol.H3))
    assert cmd[cmd.index("--resolve") + 1] == "server.quiclab:443:10.71.2.10"
    qlog = TransferRequest(protocol=Protocol.H3, size=1, url="https://nginx130.quiclab:4433/obj/1", timeout_s=5)
    cmd = CurlClient().command(qlog)
    assert cmd[cmd.index("--resolve") + 1] == "nginx130.quiclab:4433:10.71.2.13"
    other = TransferRequest(protocol=Protocol.H1, size=1, url="https://10.71.2.12/obj/1", timeout_s=5)
    assert "--resolve" not in CurlClient().command(other)


def test_flags_per_protocol():
    c = CurlClient()
    assert "--http1.1" in c.command(req(Protocol.H1))
    assert "--http2" in c.command(req(Protocol.H2))


def test_command_is_an_argument_list_ending_with_the_url():
    cmd = CurlClient().command(req(Protocol.H2, 5))
    assert cmd[0] == "quiclab-fetch"
    assert cmd[-1] == "https://server.quiclab/obj/5"
    assert cmd[cmd.index("--max-time") + 1] == "60"


def test_parse_success():
    w = {"http_version": "3", "size_download": 1000, "time_appconnect": 0.01, "time_starttransfer": 0.02,
         "time_total": 0.05, "exitcode": 0, "errormsg": None}
    r = CurlClient().parse("noise\n" + json.dumps({"exit": 0, "sha256": "ab" * 32, "curl": w}))
    assert (r.exit_code, r.http_version, r.bytes, r.sha256) == (0, "3", 1000, "ab" * 32)
    assert (r.handshake_s, r.ttfb_s, r.total_s) == (0.01, 0.02, 0.05)
    assert r.udp_rcvbuf_drops is None  # an older wrapper (or another client) that does not report it


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (37, 37), (-1, None), ("5", None), (True, None)])
def test_parse_receiver_drops(value, expected):
    w = {"http_version": "3", "size_download": 10, "time_total": 0.05}
    r = CurlClient().parse(json.dumps({"exit": 0, "sha256": "", "curl": w, "udp_rcvbuf_errors": value}))
    assert r.udp_rcvbuf_drops == expected


def test_parse_failure_keeps_the_message():
    w = {"http_version": "0", "size_download": 0, "time_appconnect": 0, "time_total": 3.0, "exitcode": 28,
         "errormsg": "Connection timed out"}
    r = CurlClient().parse(json.dumps({"exit": 28, "sha256": "", "curl": w}))
    assert r.exit_code == 28 and "timed out" in r.error and r.handshake_s is None


def test_parse_garbage():
    r = CurlClient().parse("not json")
    assert r.exit_code != 0 and "unreadable" in r.error
