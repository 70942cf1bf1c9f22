"""The `quiclab` command's entry point (also `python -m lab`). Importing the CLI takes a moment; a Ctrl-C during
it ends with the same one line as anywhere else, never a traceback. Every exit after a Ctrl-C has status 130 (see
signals.exit_after_interrupt for why that takes more than sys.exit)."""

from __future__ import annotations

import sys


def run() -> None:
    from lab import signals  # (the standard library only: quick)

    signals.watch_interrupts()
    try:
        from lab.cli import main
    except BaseException as e:  # only a Ctrl-C (or an error it caused) is handled; the rest is raised again
        if not signals.caused_by_interrupt(e):
            raise
        signals.ignore_further_interrupts()  # a second Ctrl-C while exiting: still 130, see cli.main
        sys.stderr.write("error: interrupted\n")
        signals.exit_after_interrupt()
    code: str | int | None = 0
    try:
        main()
    except SystemExit as e:
        if e.code == 130:  # cli.main has said "interrupted" (and how to resume)
            signals.exit_after_interrupt()
        code = e.code
    signals.ignore_further_interrupts()  # the command has ended: its exit's clean-up is not cut short
    if signals.interrupted() and not isinstance(code, str):  # a Ctrl-C that something swallowed on the way: the
        signals.exit_after_interrupt(code or 0)  # command's own status, never -2 (signals.exit_after_interrupt)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    run()
