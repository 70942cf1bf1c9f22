"""Fixed facts of the lab topology (they mirror docker-compose.yml) and environment variable names."""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from lab.errors import UsageError

PROJECT = "quiclab"
ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"

CLIENT_CONTAINER = "quiclab-client"
SERVER_CONTAINER = "quiclab-server"  # nginx; it also makes the test objects (lab/objects.py)
SERVER_NGTCP2_CONTAINER = "quiclab-server-ngtcp2"
SERVER_CADDY_CONTAINER = "quiclab-server-caddy"
ROUTER_CONTAINER = "quiclab-router"
PROMETHEUS_CONTAINER = "quiclab-prometheus"
PUSHGATEWAY_CONTAINER = "quiclab-pushgateway"
GRAFANA_CONTAINER = "quiclab-grafana"

CLIENT_IP = "10.71.1.10"
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

#: Environment variables quiclab reads (shown in --help). Each may also be set in .env (which docker compose reads
#: too); the environment wins. Every value is checked before the lab is touched (`check_all`).
ENV_PROMETHEUS_PORT = "QUICLAB_PROMETHEUS_PORT"
ENV_TIMEOUT = "QUICLAB_TIMEOUT"
ENV_PUSHGATEWAY_PORT = "QUICLAB_PUSHGATEWAY_PORT"
ENV_PUSHGATEWAY_URL = "QUICLAB_PUSHGATEWAY_URL"  # where sweeps push live results; "off" = do not push
ENV_GRAFANA_PORT = "QUICLAB_GRAFANA_PORT"
ENV_GRAFANA_TAG = "QUICLAB_GRAFANA_TAG"
ENV_GRAFANA = "QUICLAB_GRAFANA"  # "off" = never start Grafana
ENV_GRAFANA_ADMIN_PASSWORD = "QUICLAB_GRAFANA_ADMIN_PASSWORD"
ENV_TAG = "QUICLAB_TAG"  # the lab images' tag (compose)
ENV_LINKEM_SPIN_US = "QUICLAB_LINKEM_SPIN_US"  # linkem's busy-wait before a deadline (compose -> router)
ENV_AGENT = "QUICLAB_AGENT"  # "off" = one docker exec per command even where a client agent exists (lab/agent.py)
ENV_FILE = ROOT / ".env"

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
_OFF = ("off", "none", "0", "no", "false")
_ON = ("on", "1", "yes", "true")
_DOCKER_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_WHOLE = re.compile(r"^\d+$")

T = TypeVar("T")


def _dotenv() -> dict[str, str]:
    """The .env file's values (python-dotenv reads it as docker compose does); a malformed line is a UsageError."""
    if not ENV_FILE.is_file():
        return {}
    try:
        text = ENV_FILE.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise UsageError(f"cannot read {ENV_FILE}: {why}") from None
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            raise UsageError(f"invalid line {binding.original.line} in {ENV_FILE}: "
                             f"{binding.original.string.strip()!r}: expected NAME=value")
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return {k: v for k, v in values.items() if v is not None}


def _lookup(name: str) -> tuple[str, str] | None:
    """(value, where it came from) of a setting: the environment, else .env; None if unset or empty."""
    if name in os.environ:
        value, source = os.environ[name], "the environment"
    else:
        found = _dotenv().get(name)
        if found is None:
            return None
        value, source = found, str(ENV_FILE)
    return (value, source) if value.strip() else None


def setting(name: str, default: str) -> str:
    """An environment variable, else its value in .env (which docker compose reads too), else the default."""
    found = _lookup(name)
    return found[0] if found else default


def _typed(name: str, default: T, parse: Callable[[str], T], allowed: str) -> T:
    """A setting parsed by `parse` (which raises ValueError for a bad value): one line naming the variable, the
    value, where it was set and what is allowed."""
    found = _lookup(name)
    if found is None:
        return default
    value, source = found
    try:
        return parse(value.strip())
    except ValueError:
        raise UsageError(f"invalid {name} {value!r} (set in {source}): allowed is {allowed}") from None


