"""Integration tests: the real lab (Docker engine, images), real bytes through the real router.

They bring the lab up if it is not (scripts/test.sh runs the set-up first, so in CI it is) and skip, naming
what is missing, only where no Docker engine can be reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab import docker, lab
from lab.bench import host
from lab.bench.host import MAX_TIMER_LATENESS_MS, HostTiming
from lab.errors import QuiclabError
from lab.link import linkem, shaper
from lab.link.model import Link


@pytest.fixture(scope="session")
def lab_up() -> None:
    try:
        docker.require_engine()
    except QuiclabError as e:
        pytest.skip(f"needs a Docker engine: {e}")
    if not all(s.ready for s in lab.states(lab.REQUIRED_FOR_RUNS)):
        lab.up()


@pytest.fixture
def clean_link(lab_up: None) -> Iterator[None]:
    """An unimpaired link before and after the test."""
    shaper.apply(Link())
    yield
    shaper.apply(Link())


def link_counters() -> str:
    return linkem.metrics_text()


@pytest.fixture
def precise_host(clean_link: None) -> HostTiming:
    """Skip (naming the measured lateness and steal) a timing-accuracy check the host cannot support right now."""
    timing = host.measure()
    if not timing.precise:
        pytest.skip(f"this host's timers fire {timing.late_p90_ms:.1f} ms late (p90; CPU steal "
                    f"{timing.steal_pct:.0f} %) right now, over the {MAX_TIMER_LATENESS_MS} ms a timing-accuracy "
                    f"check needs: the emulator's precision cannot be checked on this host at the moment "
                    f"(docs/benchmarks.md)")
    return timing
