"""The error hierarchy. Every error quiclab expects carries one line for the user and an exit code."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class QuiclabError(Exception):
    """Something the user can act on: printed as one line, no traceback."""

    exit_code = 1


class UsageError(QuiclabError):
    """Bad input (a value, an option, a file): exit code 2."""

    exit_code = 2


class EnvironmentProblem(QuiclabError):
    """Docker not reachable, lab not up, port in use...: exit code 2 (fixable by the user before retrying)."""

    exit_code = 2


class EnvironmentFailure(QuiclabError):
    """The lab, not the transport, failed during a run: the run is not a result (retried, or the sweep stops)."""

    exit_code = 2


class VerificationError(QuiclabError):
    """A run measured something other than what was asked for (protocol, size, hash): exit code 1."""


def _shown(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _choices(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" -> "a, b, c"."""
    return expected.replace(" or ", ", ").replace("'", "")


def validation_line(e: ValidationError, noun: str = "field", fields: Iterable[str] = ()) -> str:
    """The first problem of a pydantic ValidationError as one line naming the field (as a dotted path), the value
    and what is allowed: "unknown field 'x': allowed are a, b", "missing field 'x'", "unknown role 'proxy':
    allowed are client, server", "field 'host': a server needs a host", "invalid field 'port' (got 70000): ...".
    `noun` names what the fields are ("field", "key", "link parameter"); `fields` are the known ones."""
    return error_line(e.errors()[0], noun, fields)


def error_line(err: ErrorDetails, noun: str = "field", fields: Iterable[str] = ()) -> str:
    """One problem of a pydantic ValidationError as one line (validation_line, for any of its errors)."""
    path = [x for x in err["loc"] if not isinstance(x, int)]
    in_list = any(isinstance(x, int) for x in err["loc"])
    loc = ".".join(str(x) for x in path)
    msg = one_line_text(str(err["msg"]).removeprefix("Value error, "))
    value = err.get("input")
    kind = err["type"]
    if kind == "missing":
        return f"missing {noun} {loc!r}"
    if kind == "extra_forbidden":
        return f"unknown {noun} {loc!r}: allowed are {', '.join(fields)}"
    if kind in ("literal_error", "enum") and "expected" in err.get("ctx", {}) and path:
        leaf = str(path[-1])
        what = f"{leaf.removesuffix('s')} {_shown(value)} in {loc}" if in_list else f"{leaf} {_shown(value)}"
        return f"unknown {what}: allowed are {_choices(str(err['ctx']['expected']))}"
    if kind == "value_error" and ":" in msg and not path:
        field, _, rest = msg.partition(":")
        return f"{noun} {field.strip()!r}: {rest.strip()}"
    shown = "" if isinstance(value, dict) else f" (got {_shown(value)})"
    return f"invalid {noun} {loc or 'value'!r}{shown}: {msg}"


def one_line_text(text: str) -> str:
    return " ".join(text.split())
