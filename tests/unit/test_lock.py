"""One measuring or shaping command per lab at a time."""

import subprocess
import sys

import pytest

from lab import lock


@pytest.fixture
def lock_file(tmp_path, monkeypatch):
    path = tmp_path / "lab.lock"
    monkeypatch.setattr(lock, "lock_path", lambda: path)
    return path


def test_a_second_holder_is_refused_with_the_first_named(lock_file):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, pathlib\n"
         "from lab import lock\n"
         f"lock.lock_path = lambda: pathlib.Path({str(lock_file)!r})\n"
         "with lock.holding('quiclab sweep quick'):\n"
         "    print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "held"
        with pytest.raises(lock.LabBusy) as e, lock.holding("quiclab shape"):
            pass
        assert "quiclab sweep quick" in str(e.value) and f"pid {holder.pid}" in str(e.value)
        assert e.value.exit_code == 2
    finally:
        holder.kill()
        holder.wait()
    with lock.holding("quiclab shape"):  # the kernel released the dead holder's lock
        pass


def test_the_lock_is_released_after_the_block_even_on_error(lock_file):
    with pytest.raises(RuntimeError), lock.holding("a"):
        raise RuntimeError
    with lock.holding("b"):
        pass
