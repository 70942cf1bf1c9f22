"""Integration tests: the real lab (Docker engine, images), real bytes through the real router.

They bring the lab up if it is not (scripts/test.sh runs the set-up first, so in CI it is) and skip, naming
what is missing, only where no Docker engine can be reached. The timing checks (every test that calls a timing
helper: on_quiet_host here, still_in_force in probes.py) are marked `timing` and counted (tests/timing.py): their
skips for a busy host fail the session beyond QUICLAB_TIMING_SKIP_LIMIT.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from lab import docker, lab
from lab.bench import host
from lab.errors import QuiclabError
from lab.link import linkem, shaper
from lab.link.model import Link
from tests import timing

#: the helpers a timing check calls: a test that names one is marked `timing` at collection (tests/timing.py).
#: (tests/lab/test_link_stages.py still defines its own still_in_force, a plain skip: counted as "other reasons"
#: until it imports the one in probes.py, which skips for a busy host.)
TIMING_HELPERS = ("on_quiet_host", "still_in_force")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = config.rootpath / "tests" / "lab"
    timing.mark_callers([i for i in items if i.path.is_relative_to(here)], TIMING_HELPERS)


@pytest.fixture(scope="session")
def lab_up() -> None:
    try:
        docker.require_engine()
    except QuiclabError as e:
        pytest.skip(f"needs a Docker engine: {e}")
    if not all(s.ready for s in lab.states(lab.wanted(lab.REQUIRED_FOR_RUNS))):
        lab.up()


@pytest.fixture
def clean_link(lab_up: None) -> Iterator[None]:
    """An unimpaired link before and after the test."""
    shaper.apply(Link())
    yield
    shaper.apply(Link())


def link_counters() -> str:
    return linkem.metrics_text()


T = TypeVar("T")


def on_quiet_host(measure: Callable[[], T], good: Callable[[T], bool], attempts: int = 3) -> list[T]:
    """Timing-accuracy checks: run `measure` up to `attempts` times, stopping at the first `good` result. A result
    measured while the hypervisor took more than MAX_STEAL_PCT of the CPU shows the host, not the emulator, and
    is set aside; if every attempt was disturbed so, the test skips for a busy host (a skip counted against
    QUICLAB_TIMING_SKIP_LIMIT: tests/timing.py). Returns the undisturbed results (the caller asserts on them: the
    last one is good unless all failed)."""
    timing.record()
    results: list[T] = []
    disturbed: list[float] = []
    for _ in range(attempts):
        with host.StealMeter() as meter:
            result = measure()
        if meter.disturbed:
            disturbed.append(meter.steal_pct)
            continue
        results.append(result)
        if good(result):
            break
    if not results:
        timing.skip_busy(f"the hypervisor took {', '.join(f'{x:.0f}' for x in disturbed)} % of this host's CPU during "
                         f"the {attempts} attempts (over the {host.MAX_STEAL_PCT:.0f} % a timing-accuracy check "
                         f"allows): the emulator's precision cannot be checked on this host at the moment "
                         f"(docs/benchmarks.md)")
    return results


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def quiclab_popen(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """`quiclab ARGS` in a child process that Ctrl-C (SIGINT) can stop, whatever the test run inherited: under
    `nohup ... &` SIGINT arrives ignored, and an ignored signal stays ignored across exec."""
    return subprocess.Popen([sys.executable, "-m", "lab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint, **kwargs)
