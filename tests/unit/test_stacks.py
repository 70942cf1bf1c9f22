"""Issue 33, first slice, without Docker: the stacks built on first use (lab/optional.py ON_DEMAND). A run that asks
for one builds its part once and starts it in its lab; a part that cannot be built is refused in one line naming
the implementation and why (exit 2); the default build and `quiclab up` leave them alone; the new clients' adapter
follows the endpoint contract; HAProxy's capability check names what is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lab import config, docker, lab, optional
from lab.endpoints import get_client
from lab.errors import UsageError
from lab.models import TransferRequest
from lab.protocols import Protocol

IMAGES = config.ROOT / "images"


@pytest.fixture
def docker_calls(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """No image of the haproxy part is here; what would be built or started is recorded instead of done."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    present: set[str] = {img for name in optional.PARTS for img in optional.parts()[name].images}
    calls: list[tuple[str, tuple[str, ...]]] = []
    monkeypatch.setattr(optional, "_present_images", lambda: frozenset(present))
    monkeypatch.setattr(optional, "forget", lambda: None)
    monkeypatch.setattr(lab, "states", lambda names=(): [lab.ContainerState(n, "missing", "") for n in names])
    monkeypatch.setattr(lab, "wait_ready", lambda **_: None)
    monkeypatch.setattr(docker, "compose_up_services", lambda services, profiles: calls.append(("up", profiles)))

    def build(services, profiles, echo):
        calls.append(("build", profiles))
        if profiles == ("haproxy",) and build.works:  # type: ignore[attr-defined]
            present.update(optional.parts()["haproxy"].images)
            return 0, ""
        return 1, "E: Unable to locate package haproxy\n"

    build.works = True  # type: ignore[attr-defined]
    monkeypatch.setattr(docker, "compose_build", build)
    return calls, build


def test_a_run_builds_an_on_demand_part_once_and_starts_it(docker_calls):
    calls, _ = docker_calls
    lab.ensure_available(["curl"], ["haproxy"])
    assert calls == [("build", ("haproxy",)), ("up", ("haproxy",))]
    calls.clear()
    lab.ensure_available(["curl"], ["haproxy"])  # built now: only started (the fake says its containers are missing)
    assert calls == [("up", ("haproxy",))]
    calls.clear()
    lab.ensure_available(["curl", "gtlsclient"], ["nginx", "caddy"])  # nothing on demand: nothing done
    assert calls == []


def test_a_stack_that_cannot_be_built_is_one_line_and_exit_2(docker_calls):
    calls, build = docker_calls
    build.works = False
    with pytest.raises(UsageError) as e:
        lab.ensure_available(["curl"], ["haproxy"])
    line = str(e.value)
    assert "\n" not in line and e.value.exit_code == 2
    assert line.startswith("haproxy is unavailable: E: Unable to locate package haproxy (optional part 'haproxy'")
    assert calls == [("build", ("haproxy",))]  # tried once, never started


def test_the_default_build_and_up_leave_the_on_demand_parts_alone(monkeypatch: pytest.MonkeyPatch):
    built: list[str] = []
    monkeypatch.setattr(lab, "engine", lambda: None)
    monkeypatch.setattr(docker, "compose_build_services", lambda services: None)
    monkeypatch.setattr(lab, "build_optional", lambda part: built.append(part.name) or True)
    monkeypatch.setattr(optional, "write_profiles", lambda: None)
    lab.build()
    assert built == list(optional.PARTS)
    built.clear()
    lab.build(optional.parse_parts("haproxy,quicgo"))
    assert built == ["haproxy", "quicgo"]
    monkeypatch.setattr(optional, "unavailable", lambda part: "")  # every part built here
    assert optional.available_profiles() == tuple(optional.PARTS)  # what `quiclab up` starts
    assert optional.available_profiles(("aioquic",)) == ("aioquic",)
    # a lab that is up without them is up: no container of an on-demand part is waited for or required
    wanted = lab.wanted(lab.REQUIRED_FOR_RUNS)
    assert not {c for p in optional.ON_DEMAND for c in optional.parts()[p].containers} & set(wanted)
    assert set(optional.parts()["quicgo"].containers) <= set(lab.wanted(lab.REQUIRED_FOR_RUNS, ("quicgo",)))


@pytest.mark.parametrize(("args", "line"), [
    (["run", "--server", "lsquic", "-p", "h3"],
     "unknown server 'lsquic': allowed are nginx, ngtcp2, caddy, nginx-sid, haproxy, aioquic, quic-go, quinn, quiche, "
     "kwik"),
    (["build", "--parts", "lsquic"], "invalid --parts 'lsquic'")])
def test_an_unknown_stack_name_is_one_line_and_exit_2(args, line):
    r = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60, check=False,
                       env={**os.environ, "QUICLAB_INSTANCE": "9"})  # never the default lab, should it get that far
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and line in r.stderr, r.stderr


