"""The sender's congestion control as a run dimension: values, resolution per server and protocol, the registry's
sender_cc, scenarios (top-level default, swept, pairs) and bad input (exit 2, one line). No lab needed."""

import subprocess
import sys
from typing import Any

import pytest

from lab.endpoints.registry import parse, registry
from lab.endpoints.sender_cc import NATIVE, claims_reno, parse_cc, resolve
from lab.errors import UsageError
from lab.plan.checks import validate
from lab.plan.plan import plan, points
from lab.protocols import Protocol
from lab.run import runner


@pytest.mark.parametrize(("text", "value"), [
    ("reno", "reno"), ("Cubic", "cubic"), (" bbr ", "bbr"), ("native", NATIVE), ("default", NATIVE),
    ("newreno", "reno"),
])
def test_cc_values_and_aliases(text: str, value: str) -> None:
    assert parse_cc(text) == value


def test_a_bad_cc_names_the_value_and_the_allowed_ones() -> None:
    with pytest.raises(UsageError) as e:
        parse_cc("vegas")
    assert str(e.value).startswith("invalid cc 'vegas': allowed are reno, cubic, bbr, native")


def quiclab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "--sender-cc", "vegas"], "invalid --sender-cc 'vegas': allowed are reno, cubic, bbr, native"),
    (["sweep", "quick", "--sender-cc", "reno,westwood"], "sweep.cc: invalid cc 'westwood': allowed are reno"),
    (["sweep", "quick", "--sender-cc", "hybla"], "invalid cc 'hybla': allowed are reno, cubic, bbr, native"),
    (["run", "--client-quic-cc", "reno"], "curl cannot choose its congestion control"),
])
def test_bad_cc_on_the_command_line_exits_2_with_one_line(args: list[str], needle: str) -> None:
    r = quiclab(*args)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


# --- resolution ---------------------------------------------------------------------------------------------------

def test_tcp_is_set_in_the_servers_network_namespace_for_any_value() -> None:
    nginx = registry().server("nginx")
    for cc in ("reno", "cubic", "bbr", "native"):
        plan_ = resolve(nginx, Protocol.H1, cc)
        assert (plan_.kind, plan_.transport, plan_.algorithm) == ("netns", "tcp", cc)


def test_no_cc_sets_nothing_and_reads_back() -> None:
    assert resolve(registry().server("nginx"), Protocol.H2, None).kind == "own"
    assert resolve(registry().server("ngtcp2"), Protocol.H3, None).kind == "own"


def test_gtlsserver_runs_each_algorithm_on_its_own_port() -> None:
    ngtcp2 = registry().server("ngtcp2")
    ports = {resolve(ngtcp2, Protocol.H3, cc).port for cc in ("reno", "cubic", "bbr")}
    assert len(ports) == 3 and ngtcp2.port not in ports
    assert ngtcp2.qlog is None or ngtcp2.qlog.port not in ports
    assert resolve(ngtcp2, Protocol.H3, "reno").kind == "instance"
    assert resolve(ngtcp2, Protocol.H3, "native").kind == "own"


@pytest.mark.parametrize("server", ["nginx", "caddy"])
@pytest.mark.parametrize("cc", ["reno", "cubic", "bbr"])
def test_a_fixed_quic_stack_is_unsupported_for_any_set_value(server: str, cc: str) -> None:
    p = resolve(registry().server(server), Protocol.H3, cc)
    assert p.kind == "unsupported"
    assert f"{server}'s QUIC congestion control is fixed" in p.reason and f"cc={cc}" in p.reason


def test_the_runner_records_an_unsupported_cc_without_running_it() -> None:
    s = validate({"name": "x", "protocols": ["h3"], "servers": ["nginx"], "cc": "reno", "repeats": 1,
                  "link": {"rtt": "20ms"}}, "s")
    run = plan(s)[0]
    ctx = runner.Context(sweep="x", shaper="auto", cc={}, timeout_for=lambda r: 10)
    rec = runner.execute(run, ctx)  # never reaches Docker: the plan is unsupported before anything runs
    assert rec.status == "unsupported"
    assert "nginx's QUIC congestion control is fixed" in rec.failure and "cc=reno" in rec.failure
    assert rec.cc_sender == "" and rec.total_s is None


def test_claims_reno() -> None:
    assert claims_reno("newreno (nginx QUIC, fixed)") and claims_reno("reno") and claims_reno("Reno")
    assert not claims_reno("cubic") and not claims_reno("bbr") and not claims_reno("")


# --- registry -----------------------------------------------------------------------------------------------------

