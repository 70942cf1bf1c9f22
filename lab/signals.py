"""Signal handling, in one place: Ctrl-C (SIGINT, unless ignored as under nohup) and SIGTERM stop a measurement
cleanly; a record being written is never cut in half; an exit after Ctrl-C stays exit status 130.

- `Stops`: while a sweep runs, each stop signal raises KeyboardInterrupt and is counted (the runner then knows a
  run was cut short even where something swallowed the exception);
- `held_signals` / `deferred_interrupt`: hold the signals over a block that must finish (a record's write, undoing
  a fault), then raise;
- `terminate_as_interrupt`: SIGTERM raises KeyboardInterrupt like Ctrl-C (parallel labs' workers and coordinator);
- `ignore_further_interrupts`: once the process is exiting with 130, a second Ctrl-C cannot turn it into -2;
- `exit_after_interrupt`: the one way a process ends after Ctrl-C (exit status 130, never -2);
- `watch_interrupts` / `interrupted`: whether a stop signal raised KeyboardInterrupt anywhere in this process, even
  one that something then swallowed (the entry point then ends through `exit_after_interrupt` with the command's
  own status: CPython 3.11 would otherwise end a process by SIGINT, exit status -2, after a Ctrl-C that passed
  through exec() of a string, however the command ended);
- `caused_by_interrupt`: whether an exception is a Ctrl-C, or wraps one (Python 3.11 wraps a Ctrl-C that lands in a
  class body's `__set_name__` in a RuntimeError)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, NoReturn


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_interrupted = False  # a stop signal has raised KeyboardInterrupt (or been held to raise it) in this process


def _note() -> None:
    global _interrupted
    _interrupted = True


def _interrupt() -> NoReturn:
    """What every stop-signal handler here does: note it, then raise KeyboardInterrupt as Python's own handler."""
    _note()
    raise KeyboardInterrupt


def watch_interrupts() -> None:
    """The entry point's first step: Ctrl-C raises KeyboardInterrupt as before, and is noted (`interrupted`). Not
    where SIGINT is ignored (nohup) or handled by someone else."""
    if _main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupt)


def interrupted() -> bool:
    """Whether a stop signal raised KeyboardInterrupt in this process (see `watch_interrupts`)."""
    return _interrupted


@contextlib.contextmanager
def held_signals() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT, unless ignored) and SIGTERM until the block is done; yields the list of those that
    arrived meanwhile. Outside the main thread (where signals cannot be handled) the block just runs."""
    caught: list[int] = []
    if not _main_thread():
        yield caught
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    def hold(signum: int, _frame: object) -> None:
        _note()
        caught.append(signum)

    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, hold)
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C until the block is done, then raise it: a record is never half written or written without
    being counted."""
    with held_signals() as caught:
        yield
    if caught:
        raise KeyboardInterrupt


class Stops:
    """Counts stop signals (SIGINT unless it is ignored, as under nohup; SIGTERM) while a sweep runs. Each one
    raises KeyboardInterrupt like Python's own handler, and the count tells the runner afterwards that a run was
    cut short even where something on the way swallowed the exception."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, _signum: int, _frame: object) -> None:
        self.count += 1
        _interrupt()

    def __enter__(self) -> Stops:
        if _main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                current = signal.getsignal(sig)
                if current is not signal.SIG_IGN:
                    self._previous[sig] = current
                    signal.signal(sig, self._handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def _raise_interrupt(_signum: int, _frame: object) -> None:
    _interrupt()


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt (a parallel sweep's worker: its coordinator stops it so)."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


@contextlib.contextmanager
def terminate_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block (the previous handler afterwards)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def ignore_further_interrupts() -> None:
    """From here on further Ctrl-Cs are ignored: the exit's own clean-up (agents closed, atexit) is short, and a
    second signal landing in it would otherwise end the process by SIGINT (exit status -2) instead of 130."""
    if _main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def exit_after_interrupt(code: int = 130) -> NoReturn:
    """End the process after a Ctrl-C with exit status CODE: further Ctrl-Cs ignored, the atexit handlers run (agents
    closed), stdout and stderr flushed, then os._exit. Not sys.exit: CPython 3.11 remembers a Ctrl-C that passed
    through exec() of a string (dataclasses and namedtuple build their methods so while a module imports) and then
    ends the process by SIGINT (exit status -2) whatever status sys.exit asked for."""
    ignore_further_interrupts()
    try:
        atexit._run_exitfuncs()  # (what interpreter shutdown would run; os._exit skips it)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether ERROR is a Ctrl-C (KeyboardInterrupt) or was raised by one on its way (its cause or context chain)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
