"""The implementation registry (lab/endpoints/implementations.toml) and the endpoint contract, without the lab."""

import copy
import tomllib
from typing import get_args

import pytest

from lab.endpoints import check_server, client_names, get_client, server_names
from lab.endpoints.ngtcp2 import Ngtcp2Client
from lab.endpoints.registry import REGISTRY_FILE, load, parse, registry
from lab.errors import UsageError
from lab.models import TransferRequest
from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.protocols import Protocol
from lab.report.summary import stats_table
from lab.results.schema import Status
from lab.run import runner
from lab.stats.stats import summarize

DATA = tomllib.loads(REGISTRY_FILE.read_text())


def broken(name: str, **changes) -> dict:
    data = copy.deepcopy(DATA)
    for key, value in changes.items():
        if value is None:
            del data[name][key]
        else:
            data[name][key] = value
    return data


def one_line_error(data: dict) -> str:
    with pytest.raises(UsageError) as e:
        parse(data, "implementations.toml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("implementations.toml: ")
    return msg


def test_the_registry_loads_with_the_issue_matrix():
    reg = load()
    assert reg.names("client") == ["curl", "gtlsclient", "curl-sid", "chromium", "aioquic-client", "quic-go-client",
                                    "quinn-client", "quiche-client", "kwik-client"]
    assert reg.names("server") == ["nginx", "ngtcp2", "caddy", "nginx-sid", "haproxy", "aioquic", "quic-go",
                                    "quinn", "quiche", "kwik"]
    assert reg.client("curl").protocols == frozenset(Protocol)
    assert reg.client("gtlsclient").protocols == {Protocol.H3}
    assert reg.server("ngtcp2").protocols == {Protocol.H3}
    assert reg.server("caddy").protocols == frozenset(Protocol)
    assert client_names() == reg.names("client") and server_names() == reg.names("server")
    assert reg.client("chromium").workloads == ("bulk", "page")
    assert reg.client("curl").workloads == ("bulk", "page", "reuse", "new", "resume")
    assert reg.server("nginx").workloads == ("bulk",)


def test_servers_have_distinct_addresses_names_and_containers():
    servers = [registry().server(n) for n in server_names()]
    assert len({s.address for s in servers}) == len({s.host for s in servers}) == len({s.container for s in servers}) \
        == len(servers)
    assert check_server("nginx").url("/obj/5") == "https://server.quiclab/obj/5"
    assert check_server("caddy").url("/obj/5") == "https://caddy.quiclab/obj/5"


def test_congestion_control_fixed_or_settable():
    reg = registry()
    assert reg.server("nginx").quic_cc.describe() == "newreno (nginx QUIC, fixed)"
    assert not reg.server("nginx").quic_cc.settable
    g = reg.client("gtlsclient").quic_cc
    assert g.settable and g.options == ("cubic", "reno", "bbr") and g.describe() == "cubic"
    assert reg.server("ngtcp2").cc(Protocol.H3) == "cubic"
    assert reg.server("caddy").cc(Protocol.H3).startswith("newreno (quic-go")
    assert reg.server("caddy").cc(Protocol.H2, tcp="bbr") == "bbr"


@pytest.mark.parametrize(("changes", "expected"), [
    ({"role": "proxy"}, "implementation 'caddy': unknown role 'proxy': allowed are client, server"),
    ({"protocols": ["h1", "h4"]}, "implementation 'caddy': unknown protocol 'h4' in protocols"),
    ({"container": None}, "implementation 'caddy': missing field 'container'"),
    ({"version": None}, "implementation 'caddy': missing field 'version'"),
    ({"protocols": []}, "implementation 'caddy': invalid field 'protocols'"),
    ({"colour": "blue"}, "implementation 'caddy': unknown field 'colour'"),
    ({"host": None}, "implementation 'caddy': field 'host': a server needs a host"),
    ({"port": 70000}, "implementation 'caddy': invalid field 'port' (got 70000)"),
    ({"quic_cc": None}, "implementation 'caddy': field 'quic_cc'"),
    ({"quic_cc": {"options": ["cubic"], "default": "bbr"}}, "implementation 'caddy': invalid field 'quic_cc'"),
    ({"address": "10.71.2.10"}, "implementation 'caddy': address '10.71.2.10' is already used by 'nginx'"),
    ({"adapter": "lab.endpoints.curl:CurlClient"}, "implementation 'caddy': field 'adapter'"),
    ({"qlog": {"command": ["caddy"], "port": 443}}, "implementation 'caddy': field 'qlog': its port must differ"),
    ({"qlog": {"command": [], "port": 4433}}, "implementation 'caddy': invalid field 'qlog.command'"),
    ({"qlog": {"command": ["x"], "port": 4433, "dir": "/q"}}, "implementation 'caddy': unknown field 'qlog.dir'"),
])
def test_a_malformed_server_entry_is_a_one_line_error_naming_it(changes, expected):
    assert expected in one_line_error(broken("caddy", **changes))


def test_a_malformed_client_entry_is_a_one_line_error_naming_it():
    assert "implementation 'gtlsclient': field 'adapter': a client needs" in one_line_error(
        broken("gtlsclient", adapter=None))
    assert "implementation 'curl': field 'host': only servers" in one_line_error(broken("curl", host="x.quiclab"))
    assert "implementation 'curl': missing field 'role'" in one_line_error(broken("curl", role=None))
    assert "implementation 'curl': field 'qlog': only servers" in one_line_error(
        broken("curl", qlog={"command": ["x"], "port": 4433}))
    assert "implementation 'curl': field 'workloads': unknown workload 'video'" in one_line_error(
        broken("curl", workloads=["bulk", "video"]))


def test_a_registry_file_that_is_not_toml_is_a_usage_error(tmp_path):
    bad = tmp_path / "implementations.toml"
    bad.write_text("[curl\nrole = 'client'")
    with pytest.raises(UsageError, match="not valid TOML"):
        load(bad)
    with pytest.raises(UsageError, match="must be a table"):
        parse({"curl": "client"}, "x")


def test_unknown_names_list_the_allowed_ones():
    allowed = (r"allowed are curl, gtlsclient, curl-sid, chromium, aioquic-client, quic-go-client, "
               r"quinn-client, quiche-client, kwik-client$")
    with pytest.raises(UsageError, match=r"unknown client 'lsquic': " + allowed):
        get_client("lsquic")
    with pytest.raises(UsageError, match=r"unknown server 'curl': allowed are nginx, ngtcp2, caddy, nginx-sid, "
                                         r"haproxy, aioquic, quic-go, quinn, quiche, kwik$"):
        check_server("curl")


def test_unstables_implementations_are_named_by_what_they_are_and_their_old_names_still_work():
    """Issue 27: not by a version unstable will move past; the names they had are aliases, records use the new."""
    reg = registry()
    assert reg.server("nginx-1.30").name == "nginx-sid" and reg.client("curl-8.23").name == "curl-sid"
    assert reg.canonical("nginx-1.30") == "nginx-sid" and reg.canonical("nginx") == "nginx"
    assert reg.canonical("quiche") == "quiche" and reg.canonical("lsquic") == "lsquic"
    with pytest.raises(UsageError, match=r"unknown client 'nginx-1\.30'"):
        reg.client("nginx-1.30")  # an alias keeps its role
    data = tomllib.loads(REGISTRY_FILE.read_text())
    data["nginx"]["aliases"] = ["caddy"]
    with pytest.raises(UsageError, match="implementation 'nginx': alias 'caddy' is already a name"):
        parse(data, "x")


def test_adapters_come_from_the_registry():
    curl, g = get_client("curl"), get_client("gtlsclient")
    assert (curl.name, curl.container, curl.protocols) == ("curl", "quiclab-client", frozenset(Protocol))
    assert isinstance(g, Ngtcp2Client) and g.protocols == {Protocol.H3}
    assert "gtlsclient" in g.processes


def test_debian_unstables_nginx_and_curl_are_implementations_of_their_own():
    reg = registry()
    new, old = reg.server("nginx-sid"), reg.server("nginx")
    assert new.container == "quiclab-server-nginx130" != old.container
    assert (new.address, new.host, new.service) == ("10.71.2.13", "nginx130.quiclab", "server-nginx130")
    assert new.protocols == old.protocols == frozenset(Protocol)
    assert new.cc(Protocol.H3).startswith("cubic (nginx QUIC") and old.cc(Protocol.H3).startswith("newreno")
    assert "0-RTT" in new.description and "ssl_early_data on" in new.description
    curl = get_client("curl-sid")
    assert (curl.name, curl.container, curl.protocols) == ("curl-sid", "quiclab-client-sid", frozenset(Protocol))
    assert curl.processes == get_client("curl").processes
    assert reg.client("curl-sid").quic_cc.describe().startswith("cubic (curl: ngtcp2")
    # The same wrapper as curl 8.14: only the container differs.
    request = TransferRequest(protocol=Protocol.H3, size=1, url="https://nginx130.quiclab/obj/1", timeout_s=5)
    assert curl.command(request) == get_client("curl").command(request)


def test_clients_connect_to_the_registrys_address_not_to_what_etc_hosts_says():
    reg = registry()
    assert reg.server_at("https://nginx130.quiclab:8443/obj/1").name == "nginx-sid"
    assert reg.server_at("https://server.quiclab/obj/1").name == "nginx"
    assert reg.server_at("https://10.71.2.10/obj/1") is None
    request = TransferRequest(protocol=Protocol.H3, size=1, url="https://nginx130.quiclab/obj/1", timeout_s=5)
    assert "HOST_ADDR=10.71.2.13" in get_client("gtlsclient").command(request)
    cmd = get_client("curl").command(request)
    assert cmd[cmd.index("--resolve") + 1] == "nginx130.quiclab:443:10.71.2.13"


@pytest.mark.parametrize(("name", "ok"), [("nginx-sid", True), ("curl-sid", True), ("a_b", True),
                                          ("Nginx", False), ("-nginx", False), (".x", False), ("a/b", False),
                                          ("a b", False)])
def test_implementation_names_may_carry_a_version(name, ok):
    data = copy.deepcopy(DATA)
    data[name] = data.pop("caddy")
    if ok:
        assert parse(data, "x").server(name).container == "quiclab-server-caddy"
    else:
        assert f"implementation {name!r}: invalid field 'name'" in one_line_error(data)


def test_every_implementation_is_wired_into_compose_and_the_lab():
    """A registry entry needs its compose service, container, host name in every client's /etc/hosts, a certificate
    from the pki one-shot, and its container among the ones `quiclab up` waits for (docs/implementations.md), in
    every lab of a host (lab/instance.py: the registry holds the default lab's containers and addresses)."""
    from lab import lab
    from lab.instance import Instance
    from tests.compose import rendered

    for number in range(10):
        n = Instance(number)
        compose = rendered(n)
        reg = registry() if number == 0 else registry().for_instance(n)
        clients = {reg.client(name).container for name in client_names()}
        assert compose.count("extra_hosts: ") == len(clients)
        for impl in reg.implementations.values():
            assert f"container_name: {impl.container}\n" in compose, impl.name
            if number == 0:
                assert impl.container in lab.REQUIRED_FOR_RUNS and impl.container in lab.LAB_CONTAINERS, impl.name
            if impl.role == "server":
                assert f"\n  {impl.service}:\n" in compose and f"{impl.service}-route" in lab.ONE_SHOTS, impl.name
                assert f'"{impl.host}:{impl.address}"' in compose, impl.name
                assert f"{impl.name}={impl.host},{impl.address}" in compose, impl.name
                assert f'ipv4_address: "{impl.address}"}}' in compose, impl.name


def test_unsupported_combinations_are_known_without_running():
    reg = registry()
    assert reg.unsupported("curl", "nginx", Protocol.H2) == ""
    assert reg.unsupported("curl", "ngtcp2", Protocol.H2) == "ngtcp2 does not speak HTTP/2"
    assert reg.unsupported("gtlsclient", "caddy", Protocol.H1) == "gtlsclient does not speak HTTP/1.1"
    assert reg.unsupported("gtlsclient", "ngtcp2", Protocol.H1) == "gtlsclient and ngtcp2 do not speak HTTP/1.1"
    assert reg.unsupported("gtlsclient", "ngtcp2", Protocol.H3) == ""


def test_support_is_decided_once_per_run_before_anything_runs():
    from lab.plan.support import why_unsupported

    def first(doc):
        return plan(validate({"name": "s", "repeats": 1, "sizes": ["100kB"], **doc}, "test"))

    assert why_unsupported(first({"clients": ["gtlsclient"], "protocols": ["h3"], "servers": ["nginx"]})[0]) == ""
    by = {r.key: why_unsupported(r) for r in first({"clients": ["gtlsclient"], "servers": ["nginx"]})}
    assert by["0/h2/gtlsclient/nginx/0"] == "gtlsclient does not speak HTTP/2"
    cc = first({"clients": ["curl"], "servers": ["nginx"], "protocols": ["h3"], "sweep": {"cc": ["cubic"]}})[0]
    assert "nginx's QUIC congestion control is fixed" in why_unsupported(cc)
    moved = first({"clients": ["curl", "gtlsclient"], "servers": ["nginx"], "protocols": ["h3"],
                   "sweep": {"path": ["migrate@1s"]}})
    assert {r.client: bool(why_unsupported(r)) for r in moved} == {"curl": True, "gtlsclient": False}
    page = first({"clients": ["gtlsclient"], "servers": ["nginx"], "protocols": ["h3"],
                  "sweep": {"workload": ["page:5x10kB"]}})[0]
    assert why_unsupported(page) == "gtlsclient does not run page workloads"


def test_the_runner_records_unsupported_without_running():
    s = validate({"name": "matrix", "clients": ["curl", "gtlsclient"], "servers": ["nginx", "ngtcp2", "caddy"],
                  "repeats": 1, "sizes": ["100kB"]}, "test")
    runs = plan(s)
    assert len(runs) == 3 * 2 * 3
    ctx = runner.Context(sweep="matrix", shaper="auto", cc={}, timeout_for=lambda r: 10)
    unsupported = [runner.execute(r, ctx) for r in runs if registry().unsupported(r.client, r.server, r.protocol)]
    # h1 and h2 with gtlsclient (3 servers) and with curl against ngtcp2: 8 of 18
    assert len(unsupported) == 8
    assert {r.status for r in unsupported} == {"unsupported"}
    rows = stats_table(summarize(unsupported))[1]
    assert all(row[3] == "unsupported" for row in rows)


def test_gtlsclient_command_follows_the_contract():
    req = TransferRequest(protocol=Protocol.H3, size=5, url="https://caddy.quiclab/obj/5", timeout_s=60)
    cmd = get_client("gtlsclient").command(req)
    assert cmd[0] == "env" and cmd[-1] == "quiclab-ngtcp2-fetch"
    assert {"PROTOCOL=h3", "URL=https://caddy.quiclab/obj/5", "TIMEOUT=60", "CC=cubic"} <= set(cmd)
    chosen = get_client("gtlsclient").command(req.model_copy(update={"cc": "bbr"}))
    assert "CC=bbr" in chosen and "CC=cubic" not in chosen


def test_gtlsclient_output_is_read_like_curls():
    line = ('{"exit":0,"sha256":"' + "ab" * 32 + '","curl":{"http_version":"3","size_download":5,'
            '"time_total":0.031,"errormsg":""}}')
    r = get_client("gtlsclient").parse(line)
    assert (r.exit_code, r.http_version, r.bytes, r.total_s) == (0, "3", 5, 0.031)
    assert r.handshake_s is None and r.ttfb_s is None


def test_run_records_have_the_registry_cc():
    ctx = runner.Context(sweep="x", shaper="auto", timeout_for=lambda r: 10,
                         cc={"gtlsclient": {"tcp": "bbr", "quic": "cubic"}, "nginx": {"tcp": "bbr", "quic": "nr"}})
    assert ctx.cc_of("gtlsclient", Protocol.H3) == "cubic" and ctx.cc_of("nginx", Protocol.H1) == "bbr"
    assert ctx.cc_of("caddy", Protocol.H3) == "unknown"
    assert "unsupported" in get_args(Status)


def test_summary_lists_the_implementations_and_old_manifests_still_resume():
    from lab.report.summary import implementations_table, summary_markdown
    from lab.run.lab_session import cc_by_implementation as _cc

    manifest = {"implementations": {
        "gtlsclient": {"role": "client", "protocols": ["h3"], "version": "ngtcp2-client 1.11.0-1",
                       "cc": {"tcp": None, "quic": "cubic"}},
        "caddy": {"role": "server", "protocols": ["h1", "h2", "h3"], "version": "2.6.2",
                  "cc": {"tcp": "bbr", "quic": "newreno (quic-go, fixed)"}}}}
    _, rows = implementations_table(manifest)
    assert rows[0] == ["gtlsclient", "client", "h3", "ngtcp2-client 1.11.0-1", "-", "cubic"]
    assert "## Implementations" in summary_markdown([], manifest)
    assert _cc(manifest)["caddy"] == {"tcp": "bbr", "quic": "newreno (quic-go, fixed)"}
    old = {"congestion_control": {"tcp client": "bbr", "tcp server": "cubic", "quic client": "nr-c",
                                  "quic server": "nr-s"}}
    assert _cc(old) == {"curl": {"tcp": "bbr", "quic": "nr-c"}, "nginx": {"tcp": "cubic", "quic": "nr-s"}}


def test_a_scenario_can_choose_a_settable_client_quic_cc_only(capsys: pytest.CaptureFixture[str]):
    base = {"name": "cc", "clients": ["curl", "gtlsclient"], "servers": ["ngtcp2"], "protocols": ["h3"]}
    assert validate({**base, "client_quic_cc": {"gtlsclient": "bbr"}}, "s").client_quic_cc == {"gtlsclient": "bbr"}
    assert capsys.readouterr().err == ""
    # the old name is accepted, with one line saying so
    assert validate({**base, "quic_cc": {"gtlsclient": "bbr"}}, "s").client_quic_cc == {"gtlsclient": "bbr"}
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "quic_cc is deprecated, use client_quic_cc" in note[0]
    with pytest.raises(UsageError, match=r"s: give client_quic_cc only"):
        validate({**base, "quic_cc": {"gtlsclient": "bbr"}, "client_quic_cc": {"gtlsclient": "bbr"}}, "s")
    with pytest.raises(UsageError, match=r"s: invalid client_quic_cc.gtlsclient 'vegas' for gtlsclient: "
                                         r"allowed are cubic, reno, bbr"):
        validate({**base, "client_quic_cc": {"gtlsclient": "vegas"}}, "s")
    with pytest.raises(UsageError, match=r"client_quic_cc.curl 'bbr': curl cannot choose its congestion control"):
        validate({**base, "client_quic_cc": {"curl": "bbr"}}, "s")
    with pytest.raises(UsageError, match=r"client_quic_cc.nginx: not one of the scenario's clients"):
        validate({**base, "client_quic_cc": {"nginx": "bbr"}}, "s")
    ctx = runner.Context(sweep="x", shaper="auto", timeout_for=lambda r: 10, quic_cc={"gtlsclient": "bbr"},
                         cc={"gtlsclient": {"tcp": None, "quic": "bbr"}})
    assert ctx.cc_of("gtlsclient", Protocol.H3) == "bbr"


def test_a_servers_qlog_instance_is_reached_on_its_own_port():
    ngtcp2 = registry().server("ngtcp2")
    assert ngtcp2.qlog is not None and ngtcp2.qlog.port != ngtcp2.port
    assert ngtcp2.url("/obj/1000") == "https://ngtcp2.quiclab/obj/1000"
    assert ngtcp2.url("/obj/1000", ngtcp2.qlog.port) == f"https://ngtcp2.quiclab:{ngtcp2.qlog.port}/obj/1000"
