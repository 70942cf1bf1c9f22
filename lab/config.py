"""Fixed facts of the lab topology (they mirror docker-compose.yml) and environment variable names."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT = "quiclab"
ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"

CLIENT_CONTAINER = "quiclab-client"
SERVER_CONTAINER = "quiclab-server"
ROUTER_CONTAINER = "quiclab-router"
PROMETHEUS_CONTAINER = "quiclab-prometheus"

CLIENT_IP = "10.71.1.10"
SERVER_IP = "10.71.2.10"
ROUTER_CLIENT_SIDE_IP = "10.71.1.254"
ROUTER_SERVER_SIDE_IP = "10.71.2.254"
ROUTER_MGMT_IP = "10.71.3.254"
LINKEM_PORT = 9100
SERVER_NAME = "server.quiclab"
CA_FILE = "/certs/ca.pem"

#: Environment variables quiclab reads (shown in --help).
ENV_PROMETHEUS_PORT = "QUICLAB_PROMETHEUS_PORT"
ENV_TIMEOUT = "QUICLAB_TIMEOUT"


def prometheus_port() -> int:
    return int(os.environ.get(ENV_PROMETHEUS_PORT, "9090"))
