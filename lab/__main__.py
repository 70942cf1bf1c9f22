"""The `quiclab` command's entry point (also `python -m lab`). Importing the CLI takes a moment; a Ctrl-C during
it ends with the same one line as anywhere else, never a traceback."""

from __future__ import annotations

import sys


def run() -> None:
    from lab import signals  # (the standard library only: quick)

    try:
        from lab.cli import main
    except KeyboardInterrupt:
        signals.ignore_further_interrupts()  # a second Ctrl-C while exiting: still 130, see cli.main
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
