"""A client's address is its own container's (docker-compose.yml's), not the main client's: the captured run's
connection count (wire_connections), the server's socket watch and the resume/0rtt proof all look for packets
from it. Before, every client outside the browser got the main client's 10.71.1.10."""

from __future__ import annotations

import pytest

from lab import compose, config
from lab.endpoints.registry import registry
from lab.errors import EnvironmentProblem
from lab.run import workload


def test_each_client_of_the_registry_has_its_own_containers_address():
    reg = registry()
    clients = [reg.client(name) for name in reg.names("client")]
    addresses = {c.name: workload.client_ip(c.name) for c in clients}
    assert addresses["curl"] == config.CLIENT_IP
    assert addresses["chromium"] == config.INSTANCE.address("client", 12)
    assert addresses["quic-go-client"] == config.INSTANCE.address("client", 14)
    assert addresses["quinn-client"] == config.INSTANCE.address("client", 15)
    by_container: dict[str, set[str]] = {}
    for c in clients:
        by_container.setdefault(c.container, set()).add(addresses[c.name])
    assert all(len(a) == 1 for a in by_container.values())  # clients sharing a container share its address
    assert len(set(addresses.values())) == len(by_container)  # and no two containers share one


def test_an_address_follows_the_lab_instance(monkeypatch):
    from lab.instance import Instance
    monkeypatch.setattr(config, "INSTANCE", Instance(2))
    assert compose.address(Instance(2).container("client-quicgo"), "client") == Instance(2).address("client", 14)
    assert compose.address(Instance(2).container("router"), "server") == Instance(2).address("server", 254)


def test_a_container_without_a_fixed_client_address_is_named(monkeypatch):
    client = registry().client(registry().names("client")[0])
    monkeypatch.setattr(compose, "address", lambda container, network: None)
    with pytest.raises(EnvironmentProblem, match=f"client {client.name!r}: its container"):
        workload.client_ip(client.name)
