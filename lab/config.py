"""Fixed facts of the lab topology (they mirror docker-compose.yml) and environment variable names."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT = "quiclab"
ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"

CLIENT_CONTAINER = "quiclab-client"
BROWSER_CONTAINER = "quiclab-client-browser"  # headless chromium (images/client-browser)
SERVER_CONTAINER = "quiclab-server"  # nginx; it also makes the test objects (lab/objects.py)
SERVER_NGTCP2_CONTAINER = "quiclab-server-ngtcp2"
SERVER_CADDY_CONTAINER = "quiclab-server-caddy"
ROUTER_CONTAINER = "quiclab-router"
PROMETHEUS_CONTAINER = "quiclab-prometheus"
PUSHGATEWAY_CONTAINER = "quiclab-pushgateway"
GRAFANA_CONTAINER = "quiclab-grafana"

CLIENT_IP = "10.71.1.10"
BROWSER_IP = "10.71.1.12"
SERVER_IP = "10.71.2.10"
ROUTER_CLIENT_SIDE_IP = "10.71.1.254"
ROUTER_SERVER_SIDE_IP = "10.71.2.254"
ROUTER_MGMT_IP = "10.71.3.254"
LINKEM_PORT = 9100
PROMETHEUS_MGMT_IP = "10.71.3.10"
PUSHGATEWAY_MGMT_IP = "10.71.3.11"
PUSHGATEWAY_PORT_IN_CONTAINER = 9091
GRAFANA_PROFILE = "grafana"
GRAFANA_IMAGE = "grafana/grafana-oss"
GRAFANA_DEFAULT_TAG = "11.2.0"
SERVER_NAME = "server.quiclab"
CA_FILE = "/certs/ca.pem"

#: Environment variables quiclab reads (shown in --help).
ENV_PROMETHEUS_PORT = "QUICLAB_PROMETHEUS_PORT"
ENV_TIMEOUT = "QUICLAB_TIMEOUT"
ENV_PUSHGATEWAY_PORT = "QUICLAB_PUSHGATEWAY_PORT"
ENV_PUSHGATEWAY_URL = "QUICLAB_PUSHGATEWAY_URL"  # where sweeps push live results; "off" = do not push
ENV_GRAFANA_PORT = "QUICLAB_GRAFANA_PORT"
ENV_GRAFANA_TAG = "QUICLAB_GRAFANA_TAG"
ENV_GRAFANA = "QUICLAB_GRAFANA"  # "off" = never start Grafana
ENV_GRAFANA_ADMIN_PASSWORD = "QUICLAB_GRAFANA_ADMIN_PASSWORD"
ENV_FILE = ROOT / ".env"


def setting(name: str, default: str) -> str:
    """An environment variable, else its value in .env (which docker compose reads too), else the default."""
    if name in os.environ:
        return os.environ[name]
    try:
        for line in ENV_FILE.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == name:
                return value.strip().strip("'\"")
    except OSError:
        pass
    return default


def prometheus_port() -> int:
    return int(setting(ENV_PROMETHEUS_PORT, "9090"))


def pushgateway_port() -> int:
    return int(setting(ENV_PUSHGATEWAY_PORT, "9091"))


def grafana_port() -> int:
    return int(setting(ENV_GRAFANA_PORT, "3000"))


def grafana_image() -> str:
    return f"{GRAFANA_IMAGE}:{setting(ENV_GRAFANA_TAG, GRAFANA_DEFAULT_TAG)}"


def prometheus_url() -> str:
    return f"http://127.0.0.1:{prometheus_port()}/"


def pushgateway_url() -> str:
    return f"http://127.0.0.1:{pushgateway_port()}/"


def grafana_url() -> str:
    return f"http://127.0.0.1:{grafana_port()}/"


def pushgateway_urls() -> list[str]:
    """Where to push: the override, else the Pushgateway's lab address, else its published port."""
    override = setting(ENV_PUSHGATEWAY_URL, "")
    if override.lower() in ("off", "none", "0"):
        return []
    if override:
        return [override.rstrip("/")]
    return [f"http://{PUSHGATEWAY_MGMT_IP}:{PUSHGATEWAY_PORT_IN_CONTAINER}", pushgateway_url().rstrip("/")]
