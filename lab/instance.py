"""Several labs on one host: a lab number derives every name, address, bridge and port of one lab.

Lab 0 (QUICLAB_INSTANCE unset, empty or 0) is the default lab: compose project `quiclab`, containers `quiclab-*`,
subnets 10.71.1/2/3.0/24, bridges ql-client/ql-server/ql-mgmt, ports 9090/9091/3000 on 127.0.0.1. Lab N (1..9)
is project `quiclab-N`, containers `quiclab-N-*`, subnets 10.71.N1/N2/N3.0/24, bridges qlN-client/qlN-server/
qlN-mgmt, ports 9N90/9N91/3N00.

docker-compose.yml derives the same names by string interpolation alone (compose has no arithmetic: the lab number
is spliced into each name, `10.71.${QUICLAB_INSTANCE:-}1.0/24`), so `QUICLAB_INSTANCE=2 docker compose up -d`
needs no quiclab command; this module mirrors it for quiclab (tests/unit/test_instance.py holds the two together).
Pure: no Docker, no environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENV_INSTANCE = "QUICLAB_INSTANCE"
MAX_INSTANCE = 9
ALLOWED = f"a lab number 1..{MAX_INSTANCE} (unset, empty or 0: the default lab)"
BASE_PROJECT = "quiclab"
#: The lab networks and the third octet of their subnet in lab 0 (lab N: N followed by it).
NETWORKS = {"client": 1, "server": 2, "mgmt": 3}
_NET_PREFIX = "10.71."
_LAB0_ADDRESS = re.compile(r"^10\.71\.([123])\.(\d{1,3})$")
MAX_BRIDGE_NAME = 15  # IFNAMSIZ - 1: Linux refuses longer interface names


@dataclass(frozen=True)
class Instance:
    number: int

    def __post_init__(self) -> None:
        if not 0 <= self.number <= MAX_INSTANCE:
            raise ValueError(f"lab number {self.number} is outside 0..{MAX_INSTANCE}")

    @property
    def tag(self) -> str:
        """What docker-compose.yml sees as QUICLAB_INSTANCE: empty for the default lab, else the number."""
        return str(self.number) if self.number else ""

    @property
    def project(self) -> str:
        return f"{BASE_PROJECT}-{self.number}" if self.number else BASE_PROJECT

    def container(self, role: str) -> str:
        """The container of a role ("router", "client", "server-caddy", ...)."""
        return f"{self.project}-{role}"

    def service(self, container: str) -> str:
        """The role (compose service) of one of this lab's containers: the inverse of `container`."""
        prefix = f"{self.project}-"
        return container[len(prefix):] if container.startswith(prefix) else container

    def from_default_container(self, name: str) -> str:
        """Lab 0's container name (as the implementation registry holds it) in this lab."""
        prefix = f"{BASE_PROJECT}-"
        return self.container(name[len(prefix):]) if name.startswith(prefix) else name

    def bridge(self, network: str) -> str:
        if network not in NETWORKS:
            raise ValueError(f"unknown lab network {network!r}")
        return f"ql{self.tag}-{network}"

    def third_octet(self, network: str) -> int:
        return int(f"{self.tag}{NETWORKS[network]}")

    def subnet(self, network: str) -> str:
        return f"{_NET_PREFIX}{self.third_octet(network)}.0/24"

    def address(self, network: str, host: int) -> str:
        if not 1 <= host <= 254:
            raise ValueError(f"host number {host} is outside 1..254")
        return f"{_NET_PREFIX}{self.third_octet(network)}.{host}"

    def from_default_address(self, address: str) -> str:
        """Lab 0's address of a lab host (10.71.{1,2,3}.H, as the implementation registry holds it) in this lab."""
        m = _LAB0_ADDRESS.match(address)
        if m is None:
            raise ValueError(f"{address!r} is not an address on lab 0's networks (10.71.1-3.H)")
        network = next(n for n, octet in NETWORKS.items() if octet == int(m.group(1)))
        return self.address(network, int(m.group(2)))

    def _port(self, lab0_port: int) -> int:
        """9090 -> 9N90, 3000 -> 3N00: the lab number replaces the port's second digit (a 0 in lab 0's ports)."""
        text = str(lab0_port)
        return int(f"{text[0]}{self.number}{text[2:]}")

    @property
    def prometheus_port(self) -> int:
        return self._port(9090)

    @property
    def pushgateway_port(self) -> int:
        return self._port(9091)

    @property
    def grafana_port(self) -> int:
        return self._port(3000)


DEFAULT = Instance(0)


def parse(text: str) -> Instance:
    """QUICLAB_INSTANCE's value; ValueError for anything but 0..9 (or empty)."""
    text = text.strip()
    if text in ("", "0"):
        return DEFAULT
    if not re.fullmatch(r"[1-9]", text):
        raise ValueError(text)
    return Instance(int(text))
