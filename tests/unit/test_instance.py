"""Several labs on one host (lab/instance.py): every name, address, bridge and port derives from the lab number, the
default lab keeps today's names, and docker-compose.yml derives the same as quiclab."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys

import pytest

from lab import instance
from lab.instance import Instance
from tests.compose import rendered

ALL = [Instance(n) for n in range(instance.MAX_INSTANCE + 1)]
ROLES = ("hostnet", "router", "server", "server-ngtcp2", "server-caddy", "server-nginx130", "client", "client-sid",
         "prometheus", "pushgateway", "grafana")


def test_the_default_lab_keeps_its_names():
    lab = instance.DEFAULT
    assert (lab.number, lab.tag, lab.project) == (0, "", "quiclab")
    assert lab.container("router") == "quiclab-router"
    assert [lab.subnet(n) for n in ("client", "server", "mgmt")] == ["10.71.1.0/24", "10.71.2.0/24", "10.71.3.0/24"]
    assert [lab.bridge(n) for n in ("client", "server", "mgmt")] == ["ql-client", "ql-server", "ql-mgmt"]
    assert (lab.prometheus_port, lab.pushgateway_port, lab.grafana_port) == (9090, 9091, 3000)
    assert lab.address("mgmt", 254) == "10.71.3.254"


def test_lab_3():
    lab = Instance(3)
    assert (lab.tag, lab.project, lab.container("client-sid")) == ("3", "quiclab-3", "quiclab-3-client-sid")
    assert [lab.subnet(n) for n in ("client", "server", "mgmt")] == ["10.71.31.0/24", "10.71.32.0/24",
                                                                     "10.71.33.0/24"]
    assert lab.bridge("server") == "ql3-server"
    assert (lab.prometheus_port, lab.pushgateway_port, lab.grafana_port) == (9390, 9391, 3300)
    assert lab.from_default_address("10.71.2.13") == "10.71.32.13"
    assert lab.from_default_container("quiclab-server-caddy") == "quiclab-3-server-caddy"


def test_no_two_labs_share_a_name_subnet_bridge_or_port():
    for what in (lambda i: i.project, lambda i: i.container("router"), lambda i: i.bridge("client"),
                 lambda i: i.prometheus_port, lambda i: i.pushgateway_port, lambda i: i.grafana_port):
        assert len({what(i) for i in ALL}) == len(ALL)
    nets = [ipaddress.ip_network(i.subnet(n)) for i in ALL for n in instance.NETWORKS]
    assert all(not a.overlaps(b) for k, a in enumerate(nets) for b in nets[k + 1:])
    ports = [p for i in ALL for p in (i.prometheus_port, i.pushgateway_port, i.grafana_port)]
    assert len(set(ports)) == len(ports) and all(1024 < p < 65536 for p in ports)


def test_bridge_names_fit_linux_interface_names():
    assert max(len(i.bridge(n)) for i in ALL for n in instance.NETWORKS) <= instance.MAX_BRIDGE_NAME


@pytest.mark.parametrize(("text", "number"), [("", 0), ("0", 0), (" 0 ", 0), ("1", 1), ("9", 9)])
def test_parse(text, number):
    assert instance.parse(text).number == number


@pytest.mark.parametrize("text", ["10", "-1", "01", "x", "a1", "1.0", "lab1", "\uff11"])
def test_parse_refuses(text):
    with pytest.raises(ValueError):
        instance.parse(text)


@pytest.mark.parametrize(("value", "argv"), [("10", ["down"]), ("x", ["presets"])])
def test_a_bad_instance_stops_any_command_with_one_line(value, argv):
    """Before anything runs, whatever the command (a typo must never reach the default lab)."""
    env = {**os.environ, "QUICLAB_INSTANCE": value}
    p = subprocess.run([sys.executable, "-m", "lab", *argv], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2, (argv, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"QUICLAB_INSTANCE {value!r}" in lines[0] and "1..9" in lines[0], p.stderr


def test_quiclab_derives_what_compose_derives():
    """docker-compose.yml, with QUICLAB_INSTANCE spliced in as compose does, holds every name quiclab expects."""
    for lab in ALL:
        text = rendered(lab)
        assert text.count(f"\nname: {lab.project}\n") == 1
        for role in ROLES:
            assert f"container_name: {lab.container(role)}\n" in text, (lab, role)
        for net in instance.NETWORKS:
            assert f'{{subnet: "{lab.subnet(net)}"}}' in text
            assert f'com.docker.network.bridge.name: "{lab.bridge(net)}"' in text
        assert f"127.0.0.1:${{QUICLAB_PROMETHEUS_PORT:-{lab.prometheus_port}}}:9090" in text
        assert f"127.0.0.1:${{QUICLAB_PUSHGATEWAY_PORT:-{lab.pushgateway_port}}}:9091" in text
        assert f"127.0.0.1:${{QUICLAB_GRAFANA_PORT:-{lab.grafana_port}}}:3000" in text
        # every address in the file is on this lab's networks
        subnets = [ipaddress.ip_network(lab.subnet(n)) for n in instance.NETWORKS]
        for a in re.findall(r"\b10\.71\.\d+\.\d+\b", text.split("\nname:", 1)[1]):
            assert any(ipaddress.ip_address(a) in s for s in subnets), (lab, a)


def test_the_default_lab_config_is_the_old_one():
    """Without QUICLAB_INSTANCE quiclab drives the lab it always did (the shared one keeps working)."""
    from lab import config, lock

    assert (config.PROJECT, config.CLIENT_CONTAINER, config.SERVER_IP, config.ROUTER_MGMT_IP) == \
        ("quiclab", "quiclab-client", "10.71.2.10", "10.71.3.254")
    assert lock.lock_path().name == "quiclab-lab.lock"


def test_another_lab_has_its_own_names_lock_and_registry():
    code = ("from lab import config, lock, hostnet\n"
            "from lab.endpoints.registry import registry\n"
            "r = registry()\n"
            "print(config.PROJECT, config.ROUTER_CONTAINER, config.ROUTER_MGMT_IP, config.prometheus_port(),\n"
            "      lock.lock_path().name, ','.join(hostnet.LAB_BRIDGES), r.server('caddy').address,\n"
            "      r.server('caddy').container, r.client('curl-sid').container)")
    env = {**os.environ, "QUICLAB_INSTANCE": "2"}
    env.pop("QUICLAB_PROMETHEUS_PORT", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         check=True).stdout.split()
    assert out == ["quiclab-2", "quiclab-2-router", "10.71.23.254", "9290", "quiclab-2-lab.lock",
                   "ql2-client,ql2-server", "10.71.22.12", "quiclab-2-server-caddy", "quiclab-2-client-sid"]
