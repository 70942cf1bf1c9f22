"""Page objects on the servers' shared object volume: quiclab-page (images/server/page.sh) makes
/obj/page-N-BYTES/{0..N-1, index.html, SHA256SUMS} in the nginx container, which owns the volume; every server
serves them. The script is run from this checkout (bash -c), so a page can be made whatever server image runs."""

from __future__ import annotations

from lab import config, docker
from lab.errors import EnvironmentProblem

SCRIPT = config.ROOT / "images" / "server" / "page.sh"
_cache: dict[tuple[int, int], dict[str, str]] = {}


def path_for(n: int, size: int) -> str:
    """The page's folder on every server (ends in /)."""
    return f"/obj/page-{n}-{size}/"


def parse_sums(text: str) -> dict[str, str]:
    """`sha256sum` lines -> {name: hex}, in file order."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        digest, _, name = line.strip().partition("  ")
        if len(digest) == 64 and name:
            out[name] = digest
    return out


def ensure(n: int, size: int) -> dict[str, str]:
    """Make sure the page of `n` objects of `size` bytes exists; {object name: SHA-256} in order."""
    key = (n, size)
    if key not in _cache:
        try:
            out = docker.exec_in(config.SERVER_CONTAINER, ["bash", "-c", SCRIPT.read_text(), "quiclab-page",
                                                           str(n), str(size)], timeout_s=120 + n * size / 20e6)
        except docker.DockerError as e:
            raise EnvironmentProblem(f"could not make the page of {n} x {size} bytes on the server: "
                                     f"{e.reason()}") from None
        sums = parse_sums(out)
        if list(sums) != [str(i) for i in range(n)]:
            raise EnvironmentProblem(f"the server's page of {n} x {size} bytes has a malformed manifest")
        _cache[key] = sums
    return _cache[key]


def changed(n: int, size: int) -> str | None:
    """Whether the server's page is no longer the one this process verifies against: a reason, or None."""
    if (n, size) not in _cache:
        return None
    try:
        now = parse_sums(docker.exec_in(config.SERVER_CONTAINER,
                                        ["cat", f"/srv/www{path_for(n, size)}SHA256SUMS"]))
    except docker.DockerError as e:
        return f"cannot read the page's manifest on the server: {e.reason()}"
    if now != _cache[(n, size)]:
        del _cache[(n, size)]
        return f"the page of {n} x {size} bytes on the server changed under the sweep"
    return None
