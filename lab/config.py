"""The lab topology (it mirrors docker-compose.yml; every name, address and port derives from the lab number,
lab/instance.py) and the environment variables quiclab reads."""

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

from lab import instance
from lab.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
#: Recorded mahimahi trace pairs (NAME.down, NAME.up) a link's `traces = "NAME"` names: ../shared/traces beside the
#: clone, as the seed files are (../shared/seeds).
TRACES_DIR = ROOT.parent / "shared" / "traces"

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
ENV_LINKEM_NAPI = "QUICLAB_LINKEM_NAPI"  # on = threaded NAPI on the router's TUNs (a host step: lab/link/napi.py)
ENV_AGENT = "QUICLAB_AGENT"  # "off" = one docker exec per command even where a client agent exists (lab/agent.py)
# "off" = the client agents start curl with each fetch instead of keeping the next one started (images/client/agent.py)
ENV_CURL_SPARE = "QUICLAB_CURL_SPARE"
ENV_INSTANCE = instance.ENV_INSTANCE  # which lab of this host (lab/instance.py); unset: the default lab
#: How many times slower than a real host the lab's machine is (an emulated CPU: scripts/vm.sh sets it in a VM under
#: TCG). Every deadline of the lab's own machinery is that many times longer (`deadline`); nothing measured changes.
ENV_SLOW = "QUICLAB_SLOW"
ENV_FILE = ROOT / ".env"

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
MAX_SLOW = 100.0
_OFF = ("off", "none", "0", "no", "false")
_ON = ("on", "1", "yes", "true")
_DOCKER_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_WHOLE = re.compile(r"^\d+$")

T = TypeVar("T")


#: The .env file's text as last parsed, and its values: settings are read several times per run (every agent
#: request asks whether agents are on); reading the file costs microseconds, parsing it ~0.15 ms.
_dotenv_parsed: tuple[str, dict[str, str]] | None = None


def _dotenv() -> dict[str, str]:
    """The .env file's values (python-dotenv reads it as docker compose does); a malformed line is a UsageError.
    Parsed again whenever its text changes."""
    global _dotenv_parsed
    if not ENV_FILE.is_file():
        return {}
    try:
        text = ENV_FILE.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise UsageError(f"cannot read {ENV_FILE}: {why}") from None
    if _dotenv_parsed is not None and _dotenv_parsed[0] == text:
        return dict(_dotenv_parsed[1])
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            raise UsageError(f"invalid line {binding.original.line} in {ENV_FILE}: "
                             f"{binding.original.string.strip()!r}: expected NAME=value")
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    parsed = {k: v for k, v in values.items() if v is not None}
    _dotenv_parsed = (text, parsed)
    return dict(parsed)


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


def _instance() -> instance.Instance:
    """The lab this process drives, from QUICLAB_INSTANCE (environment, else .env), read once at import: every
    name below derives from it. A bad value falls back to the default lab here only so that importing never fails;
    `quiclab` refuses it before any command runs (`check_instance`)."""
    try:
        found = _lookup(ENV_INSTANCE)
        return instance.parse(found[0] if found else "")
    except (UsageError, ValueError):
        return instance.DEFAULT


def check_instance() -> instance.Instance:
    """QUICLAB_INSTANCE, checked: a bad value is one line naming it, where it was set and what is allowed."""
    return _typed(ENV_INSTANCE, instance.DEFAULT, instance.parse, instance.ALLOWED)


INSTANCE = _instance()
PROJECT = INSTANCE.project  # the compose project: quiclab, quiclab-1, ...

# The implementations' containers are the registry's (lab/endpoints/implementations.toml; the lab's lists of them:
# lab/lab.py). Named here only the containers other parts of the lab use for what they are besides an
# implementation's home: the client host (iperf3 and ping for the link's self-checks), the server that makes the
# test objects, the browser, and Debian unstable's two for their image tests (a client's address: lab/compose.py).
CLIENT_CONTAINER = INSTANCE.container("client")
CLIENT_SID_CONTAINER = INSTANCE.container("client-sid")
BROWSER_CONTAINER = INSTANCE.container("client-browser")
SERVER_CONTAINER = INSTANCE.container("server")  # it also makes the test objects (lab/objects.py)
SERVER_NGINX130_CONTAINER = INSTANCE.container("server-nginx130")
ROUTER_CONTAINER = INSTANCE.container("router")
HOSTNET_CONTAINER = INSTANCE.container("hostnet")  # the host firewall allowance for the lab bridges (lab/hostnet.py)
PROMETHEUS_CONTAINER = INSTANCE.container("prometheus")
PUSHGATEWAY_CONTAINER = INSTANCE.container("pushgateway")
GRAFANA_CONTAINER = INSTANCE.container("grafana")

