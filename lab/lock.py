"""One measuring or shaping command per lab at a time: an advisory lock (flock) on a file named after the lab.

A sweep, `quiclab run` and `quiclab shape` take it for their whole duration; a second one refuses at once with a
line naming the holder (command, pid, start time). The kernel drops the lock when the holder exits, however it
exits (no stale locks after a crash or kill -9). Read-only commands (status, shape --show, report) take none.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from lab import config
from lab.errors import EnvironmentProblem


def lock_path() -> Path:
    """Shared by every checkout that drives this lab (the lab, not the checkout, is the resource)."""
    return Path(tempfile.gettempdir()) / f"{config.PROJECT}-lab.lock"


class LabBusy(EnvironmentProblem):
    """Another quiclab command holds the lab."""


def _holder(f: int) -> str:
    try:
        os.lseek(f, 0, os.SEEK_SET)
        doc = json.loads(os.read(f, 4096).decode() or "{}")
        return f"`{doc.get('command', '?')}` (pid {doc.get('pid', '?')}, since {doc.get('since', '?')})"
    except (OSError, ValueError):
        return "another quiclab command"


def holder() -> str | None:
    """Who holds this lab now (the holder's line), or None when it is free. A probe: takes and drops the lock."""
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def busy_message(who: str) -> str:
    return f"the lab is busy: {who} is using it; wait for it to finish or stop it (lock file {lock_path()})"


@contextlib.contextmanager
def holding(what: str | None = None) -> Iterator[None]:
    """Hold the lab for the block; LabBusy (one line, exit 2) if another command holds it."""
    path = lock_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabBusy(busy_message(_holder(fd))) from None
        doc = {"command": what or " ".join(["quiclab", *sys.argv[1:]]), "pid": os.getpid(),
               "since": dt.datetime.now().isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(doc).encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
