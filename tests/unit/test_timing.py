"""Issue 27, 5 (skips are counted): tests/timing.py, run on fake suites with pytester; and the lab's timing helpers
(on_quiet_host, still_in_force) skip for a busy host the way the plugin counts."""

from __future__ import annotations

import pytest

from tests import timing

pytest_plugins = ["pytester"]

CONFTEST = 'pytest_plugins = ["tests.timing"]\n'

# Four timing checks, marked three ways: the `timing` marker, a helper that records itself, a test that names a
# timing helper (marked at collection by mark_callers, as tests/lab/conftest.py does).
SUITE = """
import pytest
from tests import timing

def on_quiet(busy):
    timing.record()
    if busy:
        timing.skip_busy("the hypervisor took 40 % of the CPU")

@pytest.mark.timing
def test_marked():
    on_quiet({a})

def test_recorded_by_the_helper():
    on_quiet({b})

@pytest.mark.timing
def test_marked_too():
    on_quiet({c})

def test_named_in_a_lambda():
    (lambda: on_quiet({d}))()

def test_not_a_timing_check():
    pass

@pytest.mark.skip(reason="not a timing check, skipped")
def test_plain_skip():
    pass
"""

MARK_CALLERS = CONFTEST + """
from tests import timing

def pytest_collection_modifyitems(items):
    timing.mark_callers(items, ["on_quiet"])
"""


def suite(pytester: pytest.Pytester, *busy: bool) -> None:
    pytester.makeconftest(MARK_CALLERS)
    flags = dict(zip("abcd", busy, strict=True))
    pytester.makepyfile(test_fake=SUITE.format(**flags))


def summary(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("timing checks:")]


def test_half_skipped_for_a_busy_host_fails_naming_the_limit(pytester, monkeypatch):
    monkeypatch.delenv(timing.ENV_LIMIT, raising=False)
    suite(pytester, True, False, True, False)
    result = pytester.runpytest("-rs", "--strict-markers")
    result.assert_outcomes(passed=3, skipped=3)  # every test passed or skipped, and yet:
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert summary(result) == [
        "timing checks: 2 ran, 2 skipped for a busy host (limit: 25 %)",
        "timing checks: FAILED: 2 of 4 (50 %) were skipped for a busy host, over the limit of 25 % "
        "(QUICLAB_TIMING_SKIP_LIMIT): the timing was not checked; rerun on a quiet host (docs/benchmarks.md)"]
    # a skip for a busy host says so, apart from the other skips
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_fake.py:*: busy host: the hypervisor took 40 % of the CPU",
                                 "SKIPPED [[]1[]] test_fake.py:*: not a timing check, skipped"])


