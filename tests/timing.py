"""Skips are counted (issue 27, 5): a pytest plugin that counts the timing checks.

A lab test that checks timing (the emulator's delay, rate, jitter) runs on a quiet host only: its helpers
(`on_quiet_host` in tests/lab/conftest.py, `still_in_force` in tests/lab/probes.py) skip it when the hypervisor
took the CPU or another user changed the link meanwhile. A busy CI host could so pass with every timing check
unrun. This plugin counts them and says so in the suite's closing lines:

    timing checks: 14 ran, 2 skipped for a busy host (limit: 25 %)

and fails the session (exit status 1) when more than the limit of them were skipped for a busy host. The limit is
QUICLAB_TIMING_SKIP_LIMIT (a percentage, default 25) of the timing checks that either ran (passed, failed, xfailed)
or were skipped for a busy host; checks skipped for another reason (no Docker engine, a missing image) are listed
apart and not held to it. A run without timing checks (e.g. the unit tests alone) prints nothing.

A timing check is a test marked `timing`: tests/lab/conftest.py marks every test that calls a timing helper at
collection (`mark_callers`), and a helper also marks the test running it (`record`), whoever calls it. A skip for a
busy host is a `BusyHost` (`skip_busy`), a pytest skip whose reason begins with "busy host: ".
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterable, Iterator
from typing import NoReturn

import pytest

MARK = "timing"
ENV_LIMIT = "QUICLAB_TIMING_SKIP_LIMIT"
DEFAULT_LIMIT_PCT = 25.0
BUSY_PREFIX = "busy host: "

RAN, BUSY, OTHER = "ran", "busy", "other"


class BusyHost(pytest.skip.Exception):
    """A timing check skipped because the host (or the shared lab) was too busy for it to mean anything."""


def skip_busy(reason: str) -> NoReturn:
    """Skip the running test for a busy host: counted against QUICLAB_TIMING_SKIP_LIMIT."""
    record()
    raise BusyHost(BUSY_PREFIX + reason)


def is_busy_skip(reason: str) -> bool:
    return reason.startswith(BUSY_PREFIX)


_running: list[pytest.Item] = []  # the test items running now, innermost last (pytester nests sessions)


def record() -> None:
    """Mark the running test as a timing check (a timing helper calls this): counted even where nothing marked it."""
    if _running and not _running[-1].get_closest_marker(MARK):
        _running[-1].add_marker(MARK)


def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names  # globals: a helper imported into the test module
    yield from code.co_freevars  # a helper from an enclosing function
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # lambdas and functions defined in the test
            yield from _code_names(const)


def mark_callers(items: Iterable[pytest.Item], helpers: Iterable[str]) -> int:
    """Mark `timing` each test whose function (its lambdas and inner functions included) names one of `helpers`;
    returns how many were marked."""
    wanted, n = set(helpers), 0
    for item in items:
        fn = getattr(item, "function", None)
        code = getattr(fn, "__code__", None)
        if code is not None and wanted & set(_code_names(code)):
            if not item.get_closest_marker(MARK):
                item.add_marker(MARK)
            n += 1
    return n


def limit_pct() -> float:
    raw = os.environ.get(ENV_LIMIT, "").strip().removesuffix("%").strip()
    if not raw:
        return DEFAULT_LIMIT_PCT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise pytest.UsageError(f"{ENV_LIMIT}={os.environ[ENV_LIMIT]!r}: want a percentage from 0 to 100")
    return value


class Counter:
    """Each timing check's outcome (ran, skipped for a busy host, skipped otherwise), by node id."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.outcome: dict[str, str] = {}

    def counts(self) -> tuple[int, int, int]:
        values = list(self.outcome.values())
        return values.count(RAN), values.count(BUSY), values.count(OTHER)

    def over_limit(self) -> bool:
        ran, busy, _ = self.counts()
        return busy > 0 and busy * 100 > self.limit * (ran + busy)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        _running.append(item)
        try:
            return (yield)
        finally:
            _running.remove(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
        report = yield
        if item.get_closest_marker(MARK) is None or report.when == "teardown":
            return report
        if report.skipped and not hasattr(report, "wasxfail"):
            busy = call.excinfo is not None and call.excinfo.errisinstance(BusyHost)
            reason = str(call.excinfo.value.msg) if busy and call.excinfo is not None else ""
            if busy:  # listed (-rs) at the test that skipped, not at the helper that raised, with its reason alone
                path, lineno, _ = item.reportinfo()
                report.longrepr = (os.fspath(path), (lineno or 0) + 1, reason)
            elif isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.outcome[item.nodeid] = BUSY if busy or is_busy_skip(reason) else OTHER
        elif report.when == "call":
            self.outcome[item.nodeid] = RAN  # passed, failed or xfailed: it ran
        elif report.failed:
            self.outcome[item.nodeid] = OTHER  # an error in its set-up: not run (and the session fails)
        return report

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:  # collected but not run (-x, an interrupt) shows as "other"
            if item.get_closest_marker(MARK):
                self.outcome.setdefault(item.nodeid, OTHER)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if session.exitstatus == pytest.ExitCode.OK and self.over_limit():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if not self.outcome or config.option.collectonly:
            return
        ran, busy, other = self.counts()
        line = f"timing checks: {ran} ran, {busy} skipped for a busy host (limit: {self.limit:g} %)"
        if other:
            line += f"; {other} not run for other reasons (skips are listed with their reasons)"
        terminalreporter.write_sep("-", "timing checks")
        terminalreporter.write_line(line)
        if self.over_limit():
            terminalreporter.write_line(
                f"timing checks: FAILED: {busy} of {ran + busy} ({busy * 100 / (ran + busy):.0f} %) were skipped for a "
                f"busy host, over the limit of {self.limit:g} % ({ENV_LIMIT}): the timing was not checked; rerun on a "
                f"quiet host (docs/benchmarks.md)", red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: a timing check; skipped on a busy host, counted (tests/timing.py)")
    config.pluginmanager.register(Counter(limit_pct()), "quiclab-timing-counter")
