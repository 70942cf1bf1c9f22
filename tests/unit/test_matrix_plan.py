"""The stack matrix's plan (lab/plan/matrix.py): clients, servers and TCP baselines from the registry, so a stack
added to the registry joins the matrix with no change; the interop runner's links in the presets; an unknown stack
name refused with the registry's names."""

from __future__ import annotations

import copy
import importlib
import tomllib

import pytest

from lab.endpoints.registry import REGISTRY_FILE, Registry, parse
from lab.errors import UsageError
from lab.plan import checks, matrix, presets
from lab.plan.plan import plan, points
from lab.plan.scenario import runs_pair, validate_fields

DATA = tomllib.loads(REGISTRY_FILE.read_text())
NEW_SERVER = {"role": "server", "protocols": ["h3"], "container": "quiclab-server-new", "service": "server-new",
              "address": "10.71.2.98", "host": "new.quiclab", "port": 443, "version": "new --version",
              "quic_cc": {"fixed": "cubic (fixed)"}}
OLD_CLIENT = {"role": "client", "protocols": ["h1", "h2"], "container": "quiclab-client-old",
              "adapter": "lab.endpoints.curl:CurlClient", "version": "old -V"}


def registry_with(**extra: dict) -> Registry:
    data = copy.deepcopy(DATA)
    data.update(extra)
    return parse(data, "test.toml")


@pytest.fixture
def reg(monkeypatch: pytest.MonkeyPatch) -> Registry:
    """The real registry plus a new HTTP/3-only server and a client without HTTP/3, used by the scenario checks."""
    r = registry_with(newquic=NEW_SERVER, oldtcp=OLD_CLIENT)
    for name in ("lab.plan.checks", "lab.plan.scenario", "lab.plan.support", "lab.endpoints",
                 "lab.endpoints.quic_window", "lab.endpoints.sender_cc"):
        module = importlib.import_module(name)
        if hasattr(module, "registry"):
            monkeypatch.setattr(module, "registry", lambda: r)
    return r


def goodput(**changes: object) -> dict:
    data = tomllib.loads((presets.PRESET_DIR / "matrix-goodput.toml").read_text())
    data.update(changes)
    return data


def methods(s) -> set[str]:
    return {f"{r.protocol.value}/{r.client}/{r.server}" for r in plan(s)}


def test_the_tcp_baselines_are_the_registrys():
    reg = registry_with()
    assert reg.tcp_baselines() == [("curl", "nginx"), ("curl", "haproxy")]
    moved = registry_with(caddy={**DATA["caddy"], "tcp_baseline": True})
    assert moved.tcp_baselines() == [("curl", "nginx"), ("curl", "caddy"), ("curl", "haproxy")]
    with pytest.raises(UsageError, match=r"field .tcp_baseline.: a TCP baseline must speak h1 and h2"):
        registry_with(ngtcp2={**DATA["ngtcp2"], "tcp_baseline": True})


def test_a_new_registry_stack_joins_the_matrix(reg: Registry):
    s = checks.validate(goodput(), "preset matrix-goodput")
    assert s.servers == reg.names("server") and "newquic" in s.servers
    assert s.clients == reg.names("client") and "oldtcp" in s.clients
    assert s.tcp_pairs == ["curl>nginx", "curl>haproxy"] and s.pairs == []
    got = methods(s)
    h3 = {m for m in got if m.startswith("h3/")}
    assert h3 == {f"h3/{c}/{v}" for c in reg.names("client") for v in reg.names("server")}
    assert {m for m in got if not m.startswith("h3/")} == {f"{p}/curl/{v}" for p in ("h1", "h2")
                                                            for v in ("nginx", "haproxy")}
    runs = plan(s)
    assert len(runs) == (len(h3) + 4) * 5  # 5 repeats of every method
    # every method of one repeat shares the repeat's link seed: the per-cell verdicts are paired
    for rep in range(5):
        assert len({r.seed for r in runs if r.repeat == rep}) == 1
    assert len({r.seed for r in runs}) == 5
    assert [r.order for r in runs] == list(range(len(runs)))
    assert [r.key for r in runs] != sorted(r.key for r in runs)  # randomized order


def test_a_pair_that_cannot_talk_h3_is_planned_and_unsupported_with_the_registrys_reason(reg: Registry):
    from lab.plan.support import why_unsupported

    s = checks.validate(goodput(), "preset matrix-goodput")
    run = next(r for r in plan(s) if r.client == "oldtcp" and r.server == "newquic")
    assert why_unsupported(run) == "oldtcp does not speak HTTP/3"
    ok = next(r for r in plan(s) if r.client == "curl" and r.server == "newquic")
    assert why_unsupported(ok) == ""


def test_narrowed_matrix_keeps_its_baselines_but_only_runs_them_over_tcp(reg: Registry):
    s = checks.validate(goodput(servers=["newquic"], clients=["quic-go-client"]), "m")
    assert s.servers == ["newquic", "nginx", "haproxy"] and s.clients == ["quic-go-client", "curl"]
    assert methods(s) == {"h3/quic-go-client/newquic", "h1/curl/nginx", "h2/curl/nginx", "h1/curl/haproxy",
                          "h2/curl/haproxy"}
    # completing a completed scenario changes nothing: a resumed matrix runs what it started with
    again = checks.validate(s.model_dump(), "manifest")
    assert again.model_dump() == s.model_dump()