def test_none_skipped_passes_and_prints_the_counts(pytester, monkeypatch):
    monkeypatch.delenv(timing.ENV_LIMIT, raising=False)
    suite(pytester, False, False, False, False)
    result = pytester.runpytest("--strict-markers")
    result.assert_outcomes(passed=5, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    assert summary(result) == ["timing checks: 4 ran, 0 skipped for a busy host (limit: 25 %)"]
    # the closing lines: the counts come just before pytest's own last line
    assert result.outlines[-1].startswith("=") and "5 passed, 1 skipped" in result.outlines[-1]


def test_no_timing_check_is_silent(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_fake="def test_unit():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert "timing checks" not in result.stdout.str()


def test_the_limit_is_configurable(pytester, monkeypatch):
    suite(pytester, True, False, True, False)
    monkeypatch.setenv(timing.ENV_LIMIT, "50")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, "2 of 4 is not more than 50 %"
    assert summary(result) == ["timing checks: 2 ran, 2 skipped for a busy host (limit: 50 %)"]
    monkeypatch.setenv(timing.ENV_LIMIT, "0 %")
    suite(pytester, False, False, True, False)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert summary(result)[0] == "timing checks: 3 ran, 1 skipped for a busy host (limit: 0 %)"


@pytest.mark.parametrize("value", ["lots", "-5", "101"])
def test_a_bad_limit_is_a_usage_error(pytester, monkeypatch, value):
    suite(pytester, False, False, False, False)
    monkeypatch.setenv(timing.ENV_LIMIT, value)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{timing.ENV_LIMIT}=*{value}*: want a percentage from 0 to 100*"])


def test_other_skips_and_outcomes_are_told_apart(pytester, monkeypatch):
    """Skipped for another reason (no Docker engine, in a fixture before the helper): counted apart, not held to the
    limit. A failed or xfailed timing check ran. A plain pytest.skip whose reason says "busy host: " is one."""
    monkeypatch.delenv(timing.ENV_LIMIT, raising=False)
    pytester.makeconftest(MARK_CALLERS)
    pytester.makepyfile(test_fake="""
import pytest
from tests import timing

def on_quiet():
    timing.record()

@pytest.fixture
def lab():
    pytest.skip("needs a Docker engine")

def test_no_engine(lab):
    on_quiet()

def test_fails():
    on_quiet()
    assert False

@pytest.mark.xfail(reason="known")
def test_xfails():
    on_quiet()
    assert False

def test_plain_busy_skip():
    on_quiet()
    pytest.skip(timing.BUSY_PREFIX + "another user changed the link")

@pytest.mark.parametrize("n", range(3))
def test_passes(n):
    on_quiet()
""")
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, failed=1, skipped=2, xfailed=1)
    assert summary(result) == ["timing checks: 5 ran, 1 skipped for a busy host (limit: 25 %); 1 not run for other "
                               "reasons (skips are listed with their reasons)"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the failure, not the limit (1 of 6)


def test_the_limit_does_not_hide_a_failure_or_a_collect_only(pytester, monkeypatch):
    monkeypatch.delenv(timing.ENV_LIMIT, raising=False)
    suite(pytester, True, True, True, True)
    pytester.makepyfile(test_failing="def test_broken():\n    assert False\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and len(summary(result)) == 2
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK and summary(result) == []


def test_mark_callers_finds_the_helper_in_lambdas_and_inner_functions():
    class Item:
        def __init__(self, function):
            self.function, self.markers = function, []

        def get_closest_marker(self, name):
            return next((m for m in self.markers if m == name), None)

        def add_marker(self, name):
            self.markers.append(name)

    def on_quiet_host(): ...

    def direct():
        on_quiet_host()

    def in_lambda():
        return lambda: on_quiet_host()

    def nested():
        def measure():
            def deeper():
                on_quiet_host()
            return deeper
        return measure

    def unrelated():
        return 1

    items = [Item(f) for f in (direct, in_lambda, nested, unrelated)]
    assert timing.mark_callers(items, ["on_quiet_host", "still_in_force"]) == 3
    assert [i.markers for i in items] == [["timing"], ["timing"], ["timing"], []]


# --- the lab's helpers (tests/lab): a skip for a busy host is a BusyHost ---------------------------------------------

@pytest.fixture
def not_counted(monkeypatch):
    """The helpers mark the running test a timing check: not this one (it would be counted in this run's summary)."""
    monkeypatch.setattr(timing, "_running", [])


def test_on_quiet_host_skips_for_a_busy_host(monkeypatch, not_counted):
    from tests.lab import conftest as lab_conftest

    class Meter:
        disturbed, steal_pct = True, 40.0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(lab_conftest.host, "StealMeter", Meter)
    with pytest.raises(timing.BusyHost, match=r"^busy host: the hypervisor took 40, 40, 40 % of this host's CPU"):
        lab_conftest.on_quiet_host(lambda: 1, lambda r: True)
    Meter.disturbed = False
    assert lab_conftest.on_quiet_host(lambda: 1, lambda r: True) == [1]


def test_still_in_force_skips_for_a_busy_lab(monkeypatch, not_counted):
    from lab.link.model import Link
    from tests.lab import probes

    monkeypatch.setattr(probes.linkem, "current", lambda: Link())
    probes.still_in_force(Link())
    monkeypatch.setattr(probes.linkem, "current", lambda: None)
    with pytest.raises(timing.BusyHost, match=r"^busy host: another user of the lab changed the link"):
        probes.still_in_force(Link())