CLIENT_IP = INSTANCE.address("client", 10)
SERVER_IP = INSTANCE.address("server", 10)
ROUTER_CLIENT_SIDE_IP = INSTANCE.address("client", 254)
ROUTER_MGMT_IP = INSTANCE.address("mgmt", 254)
LINKEM_PORT = 9100
PUSHGATEWAY_MGMT_IP = INSTANCE.address("mgmt", 11)
PUSHGATEWAY_PORT_IN_CONTAINER = 9091
GRAFANA_PROFILE = "grafana"
GRAFANA_IMAGE = "grafana/grafana-oss"
GRAFANA_DEFAULT_TAG = "11.2.0"
SERVER_NAME = "server.quiclab"
CA_FILE = "/certs/ca.pem"


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


def _factor(text: str) -> float:
    v = float(text)
    if not (math.isfinite(v) and 1 <= v <= MAX_SLOW):
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
    return _typed(ENV_PROMETHEUS_PORT, INSTANCE.prometheus_port, _port, "a TCP port number, 1..65535")


def pushgateway_port() -> int:
    return _typed(ENV_PUSHGATEWAY_PORT, INSTANCE.pushgateway_port, _port, "a TCP port number, 1..65535")


def grafana_port() -> int:
    return _typed(ENV_GRAFANA_PORT, INSTANCE.grafana_port, _port, "a TCP port number, 1..65535")


def timeout_s() -> float:
    """The per-transfer timeout of `quiclab run` when --timeout is not given."""
    return _typed(ENV_TIMEOUT, DEFAULT_TIMEOUT_S, _seconds,
                  f"a number of seconds, more than 0 and at most {MAX_TIMEOUT_S:g}")


def slow_factor() -> float:
    """QUICLAB_SLOW: how many times slower than a real host this machine runs the lab (1, the default, on a real
    host; scripts/vm.sh sets it inside a VM whose CPU is emulated)."""
    return _typed(ENV_SLOW, 1.0, _factor, f"a number from 1 to {MAX_SLOW:g} (how many times slower than a real host)")


def deadline(seconds: float) -> float:
    """A deadline of the lab's own machinery (a `docker exec`, a helper container, a readiness wait, a tshark read,
    a process start) as this machine needs it: `seconds` on a real host, QUICLAB_SLOW times as long under emulation.
    Applied once, where the deadline is enforced; never to what a run measures (a transfer's timeout, a probe's
    interval, a bin), which stays what the plan says."""
    return seconds * slow_factor()


def grafana_enabled() -> bool:
    return _typed(ENV_GRAFANA, True, _switch, "on or off (also 1/0, yes/no, true/false)")


def agent_enabled() -> bool:
    return _typed(ENV_AGENT, True, _switch, "on or off (also 1/0, yes/no, true/false)")


def curl_spare_enabled() -> bool:
    return _typed(ENV_CURL_SPARE, True, _switch, "on or off (also 1/0, yes/no, true/false)")


def grafana_image() -> str:
    tag = _typed(ENV_GRAFANA_TAG, GRAFANA_DEFAULT_TAG, _tag, "a Docker image tag, e.g. 11.2.0")
    return f"{GRAFANA_IMAGE}:{tag}"


def images_tag() -> str:
    return _typed(ENV_TAG, "dev", _tag, "a Docker image tag, e.g. dev")


def linkem_spin_us() -> int:
    return _typed(ENV_LINKEM_SPIN_US, 200, _spin_us, "a whole number of microseconds, 0..10000")


def _switch_or_auto(text: str) -> bool | None:
    return None if text.lower() == "auto" else _switch(text)


def linkem_napi() -> bool | None:
    """QUICLAB_LINKEM_NAPI: True (on), False (off) or None (auto, the default: on where quiclab runs as root and can
    make the host step, lab/link/napi.py `wanted`)."""
    return _typed(ENV_LINKEM_NAPI, None, _switch_or_auto, "on, off or auto (also 1/0, yes/no, true/false)")


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
    check_instance()
    prometheus_port()
    pushgateway_port()
    grafana_port()
    timeout_s()
    slow_factor()
    grafana_enabled()
    agent_enabled()
    curl_spare_enabled()
    grafana_image()
    images_tag()
    linkem_spin_us()
    linkem_napi()
    pushgateway_urls()


def cache_dir() -> Path:
    """Where quiclab keeps what it learned about this host between commands (start-up facts, passed health
    checks, why an optional image is unavailable): $XDG_CACHE_HOME/quiclab, else ~/.cache/quiclab."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "quiclab"
