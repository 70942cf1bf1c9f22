"""The error hierarchy. Every error quiclab expects carries one line for the user and an exit code."""

from __future__ import annotations


class QuiclabError(Exception):
    """Something the user can act on: printed as one line, no traceback."""

    exit_code = 1


class UsageError(QuiclabError):
    """Bad input (a value, an option, a file): exit code 2."""

    exit_code = 2


class EnvironmentProblem(QuiclabError):
    """Docker not reachable, lab not up, port in use...: exit code 2 (fixable by the user before retrying)."""

    exit_code = 2


class VerificationError(QuiclabError):
    """A run measured something other than what was asked for (protocol, size, hash): exit code 1."""
