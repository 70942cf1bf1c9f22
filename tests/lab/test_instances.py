"""Issue 12 (several labs on one host; plain compose): a second lab beside the one this test run drives, started by a
plain `docker compose up -d` on a host without its firewall rules, passes curl over h1/h2/h3 to every server through
its router and leaves nothing behind after `docker compose down`; two labs up at once each pass a verified transfer
and `quiclab down` of one leaves the other working; a sweep sharded over two labs side by side merges into the
unsharded plan.

The lab this run drives (config.INSTANCE, the default lab unless QUICLAB_INSTANCE says otherwise) is never started,
stopped or reconfigured here: the labs these tests start are other numbers that no container of this host uses
(the highest free ones: `quiclab sweep --parallel` takes the lowest), and every one is taken down in `finally`.
The images are the ones compose builds or finds (QUICLAB_TAG as in the environment).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import config, docker, hostnet, instance, lab, optional
from lab.endpoints.registry import load
from lab.errors import QuiclabError
from lab.instance import Instance
from lab.plan import presets
from lab.plan.plan import plan
from lab.protocols import Protocol
from lab.report.report import load_sweep
from lab.run import parallel as parallel_labs

pytestmark = pytest.mark.lab

HOME = config.INSTANCE  # the lab this test run drives (shared with others: left alone)
BUSY = "the lab is busy"  # another quiclab command holds HOME's lock: nothing ran, try again
WAIT_FOR_HOME_S = 1200
CURL_FLAG = {Protocol.H1: "--http1.1", Protocol.H2: "--http2", Protocol.H3: "--http3-only"}
OBJECT = 300_000


@pytest.fixture(scope="module")
def engine() -> None:
    try:
        docker.require_engine()
    except QuiclabError as e:
        pytest.skip(f"needs a Docker engine: {e}")
    if os.geteuid() != 0:
        pytest.skip("needs root: these tests read and clean the host's firewall (iptables -S DOCKER-USER)")


def spare_labs(count: int) -> list[Instance]:
    """Lab numbers these tests may start beside HOME: none of their containers exists on this host (another user's
    lab, a parallel sweep's extra labs), highest first; skip when there are not `count` of them."""
    in_use = parallel_labs.labs_in_use() | {HOME.number}
    free = [Instance(n) for n in range(instance.MAX_INSTANCE, -1, -1) if n not in in_use]
    if len(free) < count:
        pytest.skip(f"needs {count} lab numbers no container uses (in use: {sorted(in_use)})")
    return free[:count]


def env_for(n: Instance) -> dict[str, str]:
    """This process's environment for lab `n`: its number, no Grafana (its image may have to be pulled: start-up
    stays fast), and for another lab than HOME its own default ports."""
    env = {**os.environ, config.ENV_INSTANCE: n.tag, config.ENV_GRAFANA: "off"}
    if n != HOME:
        for name in (config.ENV_PROMETHEUS_PORT, config.ENV_PUSHGATEWAY_PORT, config.ENV_GRAFANA_PORT,
                     config.ENV_PUSHGATEWAY_URL):
            env.pop(name, None)
    return env


def compose(n: Instance, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Plain `docker compose ARGS` in the checkout, for lab `n` (never HOME)."""
    assert n != HOME, "these tests never run compose on the lab the test run drives"
    return subprocess.run(["docker", "compose", *args], cwd=config.ROOT, env=env_for(n), capture_output=True,
                          text=True, timeout=timeout)


def quiclab(n: Instance, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    if args[:1] in (("up",), ("down",)):
        assert n != HOME, "these tests never start or stop the lab the test run drives"
    return subprocess.run([sys.executable, "-m", "lab", *args], env=env_for(n), capture_output=True, text=True,
                          timeout=timeout)


def quiclab_popen(n: Instance, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lab", *args], env=env_for(n), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # (nohup: see conftest)


def bridges(n: Instance) -> tuple[str, str]:
    return n.bridge("client"), n.bridge("server")


def firewall_rules(n: Instance) -> list[str]:
    """Every DOCKER-USER rule (`iptables -S`) that names one of lab n's bridges, quiclab's or not."""
    out = subprocess.run(["iptables", "-w", "5", "-S", "DOCKER-USER"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if any(f" {b} " in f"{line} " for b in bridges(n))]


def resources(n: Instance) -> dict[str, list[str]]:
    """What of lab n exists: containers, networks, volumes (compose's project label) and firewall rules."""
    label = f"label=com.docker.compose.project={n.project}"

    def names(*cmd: str, field: str = "{{.Name}}") -> list[str]:
        return subprocess.run(["docker", *cmd, "--filter", label, "--format", field], capture_output=True,
                              text=True, check=True).stdout.split()

    # (`docker ps` knows .Names only on Debian's Docker 20.10; networks and volumes have .Name)
    return {"containers": names("ps", "-a", field="{{.Names}}"), "networks": names("network", "ls"),
            "volumes": names("volume", "ls"),
            "rules": firewall_rules(n)}


def health(container: str) -> str:
    r = subprocess.run(["docker", "inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{end}}", container],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "missing"


def wait_healthy(containers: list[str], timeout_s: float) -> float:
    t0 = time.monotonic()
    while True:
        states = {c: health(c) for c in containers}
        if all(s == "healthy" for s in states.values()):
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout_s, f"not healthy after {timeout_s:.0f} s: {states}"
        time.sleep(1)


def take_down(n: Instance) -> None:
    """`quiclab down` of lab n (never HOME), whatever state it is in; nothing of it may be left."""
    r = quiclab(n, "down", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert resources(n) == {"containers": [], "networks": [], "volumes": [], "rules": []}


@pytest.fixture
def other_lab(engine: None) -> Iterator[Instance]:
    [other] = spare_labs(1)
    try:
        yield other
    finally:
        take_down(other)


def test_compose_derives_what_quiclab_derives(engine):
    """`docker compose config` (compose's own interpolation) for the default lab and two others: the names,
    subnets, bridges and ports quiclab derives (lab/instance.py)."""
    for n in (instance.DEFAULT, Instance(1), Instance(9)):
        env = {**env_for(Instance(1)), config.ENV_INSTANCE: n.tag}  # no port overrides
        every = [a for p in ("grafana", *optional.ALL) for a in ("--profile", p)]  # optional services too
        r = subprocess.run(["docker", "compose", *every, "config", "--format", "json"],
                           cwd=config.ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["name"] == n.project
        named = {s: v["container_name"] for s, v in doc["services"].items() if "container_name" in v}
        assert named and all(name == n.container(s) for s, name in named.items()), named
        for net, key in (("client", "clientnet"), ("server", "servernet"), ("mgmt", "mgmt")):
            spec = doc["networks"][key]
            assert spec["internal"] is True and spec["ipam"]["config"] == [{"subnet": n.subnet(net)}]
            assert spec["driver_opts"]["com.docker.network.bridge.name"] == n.bridge(net)
        published = {s: int(v["ports"][0]["published"]) for s, v in doc["services"].items() if v.get("ports")}
        assert published == {"prometheus": n.prometheus_port, "pushgateway": n.pushgateway_port,
                             "grafana": n.grafana_port}
        assert all(v["ports"][0]["host_ip"] == "127.0.0.1" for v in doc["services"].values() if v.get("ports"))
        router = doc["services"]["router"]
        assert router["environment"]["QUICLAB_CLIENT_NET"] == n.subnet("client")
        assert router["networks"]["mgmt"]["ipv4_address"] == n.address("mgmt", 254)
        reg = load().for_instance(n)  # the file holds the default lab's; each lab derives its own
        for name in reg.names("server"):
            impl = reg.server(name)
            assert doc["services"][impl.service]["networks"]["servernet"]["ipv4_address"] == impl.address
        hn = doc["services"]["hostnet"]
        assert hn["environment"]["QUICLAB_BRIDGES"] == " ".join(bridges(n))
        # least privilege: the host's network namespace, NET_ADMIN and NET_RAW, nothing else
        assert hn["network_mode"] == "host" and hn["cap_drop"] == ["ALL"]
        assert sorted(hn["cap_add"]) == ["NET_ADMIN", "NET_RAW"] and hn["read_only"] is True
        assert "privileged" not in hn and "volumes" not in hn


def curl_every_server(n: Instance) -> list[str]:
    """curl in lab n's client to every server over each protocol it speaks, through the router: a 300 kB object,
    the protocol actually used, its size and SHA-256 checked. One line per transfer."""
    client = n.container("client")
    route = docker.exec_in(client, ["ip", "route", "get", n.address("server", 10)])
    assert f" via {n.address('client', 254)} " in f"{route} ", route
    digest = docker.exec_in(n.container("server"), ["quiclab-object", str(OBJECT)]).strip()
    reg = load().for_instance(n)
    done = []
    for name in reg.names("server"):
        impl = reg.server(name)
        part = optional.part_of(load().for_instance(config.INSTANCE).server(name).container)
        if part and (part in optional.ON_DEMAND or optional.unavailable(part)):
            continue  # an optional part not built here, or one built on first use: a plain `compose up` starts neither
        for protocol in sorted(impl.protocols):
            url = impl.url(f"/obj/{OBJECT}")
            curl = (f"curl -sS --cacert {config.CA_FILE} {CURL_FLAG[protocol]} --connect-timeout 5 --max-time 60 "
                    f"-o /tmp/obj -w '%{{http_version}} %{{size_download}} %{{remote_ip}}\\n' {url}")
            out = docker.exec_in(client, ["sh", "-c", f"{curl} && sha256sum /tmp/obj && rm /tmp/obj"], timeout_s=90)
            head, sums = out.splitlines()
            version, size, ip = head.split()
            assert (version, int(size), ip) == (protocol.http_version, OBJECT, impl.address), (name, protocol, out)
            assert sums.split()[0] == digest, (name, protocol)
            done.append(f"{name} {protocol.label}: {size} bytes from {ip}")
    return done


def readme_healthy_s() -> float:
    """The README's "Docker calls the containers healthy within ~N s" (after `docker compose up -d`)."""
    m = re.search(r"healthy within ~(\d+) s", (config.ROOT / "README.md").read_text(encoding="utf-8"))
    assert m, "README.md no longer states how soon Docker calls the containers healthy"
    return float(m.group(1))


def test_plain_compose_up_passes_traffic_and_down_leaves_nothing(other_lab):
    """As a new user on a fresh host: no quiclab command, no firewall rule of this lab beforehand."""
    n = other_lab
    hostnet.remove_bridge_rules(bridges(n))
    assert firewall_rules(n) == [], "a rule of this lab survived the clean-up"
    t0 = time.monotonic()
    r = compose(n, "up", "-d", timeout=1800)  # builds what is missing, as on a fresh host
    assert r.returncode == 0, r.stderr[-3000:]
    up_s = time.monotonic() - t0
    waited_s = wait_healthy([n.container("client"), n.container("client-sid")], 240)
    healthy_s = up_s + waited_s
    assert len(firewall_rules(n)) == 2, "the hostnet service added one rule per lab bridge"
    done = curl_every_server(n)
    assert len(done) == (10 if not optional.unavailable("sid") else 7)  # nginx, caddy, nginx-sid: h1-h3; ngtcp2: h3
    transfers = [line.split(":", 1)[0] for line in done]  # "<server> HTTP/x", once each
    assert len(set(transfers)) == len(transfers), transfers
    claimed = readme_healthy_s()
    assert waited_s <= 1.5 * claimed, (
        f"README says Docker calls the containers healthy within ~{claimed:g} s; it took {waited_s:.1f} s after "
        "`docker compose up -d` returned")
    print(f"lab {n.number}: `docker compose up -d` to healthy clients in {healthy_s:.1f} s; " + "; ".join(done))

    r = compose(n, "down")
    assert r.returncode == 0, r.stderr[-2000:]
    left = resources(n)
    assert left["rules"] == [] and left["containers"] == [] and left["networks"] == [], left
    # compose keeps named volumes unless asked (`down -v`, README "Starting the lab"): the lab's are all it kept
    assert sorted(left["volumes"]) == sorted(f"{n.project}_{v}" for v in ("certs", "objects", "pki",
                                                                          "prometheus-data")), left
    r = compose(n, "down", "-v")
    assert r.returncode == 0, r.stderr[-2000:]
    assert resources(n) == {"containers": [], "networks": [], "volumes": [], "rules": []}


def home_is_up() -> None:
    bad = [s for s in lab.states(lab.wanted(lab.REQUIRED_FOR_RUNS)) if not s.ready]
    if bad:
        pytest.skip(f"the lab this test run drives ({HOME.project}) is not up ({bad[0].name} is {bad[0].state}): "
                    f"this test leaves it alone and needs it up")


def verified(out: str, protocol: Protocol) -> None:
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["http_version"] == protocol.http_version and doc["bytes"] == 2_000_000, doc
    assert doc["status"] == "ok" and doc["sha256_ok"], doc


def home_transfer(protocol: Protocol) -> None:
    """A verified transfer in HOME, again while another quiclab command holds it (it is shared)."""
    deadline = time.monotonic() + WAIT_FOR_HOME_S
    while True:
        r = quiclab(HOME, "run", "--protocol", protocol.value, "--size", "2MB", "--json", timeout=300)
        if r.returncode == 0 or BUSY not in r.stderr or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert r.returncode == 0, r.stderr[-2000:]
    verified(r.stdout, protocol)


def test_two_labs_at_once_and_down_of_one_leaves_the_other(other_lab):
    home_is_up()
    n = other_lab
    home_rules = hostnet.lab_rules(bridges(HOME))
    r = quiclab(n, "up", timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"lab {n.number} ({n.project}) is up" in r.stdout + r.stderr

    # a verified transfer in each, at the same time (HOME's again alone if someone else held it)
    mine = quiclab_popen(n, "run", "--protocol", "h3", "--size", "2MB", "--json")
    home = quiclab_popen(HOME, "run", "--protocol", "h3", "--size", "2MB", "--json")
    out, err = mine.communicate(timeout=300)
    assert mine.returncode == 0, err[-2000:]
    verified(out, Protocol.H3)
    home_out, home_err = home.communicate(timeout=300)
    if home.returncode != 0 and BUSY in home_err:
        home_transfer(Protocol.H3)
    else:
        assert home.returncode == 0, home_err[-2000:]
        verified(home_out, Protocol.H3)

    # the hostnet container dies without removing its rules (SIGKILL): `quiclab down` removes them; and an
    # endpoint compose does not know is still on a lab network (a container of no project here; on CI, an endpoint
    # Docker 20.10 had not released after its container went: "has active endpoints"): `down` disconnects it
    subprocess.run(["docker", "kill", n.container("hostnet")], capture_output=True, check=True)
    assert len(firewall_rules(n)) == 2
    stranger = f"quiclab-test-stranger-{n.number}"
    subprocess.run(["docker", "run", "-d", "--rm", "--name", stranger, "--network", f"{n.project}_clientnet",
                    "--entrypoint", "sleep", f"quiclab/router:{os.environ.get('QUICLAB_TAG', 'dev')}", "300"],
                   capture_output=True, check=True, timeout=60)
    try:
        r = quiclab(n, "down", timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert resources(n) == {"containers": [], "networks": [], "volumes": [], "rules": []}
    finally:
        subprocess.run(["docker", "rm", "-f", stranger], capture_output=True, timeout=60)

    assert hostnet.lab_rules(bridges(HOME)) == home_rules, "the other lab's firewall rules were touched"
    assert all(s.ready for s in lab.states(lab.wanted(lab.REQUIRED_FOR_RUNS)))
    home_transfer(Protocol.H1)


def test_a_sweep_sharded_over_two_labs_side_by_side_merges_into_the_plan(engine, tmp_path: Path):
    every = plan(presets.get("quick"))
    labs = tuple(spare_labs(2))
    try:
        for n in labs:
            r = quiclab(n, "up", timeout=1800)
            assert r.returncode == 0, r.stderr[-3000:]
        t0 = time.monotonic()
        procs = [quiclab_popen(n, "sweep", "quick", "--shard", f"{i}/2", "--out", str(tmp_path / f"lab{n.number}"))
                 for i, n in enumerate(labs, start=1)]
        outs = [p.communicate(timeout=1800) for p in procs]
        sweep_s = time.monotonic() - t0
        for p, (_, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, err[-2000:]
        folders = [next(p for p in (tmp_path / f"lab{n.number}").iterdir() if p.is_dir()) for n in labs]
        r = quiclab(HOME, "merge", *map(str, folders), "--out", str(tmp_path / "merged"), timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        [merged] = list((tmp_path / "merged").iterdir())
        records, manifest = load_sweep(merged)
        assert sorted(rec.run_key for rec in records) == sorted(run.key for run in every), "the unsharded plan's"
        assert {(rec.run_key, rec.seed) for rec in records} == {(run.key, run.seed) for run in every}
        assert all(rec.status == "ok" for rec in records), [(rec.run_key, rec.failure) for rec in records
                                                            if rec.status != "ok"]
        assert {json.loads(rec.host)["shard"] for rec in records} == {"1/2", "2/2"}
        assert manifest["status"] == "complete" and len(manifest["shards"]) == 2
        # every planned run ran once, on one of the two labs, and has its times
        assert len(records) == len(every) == len({rec.run_key for rec in records})
        untimed = [rec.run_key for rec in records if not (rec.total_s and 0 < rec.total_s <= rec.wall_s)]
        assert not untimed, f"runs without a positive transfer time within their wall time: {untimed}"
        assert sweep_s > 0
        print(f"quick sweep in 2 shards on labs {labs[0].number} and {labs[1].number} side by side: {sweep_s:.0f} s, "
              f"{len(records)} runs merged")
    finally:
        problems = []
        for n in labs:
            try:
                take_down(n)
            except (AssertionError, docker.DockerError, subprocess.SubprocessError) as e:
                problems.append(f"lab {n.number}: {e}")
        assert not problems, problems
