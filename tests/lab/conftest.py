"""Integration tests: the real lab (Docker engine, images), real bytes through the real router.

They bring the lab up if it is not (scripts/test.sh runs the set-up first, so in CI it is) and skip, naming
what is missing, only where no Docker engine can be reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab import docker, lab
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
