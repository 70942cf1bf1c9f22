"""The lab's web UIs (Prometheus, Pushgateway, Grafana): where they are and whether they answer."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from lab import config


@dataclass(frozen=True)
class Service:
    name: str
    container: str
    url: Callable[[], str]
    health_path: str


PROMETHEUS = Service("Prometheus", config.PROMETHEUS_CONTAINER, config.prometheus_url, "-/ready")
PUSHGATEWAY = Service("Pushgateway", config.PUSHGATEWAY_CONTAINER, config.pushgateway_url, "-/ready")
GRAFANA = Service("Grafana", config.GRAFANA_CONTAINER, config.grafana_url, "api/health")
ALL = (PROMETHEUS, PUSHGATEWAY, GRAFANA)


def is_up(service: Service, timeout_s: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(service.url() + service.health_path, timeout=timeout_s) as resp:
            return 200 <= resp.status < 300
    except (OSError, urllib.error.URLError):
        return False


def wait_up(service: Service, timeout_s: float) -> bool:
    deadline = time.monotonic() + config.deadline(timeout_s)
    while not is_up(service):
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)
    return True
