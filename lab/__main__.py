"""The `quiclab` command's entry point (also `python -m lab`). Importing the CLI takes a moment; a Ctrl-C during
it ends with the same one line as anywhere else, never a traceback."""

from __future__ import annotations

import signal
import sys


def run() -> None:
    try:
        from lab.cli import main
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while exiting: still 130, see cli.main
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
