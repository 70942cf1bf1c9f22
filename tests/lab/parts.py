"""Lab tests of an optional part of the lab (lab/optional.py) skip, naming the part and why, where it could not be
built; on a machine with every part built (this project's CI) they run."""

from __future__ import annotations

import pytest

from lab import optional


def require_part(part: str) -> None:
    why = optional.unavailable(part)
    if why:
        pytest.skip(f"the optional part '{part}' ({optional.ALL[part]}) is unavailable here: {why}")