def test_runs_pair_reads_tcp_pairs_for_tcp_only():
    s = validate_fields({"name": "x", "clients": ["curl", "gtlsclient"], "servers": ["nginx", "ngtcp2"],
                         "tcp_pairs": ["curl>nginx"]}, "x")
    assert runs_pair(s, "gtlsclient", "ngtcp2", "h3") and runs_pair(s, "curl", "ngtcp2", "h3")
    assert not runs_pair(s, "curl", "ngtcp2", "h2") and runs_pair(s, "curl", "nginx", "h1")
    assert runs_pair(s, "gtlsclient", "ngtcp2")  # over any protocol
    plain = validate_fields({"name": "x", "clients": ["curl"], "servers": ["nginx", "caddy"]}, "x")
    assert runs_pair(plain, "curl", "caddy", "h1")  # without tcp_pairs: as before


@pytest.mark.parametrize("link,want", [
    ("goodput", {"size": 10 * 2**20, "down": 10e6, "up": 10e6, "rtt": 0.030, "loss": 0.0, "competing": ""}),
    ("crosstraffic", {"size": 25 * 2**20, "down": 10e6, "up": 10e6, "rtt": 0.030, "loss": 0.0,
                      "competing": "tcp-cubic"}),
    ("satellite", {"size": 10 * 2**20, "down": 20e6, "up": 2e6, "rtt": 0.600, "loss": 0.0, "competing": ""}),
    ("satellite-loss", {"size": 10 * 2**20, "down": 20e6, "up": 2e6, "rtt": 0.600, "loss": 0.01,
                        "competing": ""}),
])
def test_the_presets_are_the_interop_runners_links(link: str, want: dict):
    s = presets.get(matrix.LINKS[link])
    assert s.matrix == link and s.repeats == 5 and s.protocols == ["h1", "h2", "h3"]
    (p,) = points(s)
    d, u = p.link.downlink, p.link.uplink
    assert p.size == want["size"]
    assert (d.rate_bps, u.rate_bps) == (want["down"], want["up"])
    assert p.link.rtt_s == pytest.approx(want["rtt"])
    assert (d.queue_packets, u.queue_packets) == (25, 25)  # packet-counted queues, each way
    assert type(d.qdisc).__name__ == type(u.qdisc).__name__ == "DropTail"
    assert d.loss.mean == u.loss.mean == pytest.approx(want["loss"])
    assert [f.text for f in p.settings.competing] == ([want["competing"]] if want["competing"] else [])


def test_links_and_names_are_checked_against_the_registry():
    reg = registry_with()
    assert matrix.parse_links("all") == list(matrix.LINKS)
    assert matrix.parse_links("satellite,goodput,satellite") == ["satellite", "goodput"]
    with pytest.raises(UsageError, match="invalid --link 'moon'"):
        matrix.parse_links("moon")
    assert matrix.parse_names("nginx-1.30,quic-go", "server", reg) == ["nginx-sid", "quic-go"]
    with pytest.raises(UsageError, match=r"unknown server 'lsquic': allowed are nginx, ngtcp2, .*quic-go"):
        matrix.parse_names("nginx,lsquic", "server", reg)
    with pytest.raises(UsageError, match="unknown client 'nginx'"):
        matrix.parse_names("nginx", "client", reg)


def test_a_why_plan_is_one_captured_run_of_each_cell_that_needs_one():
    """quiclab matrix --why: the finished matrix's own link, seed and object, only the cells that need a why (and
    their protocols), 1 repeat, every kind of evidence."""
    reg = registry_with()
    done = checks.validate(goodput(seed=7), "preset matrix-goodput")
    full = matrix.complete(goodput(seed=7), reg)
    why = checks.validate(matrix.why_scenario(full, [("h3", "quinn-client", "nginx"), ("h3", "curl", "kwik")]),
                          "why")
    assert methods(why) == {"h3/quinn-client/nginx", "h3/curl/kwik"}
    assert why.repeats == 1 and why.capture == ["pcap", "keylog", "qlog"] and why.seed == 7
    assert why.link == done.link and why.sizes == done.sizes
    again = checks.validate(matrix.why_scenario(full, [("h3", "curl", "kwik")], 3), "why")
    assert methods(again) == {"h3/curl/kwik"} and again.repeats == 3 and again.seed == 7


def test_the_why_option_takes_nothing_else_and_only_a_finished_matrix(tmp_path, capsys):
    """Bad input exits 2 with one line: another option beside --why, a folder that is no sweep, a sweep that is no
    matrix, a matrix that is not complete."""
    import json

    from tests.unit.test_shard import in_process

    def run(*argv: str) -> str:
        code, _, err = in_process(capsys, "matrix", *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        return err

    assert "--seed cannot be given with --why" in run("--why", str(tmp_path), "--seed", "3")
    assert "is not a sweep folder" in run("--why", str(tmp_path / "none"))
    (tmp_path / "manifest.json").write_text(json.dumps({"scenario": {"name": "loss"}, "status": "complete"}))
    assert "not a matrix sweep" in run("--why", str(tmp_path))
    (tmp_path / "manifest.json").write_text(json.dumps({"scenario": {"name": "m", "matrix": "goodput"},
                                                       "status": "interrupted"}))
    assert "the matrix is interrupted" in run("--why", str(tmp_path))
    # --repeats, --clients and --servers narrow the why runs; a bad one is still one line
    assert "unknown client 'nope'" in run("--why", str(tmp_path), "--clients", "nope")
    assert "invalid --repeats 0" in run("--why", str(tmp_path), "--repeats", "0")
    assert "the matrix is interrupted" in run("--why", str(tmp_path), "--repeats", "3", "--servers", "haproxy")
