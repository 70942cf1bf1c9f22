"""Optional parts of the lab: images that may not build on every machine on every day, and that the default job
does not need. Each is a compose profile (docker-compose.yml `profiles:`):

  sid      Debian unstable's nginx and curl (images FROM the unstable base; unstable moves every few weeks, and
           its mirror may be unreachable)
  browser  headless chromium (a large package set from trixie)

and, built only on first use (ON_DEMAND: `quiclab build` and the set-up leave them alone, so their build time never
adds to the default set-up; `quiclab build --parts NAME` builds one ahead):

  haproxy  HAProxy 3.0 from trixie (HTTP/3 on its own QUIC stack)
  aioquic  aioquic 1.7.2 (PyPI): an HTTP/3 file server and a download client on aioquic's own H3 layer
  quicgo   quic-go v0.65 (Go module proxy, Go 1.26): its http3 server and client
  quinn    quinn 0.11 + h3 (crates.io; images/rust): an HTTP/3 file server and a download client
  quiche   quiche 0.30 (crates.io, BoringSSL vendored; images/rust): an HTTP/3 file server and a download client
  kwik     kwik 0.10.9 + flupke 0.9.4 (Maven Central, Java; images/kwik): an HTTP/3 file server and a download client

A part is *available* when every image of its services is here. An on-demand part that a run or sweep asks for
is built then (`lab.ensure_available`; cached afterwards, for every lab on the host: images are shared) and its
containers are started in that lab; `quiclab up` starts it only when asked (`--parts`), so labs that are up never
miss containers of a part somebody else built. Building it is tried by `quiclab build` / `up
--build` (so by the set-up); when that fails the lab comes up without it, the reason is kept in the cache dir
(one line: the image's own capability check, apt's error, the missing base image), and a run that asks for one of
its implementations is refused with "unavailable: <why>" (exit 2) instead of failing later. A part whose rebuild
fails while its older image is still here stays available (the manifest records the version that ran).

The available profiles are written to .env as COMPOSE_PROFILES, so a plain `docker compose up -d` starts the same
lab as `quiclab up`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dotenv import set_key, unset_key

from lab import compose, config, docker
from lab.errors import UsageError

#: The optional parts, in the order they are built, with what each brings.
PARTS: dict[str, str] = {
    "sid": "nginx and curl from Debian unstable",
    "browser": "headless chromium",
}
#: The optional parts built only when first used (never by `quiclab build` without --parts, nor by the set-up).
ON_DEMAND: dict[str, str] = {
    "haproxy": "HAProxy 3.0 from Debian trixie (HTTP/3 on HAProxy's own QUIC stack)",
    "aioquic": "aioquic 1.7.2 HTTP/3 server and client",
    "quicgo": "quic-go v0.65 HTTP/3 server and client",
    "quinn": "quinn 0.11 (h3, h3-quinn, rustls) HTTP/3 server and client",
    "quiche": "quiche 0.30 HTTP/3 server and client (its own h3 module, BoringSSL)",
    "kwik": "kwik 0.10.9 (QUIC, Java) with flupke 0.9.4 (HTTP/3) server and client",
}
#: Every optional part: those built by default first, then the on-demand ones.
ALL: dict[str, str] = {**PARTS, **ON_DEMAND}
ENV_PROFILES = "COMPOSE_PROFILES"


@dataclass(frozen=True)
class Part:
    name: str
    what: str
    services: tuple[str, ...]  # every compose service of the profile (long-running and one-shot)
    built: tuple[str, ...]  # the services with a `build:` section (their images are the part's own)
    images: tuple[str, ...]  # the images of `built`, with this lab's tag
    containers: tuple[str, ...]  # the containers of this lab that run as long as the lab (have a container_name)

    @property
    def one_shots(self) -> tuple[str, ...]:
        return tuple(s for s in self.services if config.INSTANCE.container(s) not in self.containers)


def _image(ref: str, tag: str) -> str:
    return re.sub(r"\$\{QUICLAB_TAG:-[^}]*\}", tag, ref)


@cache
def parts(compose_file: Path = config.COMPOSE_FILE) -> dict[str, Part]:
    """Every optional part as docker-compose.yml defines it (the compose file is the one list of its services)."""
    services = compose.services(compose_file)
    tag = config.setting(config.ENV_TAG, "dev")
    out = {}
    for name, what in ALL.items():
        mine = {s: v for s, v in services.items() if name in (v.get("profiles") or [])}
        built = tuple(s for s, v in mine.items() if "build" in v)
        out[name] = Part(
            name=name, what=what, services=tuple(mine), built=built,
            images=tuple(_image(mine[s]["image"], tag) for s in built),
            containers=tuple(config.INSTANCE.container(s) for s, v in mine.items() if "container_name" in v))
    return out


@cache
def required_built(compose_file: Path = config.COMPOSE_FILE) -> tuple[str, ...]:
    """The services outside every profile that have a `build:` section: the lab's required images."""
    return tuple(s for s, v in compose.services(compose_file).items() if "build" in v and not v.get("profiles"))