def _doc() -> dict[str, Any]:
    return {
        "c": {"role": "client", "protocols": ["h3"], "container": "cc", "version": "v", "adapter": "m:C",
              "quic_cc": {"fixed": "newreno"}},
        "s": {"role": "server", "protocols": ["h1", "h3"], "container": "sc", "version": "v", "service": "s",
              "address": "10.71.2.50", "host": "s.x", "port": 443,
              "quic_cc": {"options": ["cubic", "reno"], "default": "cubic"}},
    }


def test_a_server_with_a_fixed_quic_cc_needs_no_sender_cc() -> None:
    doc = _doc()
    doc["s"]["quic_cc"] = {"fixed": "cubic (nginx QUIC, fixed; since 1.27.5)"}  # as nginx 1.30's entry
    s = parse(doc, "r").server("s")
    assert s.sender_cc.tcp == "netns" and s.sender_cc.quic is None
    assert resolve(s, Protocol.H3, "cubic").kind == "unsupported"
    assert resolve(s, Protocol.H3, "native").kind == "own"


@pytest.mark.parametrize(("where", "sender_cc", "message"), [
    ("c", {"tcp": "netns"}, "implementation 'c': field 'sender_cc': only servers have a sender_cc"),
    ("s", {"tcp": "kernel"}, "implementation 's': unknown tcp 'kernel': allowed are netns, fixed"),
    ("s", {"quic": {"command": ["x"], "ports": {"cubic": 1}}},
     "field 'sender_cc': quic ports must name exactly the quic_cc options ['cubic', 'reno']"),
    ("s", {"quic": {"command": ["x"], "ports": {"cubic": 4441, "reno": 443}}},
     "field 'sender_cc': quic port 443 for reno must be 1-65535 and differ"),
    ("s", {"quic": {"command": ["x"], "ports": {"cubic": 4441, "reno": 4441}}},
     "field 'sender_cc': quic port 4441 for reno"),
])
def test_bad_sender_cc_entries_are_one_line_errors(where: str, sender_cc: dict[str, Any], message: str) -> None:
    doc = _doc()
    doc[where]["sender_cc"] = sender_cc
    with pytest.raises(UsageError) as e:
        parse(doc, "r")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_quic_instances_need_a_settable_quic_cc() -> None:
    doc = _doc()
    doc["s"]["quic_cc"] = {"fixed": "newreno"}
    doc["s"]["sender_cc"] = {"quic": {"command": ["x"], "ports": {"reno": 4442}}}
    with pytest.raises(UsageError, match="quic instances need quic_cc = "):
        parse(doc, "r")


# --- scenarios ----------------------------------------------------------------------------------------------------

def test_cc_as_a_top_level_default_and_as_a_swept_dimension() -> None:
    base = {"name": "x", "link": {"rtt": "20ms"}}
    s = validate({**base, "cc": "Default"}, "s")
    assert s.cc == NATIVE and [p.settings.cc for p in points(s)] == [NATIVE]
    s = validate({**base, "cc": "reno", "sweep": {"cc": ["cubic", "bbr"], "loss": ["0%", "1%"]}}, "s")
    assert [p.settings.cc for p in points(s)] == ["cubic", "cubic", "bbr", "bbr"]  # the swept value wins
    assert points(s)[0].label == "cc=cubic loss=0%"
    assert points(validate(base, "s"))[0].settings.cc is None


def test_pairs_restrict_the_client_server_product() -> None:
    s = validate({"name": "x", "clients": ["curl", "gtlsclient"], "servers": ["nginx", "ngtcp2"],
                  "protocols": ["h3"], "pairs": ["curl>nginx", "gtlsclient > ngtcp2"], "repeats": 1}, "s")
    assert sorted((r.client, r.server) for r in plan(s)) == [("curl", "nginx"), ("gtlsclient", "ngtcp2")]
    with pytest.raises(UsageError, match=r"s: invalid pairs entry 'curl>caddy': expected \"client>server\""):
        validate({"name": "x", "pairs": ["curl>caddy"]}, "s")


@pytest.mark.parametrize("preset", ["validate-reno", "bolina", "yu"])
def test_the_cc_and_seed_presets_are_valid(preset: str) -> None:
    from lab.plan import presets

    s = presets.get(preset)
    assert plan(s)


def test_validate_reno_runs_reno_senders_only_where_they_can_be_set() -> None:
    from lab.plan import presets

    s = presets.get("validate-reno")
    runs = plan(s)
    runnable = {(r.protocol.value, r.client, r.server) for r in runs
                if not registry().unsupported(r.client, r.server, r.protocol)
                and not resolve(registry().server(r.server), r.protocol, r.point.settings.cc).reason}
    assert runnable == {("h1", "curl", "nginx"), ("h3", "gtlsclient", "ngtcp2")}
    assert all(p.link.uplink.loss.mean == 0 and p.link.downlink.loss.mean > 0 for p in points(s))
