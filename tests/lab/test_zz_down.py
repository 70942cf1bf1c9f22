"""`quiclab down` leaves no containers, networks or volumes of the lab. Order-independent: the test holds the lab's
lock while it takes the lab down, brings it back as it found it (the optional parts that were up, the link that was
in force through linkem) and makes this process forget what it knew of the old containers, so the tests after it
(in any order) meet a lab as before. (Its name still sorts it last: taking the lab down and up costs a minute.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from lab import agent, lab, lock, objects, optional
from lab.link import calibrate, router, shaper
from lab.link.model import Link
from lab.workloads import pages

pytestmark = pytest.mark.lab


@pytest.fixture
def lab_held(lab_up: None) -> Iterator[None]:
    """No other quiclab command measures on this lab while it goes down and up (skip, naming the holder, if one
    holds it)."""
    try:
        with lock.holding("pytest tests/lab/test_zz_down.py"):
            yield
    except lock.LabBusy as e:
        pytest.skip(str(e))


def parts_up() -> tuple[str, ...]:
    """The optional parts whose containers all run now."""
    running = {s.name for s in lab.states() if s.state == "running"}
    return tuple(name for name, p in optional.parts().items() if p.containers and set(p.containers) <= running)


def forget_the_old_lab() -> None:
    """What this process learned about the containers that are gone: the test objects' hashes (the object volume is
    new), the router's interfaces and path, the lab path's calibration (the router restarted), the client agents."""
    objects._cache.clear()
    pages._cache.clear()
    calibrate._cache.clear()
    router.interfaces.cache_clear()
    router.image.cache_clear()
    router.has_netem.cache_clear()
    router._path.clear()
    agent._agents.clear()


def test_down_leaves_nothing_behind(lab_held):
    parts = parts_up()
    backend, link = shaper.in_force()
    try:
        p = subprocess.run([sys.executable, "-m", "lab", "down"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert lab.leftovers() == []
    finally:
        forget_the_old_lab()
        lab.up(only=parts)
        # linkem's link is read back as a Link and put in force again; netem's qdiscs are text (a netem-shaped lab
        # comes back unshaped on the kernel path)
        if backend == "linkem" and isinstance(link, Link):
            shaper.apply(link, "linkem")
        else:
            shaper.apply(Link(), "netem")
    assert all(s.ready for s in lab.states(lab.wanted(lab.LAB_CONTAINERS, parts)))
    assert parts_up() == parts
    now = shaper.in_force()
    assert now[0] == backend and (backend != "linkem" or now[1] == link), (now, (backend, link))
