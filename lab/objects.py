"""Test objects: incompressible random bytes of a given size, made on demand by the nginx server container and
hashed there; they live in the shared `objects` volume, which the other servers serve read-only."""

from __future__ import annotations

from lab import config, docker
from lab.errors import EnvironmentProblem

_cache: dict[int, str] = {}


def path_for(size: int) -> str:
    """The object's path on every server (they all serve the same object volume)."""
    return f"/obj/{size}"


def url_for(size: int) -> str:
    """The object's URL on the nginx server."""
    return f"https://{config.SERVER_NAME}{path_for(size)}"


def ensure(size: int) -> str:
    """Make sure the server has an object of `size` bytes; return its SHA-256 (hex)."""
    if size not in _cache:
        try:
            digest = docker.exec_in(config.SERVER_CONTAINER, ["quiclab-object", str(size)]).strip()
        except docker.DockerError as e:
            raise EnvironmentProblem(f"could not prepare a {size}-byte object on the server: "
                                     f"{e.reason()}") from None
        if len(digest) != 64:
            raise EnvironmentProblem(f"the server returned a malformed SHA-256 for the {size}-byte object: {digest!r}")
        _cache[size] = digest
    return _cache[size]


def changed(size: int) -> str | None:
    """Whether the server's object of `size` bytes is no longer the one this process verifies against (e.g. the
    lab was taken down and up again with a new object volume): a reason, or None."""
    if size not in _cache:
        return None
    try:
        now = docker.exec_in(config.SERVER_CONTAINER, ["cat", f"/srv/www/obj/{size}.sha256"]).strip()
    except docker.DockerError as e:
        return f"cannot read the {size}-byte object's hash on the server: {e.reason()}"
    if now != _cache[size]:
        del _cache[size]
        return f"the {size}-byte object on the server changed under the sweep (its SHA-256 is now {now[:12]}…)"
    return None