def _reason_file(part: str) -> Path:
    return config.cache_dir() / "optional" / f"{part}-{config.setting(config.ENV_TAG, 'dev')}.txt"


def record_failure(part: str, why: str) -> None:
    path = _reason_file(part)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(why.strip() + "\n")


def record_success(part: str) -> None:
    _reason_file(part).unlink(missing_ok=True)


def last_failure(part: str) -> str:
    try:
        return _reason_file(part).read_text().strip()
    except OSError:
        return ""


@cache
def _present_images() -> frozenset[str]:
    return docker.image_tags("quiclab/*")


def forget() -> None:
    """After a build: what is here may have changed."""
    _present_images.cache_clear()


def unavailable(part: str) -> str:
    """Why `part` is unavailable ("" when it is available): its images are not here."""
    p = parts()[part]
    missing = [i for i in p.images if i not in _present_images()]
    if not missing:
        return ""
    return last_failure(part) or f"image {missing[0]} is not built (run `quiclab build`)"


def available_profiles(only: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The available parts among `only` (None: the parts built by default; on-demand parts start only when asked)."""
    names = PARTS if only is None else [p for p in ALL if p in only]
    return tuple(p for p in names if not unavailable(p))


def unavailable_containers() -> frozenset[str]:
    return frozenset(c for name, p in parts().items() if unavailable(name) for c in p.containers)


def part_of(container: str) -> str | None:
    return next((name for name, p in parts().items() if container in p.containers), None)


def require(implementation: str, container: str) -> None:
    """Refuse (exit 2) a run or sweep that needs an implementation whose optional part is unavailable."""
    part = part_of(container)
    if part is None:
        return
    why = unavailable(part)
    if why:
        raise UsageError(f"{implementation} is unavailable: {why} (optional part '{part}': {ALL[part]}; the rest "
                         f"of the lab works without it)")


def parse_parts(text: str) -> tuple[str, ...]:
    """`--parts sid,browser`, `none` or `all` (every part, on-demand ones too); an unknown part is one line naming
    it (exit 2)."""
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if names == ("none",):
        return ()
    if names == ("all",):
        return tuple(ALL)
    bad = [n for n in names if n not in ALL]
    if bad or not names:
        raise UsageError(f"invalid --parts {text!r}: allowed is a comma list of {', '.join(ALL)}, or all, or none")
    return names


def needed(containers: Iterable[str]) -> tuple[str, ...]:
    """The optional parts these containers belong to (what a plan's implementations need started)."""
    found = {part_of(c) for c in containers}
    return tuple(p for p in ALL if p in found)


def write_profiles() -> None:
    """COMPOSE_PROFILES in .env: the available parts, so plain `docker compose up -d` starts what quiclab does."""
    profiles = ",".join(available_profiles())
    if profiles:
        if config.setting(ENV_PROFILES, "") != profiles:
            set_key(config.ENV_FILE, ENV_PROFILES, profiles, quote_mode="never")
    elif config.ENV_FILE.exists():
        unset_key(config.ENV_FILE, ENV_PROFILES, quote_mode="never")


#: Lines of a failed build that say why, most telling first: the images' own capability checks, apt, the base.
_WHY = (re.compile(r"quiclab-capability: (.*)"), re.compile(r"(E: .*)"),
        re.compile(r"((?:pull access denied|manifest unknown|not found)[^\n]*)", re.I),
        re.compile(r"(failed to solve[^\n]*)", re.I), re.compile(r"(ERROR[^\n]*)"))


_BASE = re.compile(r"/v2/(?:library/)?([^\s\"]+)/manifests/([^\s\"]+)\"")


def build_failure_line(output: str, exit_code: int) -> str:
    """One line saying why a build failed, from its output."""
    lines = output.splitlines()
    base = _BASE.search(output)
    if base:  # the FROM image is neither here nor pullable (e.g. no unstable base was made: no registry, no mirror)
        return f"its base image {base.group(1)}:{base.group(2)} is not here and cannot be pulled"
    for pattern in _WHY:
        for line in reversed(lines):
            m = pattern.search(line)
            if m:
                return " ".join(m.group(1).split())[:240]
    return f"the image build failed (exit {exit_code})"