@pytest.mark.parametrize(("client", "fetch", "cc", "other"), [
    ("aioquic-client", "quiclab-aioquic-fetch", "CC=reno", "cubic"),
    ("quic-go-client", "quiclab-quicgo-fetch", None, ""),
    ("quinn-client", "quiclab-quinn-fetch", "CC=cubic", "bbr"),
    ("quiche-client", "quiclab-quiche-fetch", "CC=cubic", "bbr2"),
    ("kwik-client", "quiclab-kwik-fetch", None, "")])
def test_the_new_clients_follow_the_contract(client, fetch, cc, other):
    req = TransferRequest(protocol=Protocol.H3, size=5, url="https://haproxy.quiclab/obj/5", timeout_s=60,
                          env={"QLOGDIR": "/tmp/q"})
    cmd = get_client(client).command(req)
    assert cmd[0] == "env" and cmd[-1] == fetch
    assert {"PROTOCOL=h3", "URL=https://haproxy.quiclab/obj/5", "TIMEOUT=60", "HOST_ADDR=10.71.2.14",
            "QLOGDIR=/tmp/q"} <= set(cmd)
    # only a client that can choose gets CC: its default, or the run's choice
    assert (cc in cmd) if cc else not any(a.startswith("CC=") for a in cmd)
    if cc:
        assert f"CC={other}" in get_client(client).command(req.model_copy(update={"cc": other}))
    line = ('{"exit":0,"sha256":"' + "ab" * 32 + '","curl":{"http_version":"3","size_download":5,"time_total":0.5,'
            '"time_appconnect":0.1,"time_starttransfer":0.2,"errormsg":""},"udp_rcvbuf_errors":0}')
    r = get_client(client).parse(line)
    assert r.exit_code == 0 and r.http_version == "3" and r.bytes == 5 and r.handshake_s == 0.1 and r.ttfb_s == 0.2


HAPROXY_VV = """HAProxy version 3.0.11-1+deb13u4 2026/10/15 - https://haproxy.org/
Build options :
  OPTIONS = USE_OPENSSL=1 USE_LUA=1 USE_QUIC=1 USE_PROMEX=1 USE_PCRE2=1 USE_QUIC_OPENSSL_COMPAT=1
Built with OpenSSL version : OpenSSL 3.5.7 9 Jun 2026
Running on OpenSSL version : OpenSSL 3.5.9 29 Sep 2026
"""


def check_haproxy(text: str, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(IMAGES / "server-haproxy" / "capabilities.sh"), str(tmp_path / "record")],
                          input=text, capture_output=True, text=True, check=False)


def test_haproxys_capability_check(tmp_path):
    ok = check_haproxy(HAPROXY_VV, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "record").read_text() == "version=HAProxy 3.0.11-1+deb13u4 (OpenSSL 3.5.9)\n" \
                                                "capabilities=quic compat ossl35\n"
    bad = check_haproxy(HAPROXY_VV.replace(" USE_QUIC=1", "").replace("3.5.9", "3.0.17"), tmp_path)
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "quiclab-capability: trixie's HAProxy 3.0.11-1+deb13u4 lacks what the lab relies on: quic (no USE_QUIC=1) "
        "ossl35 (runs on OpenSSL '3.0.17')")
    assert check_haproxy("nginx version: nginx/1.26\n", tmp_path).returncode == 1


def test_a_client_cannot_migrate_to_haproxy_which_forbids_it():
    """HAProxy 3.0 sends disable_active_migration: gtlsclient moving itself is unsupported against it, with the
    reason, before anything runs; against the servers that allow it (quic-go, aioquic, nginx) it is not."""
    from lab.adverse.spec import parse_path
    from lab.endpoints.registry import parse
    from lab.plan.checks import unsupported

    migrate = parse_path("migrate@1s")
    why = unsupported(migrate, "gtlsclient", Protocol.H3, "haproxy")
    assert why == ("path migrate@1s: the client moves itself, which haproxy refuses: HAProxy 3.0 sends the transport "
                   "parameter disable_active_migration")
    for server in ("quic-go", "aioquic", "nginx", None):
        assert unsupported(migrate, "gtlsclient", Protocol.H3, server) is None, server
    # kwik 0.10.9's ServerConnectionImpl sets disable_active_migration for every connection too
    assert unsupported(migrate, "gtlsclient", Protocol.H3, "kwik") == (
        "path migrate@1s: the client moves itself, which kwik refuses: kwik 0.10.9's server sends the transport "
        "parameter disable_active_migration")
    assert unsupported(parse_path("rebind@1s"), "curl", Protocol.H3, "haproxy") is None  # rebinding is not migrating
    with pytest.raises(UsageError, match="field 'refuses_migration': only servers refuse"):
        parse({"c": {"role": "client", "protocols": ["h3"], "container": "x", "adapter": "a:B", "version": "v",
                     "quic_cc": {"fixed": "x"}, "refuses_migration": "no"}}, "x")