def _port(text: str) -> int:
    if not _WHOLE.match(text) or not 1 <= int(text) <= 65535:
        raise ValueError(text)
    return int(text)


def _seconds(text: str) -> float:
    v = float(text)
    if not (math.isfinite(v) and 0 < v <= MAX_TIMEOUT_S):
        raise ValueError(text)
    return v


def _switch(text: str) -> bool:
    if text.lower() in _OFF:
        return False
    if text.lower() in _ON:
        return True
    raise ValueError(text)


def _tag(text: str) -> str:
    if not _DOCKER_TAG.match(text):
        raise ValueError(text)
    return text


def _spin_us(text: str) -> int:
    if not _WHOLE.match(text) or int(text) > 10_000:
        raise ValueError(text)
    return int(text)


def _push_url(text: str) -> str:
    if text.lower() in _OFF:
        return "off"
    u = urlsplit(text)
    _ = u.port  # raises ValueError for a port that is not a number in 0..65535
    if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
        raise ValueError(text)
    return text.rstrip("/")


def prometheus_port() -> int:
    return _typed(ENV_PROMETHEUS_PORT, 9090, _port, "a TCP port number, 1..65535")


def pushgateway_port() -> int:
    return _typed(ENV_PUSHGATEWAY_PORT, 9091, _port, "a TCP port number, 1..65535")


def grafana_port() -> int:
    return _typed(ENV_GRAFANA_PORT, 3000, _port, "a TCP port number, 1..65535")


def timeout_s() -> float:
    """The per-transfer timeout of `quiclab run` when --timeout is not given."""
    return _typed(ENV_TIMEOUT, DEFAULT_TIMEOUT_S, _seconds,
                  f"a number of seconds, more than 0 and at most {MAX_TIMEOUT_S:g}")


def grafana_enabled() -> bool:
    return _typed(ENV_GRAFANA, True, _switch, "on or off (also 1/0, yes/no, true/false)")


def agent_enabled() -> bool:
    return _typed(ENV_AGENT, True, _switch, "on or off (also 1/0, yes/no, true/false)")


def grafana_image() -> str:
    tag = _typed(ENV_GRAFANA_TAG, GRAFANA_DEFAULT_TAG, _tag, "a Docker image tag, e.g. 11.2.0")
    return f"{GRAFANA_IMAGE}:{tag}"


def images_tag() -> str:
    return _typed(ENV_TAG, "dev", _tag, "a Docker image tag, e.g. dev")


def linkem_spin_us() -> int:
    return _typed(ENV_LINKEM_SPIN_US, 200, _spin_us, "a whole number of microseconds, 0..10000")


def prometheus_url() -> str:
    return f"http://127.0.0.1:{prometheus_port()}/"


def pushgateway_url() -> str:
    return f"http://127.0.0.1:{pushgateway_port()}/"


def grafana_url() -> str:
    return f"http://127.0.0.1:{grafana_port()}/"


def pushgateway_urls() -> list[str]:
    """Where to push: the override, else the Pushgateway's lab address, else its published port."""
    override = _typed(ENV_PUSHGATEWAY_URL, "", _push_url,
                      "off, or an http(s) URL such as http://127.0.0.1:9091 (no query)")
    if override == "off":
        return []
    if override:
        return [override]
    return [f"http://{PUSHGATEWAY_MGMT_IP}:{PUSHGATEWAY_PORT_IN_CONTAINER}", pushgateway_url().rstrip("/")]


def check_all() -> None:
    """Check every setting quiclab or docker compose reads (a bad one is a UsageError naming it)."""
    prometheus_port()
    pushgateway_port()
    grafana_port()
    timeout_s()
    grafana_enabled()
    agent_enabled()
    grafana_image()
    images_tag()
    linkem_spin_us()
    pushgateway_urls()
