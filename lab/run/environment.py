"""What a sweep records about its environment: versions, congestion control, host, git commit, and a shaper
self-check (measured RTT and rate against the configured link)."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lab import __version__, config, docker, lab, optional
from lab.endpoints.registry import Registry, registry
from lab.link import router, shaper
from lab.link.model import Link
from lab.protocols import Protocol
from lab.quantiles import median


def quic_cc(reg: Registry | None = None) -> dict[str, str]:
    """The QUIC congestion control of the lab's own client and server, as the registry states it: the first
    registered client in the client container and the first server in the server container (curl and nginx; the
    manifest's `congestion_control` keeps these two keys for older readers, `implementations` has every one)."""
    reg = reg or registry()
    out = {}
    for role, container in (("client", config.CLIENT_CONTAINER), ("server", config.SERVER_CONTAINER)):
        impl = next((i for i in reg.implementations.values() if i.role == role and i.container == container), None)
        out[role] = impl.quic_cc.describe() if impl is not None and impl.quic_cc is not None else "none"
    return out


def _exec(container: str, *cmd: str) -> str:
    try:
        return docker.exec_in(container, ["sh", "-c", " ".join(cmd) + " 2>&1"]).strip()
    except docker.DockerError as e:
        return f"unknown ({e.reason(80)})"


def versions() -> dict[str, str]:
    """Every implementation's version (the registry's version command in its container: its first line), the
    OpenSSL of each endpoint container that has one, the router's tools and the host's. An implementation of an
    optional part that is unavailable here says so ("unavailable: <why>")."""
    out = {"quiclab": __version__}
    reg = registry()
    skip = optional.unavailable_containers()
    # an on-demand part built here but not started in this lab (lab.ensure_available starts it for the runs that
    # need it): nothing to ask
    idle = {s.name for s in lab.states(tuple(c for p in optional.ON_DEMAND for c in optional.parts()[p].containers
                                             if c not in skip)) if s.state != "running"}
    asks: dict[str, tuple[str, str]] = {}  # key -> (container, command); asked side by side (each a docker exec)
    for name, impl in reg.implementations.items():
        if impl.container in skip:
            out[name] = f"unavailable: {optional.unavailable(optional.part_of(impl.container) or '')}"
            continue
        if impl.container in idle:
            out[name] = "not started in this lab (built on first use; started by the runs that need it)"
            continue
        asks[name] = (impl.container, impl.version)
        asks[f"openssl ({config.INSTANCE.service(impl.container)})"] = (impl.container, "openssl version")
    asks["linkem"] = (config.ROUTER_CONTAINER, "linkem --version")
    asks["iproute2"] = (config.ROUTER_CONTAINER, "tc -V")
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = dict(zip(asks, pool.map(lambda ask: _exec(*ask), asks.values()), strict=True))
    for key, text in answers.items():
        first = text.splitlines()[0] if text.strip() else "unknown"
        if key.startswith("openssl (") and not first.startswith("OpenSSL"):
            continue  # no OpenSSL in that container
        out[key] = first
    out.update({"kernel": platform.release(), "docker": docker.server_version() or "unknown",
                "python": platform.python_version()})
    return out


def tcp_cc(container: str) -> str:
    """The kernel's TCP congestion control in the container's network namespace (a per-namespace sysctl)."""
    return _exec(container, "cat", "/proc/sys/net/ipv4/tcp_congestion_control")


def congestion_control() -> dict[str, str]:
    quic = quic_cc()
    return {"tcp client": tcp_cc(config.CLIENT_CONTAINER), "tcp server": tcp_cc(config.SERVER_CONTAINER),
            "quic client": quic["client"], "quic server": quic["server"]}


def implementations(names: list[str], chosen: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Per implementation in a sweep: role, protocols, container, version string (the registry's version command
    run in its container) and congestion control (TCP: the kernel's in that container; QUIC: the stack's, from
    the registry: the scenario's choice where it can be chosen, else the default; with the options)."""
    reg = registry()
    tcp: dict[str, str] = {}
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(names):
        impl = reg.implementations[name]
        if impl.container not in tcp:
            tcp[impl.container] = tcp_cc(impl.container)
        version = _exec(impl.container, impl.version).splitlines()
        out[name] = {
            "role": impl.role, "protocols": sorted(p.value for p in impl.protocols), "container": impl.container,
            "version": version[0] if version else "unknown",
            "cc": {"tcp": tcp[impl.container] if impl.protocols - {Protocol.H3} else None,
                   "quic": impl.quic_cc.describe((chosen or {}).get(name)) if impl.quic_cc else None},
            "quic_cc_options": list(impl.quic_cc.options) if impl.quic_cc else [],
        }
        if impl.role == "server":
            out[name]["url"] = impl.url("/")
    return out


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys", *name.split(".")).read_text())
    except (OSError, ValueError):
        return None


#: Host-wide (not per network namespace) UDP buffer sizes: QUIC endpoints' socket buffers depend on them.
UDP_BUFFER_SYSCTLS = ("net.core.rmem_default", "net.core.rmem_max", "net.core.wmem_default", "net.core.wmem_max")


#: What scripts/setup.sh sets (docs/link.md, "What the host must provide").
UDP_BUFFER_MINIMUM = {"net.core.rmem_default": 8 << 20, "net.core.rmem_max": 16 << 20, "net.core.wmem_max": 16 << 20}


def udp_buffer_problems() -> list[str]:
    """One line per host UDP buffer setting below what QUIC at lab rates needs (empty when all are fine)."""
    out = []
    for name, want in UDP_BUFFER_MINIMUM.items():
        have = _sysctl(name)
        if have is not None and have < want:
            out.append(f"{name} is {have} (< {want}): QUIC endpoints may drop datagrams in their own sockets or be "
                       f"capped; as root: sysctl -w {name}={want} (scripts/setup.sh does it)")
    return out


def host() -> dict[str, Any]:
    """Where the sweep ran; `slow`: QUICLAB_SLOW, more than 1 on an emulated machine (scripts/vm.sh's guest under
    TCG), whose timings are not a real host's."""
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "sysctls": {k: _sysctl(k) for k in UDP_BUFFER_SYSCTLS}, "slow": config.slow_factor()}


#: What a sweep's folder keeps of uncommitted source changes (beside manifest.json; results/ is not source).
SOURCE_DIFF = "source.diff"
#: Paths whose uncommitted changes do not make a tree "dirty": measurements, not code.
NOT_SOURCE = ("results",)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=config.ROOT, capture_output=True, text=True,
                              timeout=config.deadline(30)).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def source_changes() -> list[str]:
    """`git status --porcelain` lines of uncommitted changes to the project's source (anything but results/)."""
    excludes = [f":(exclude){p}" for p in NOT_SOURCE]
    return [line for line in _git("status", "--porcelain", "--", ".", *excludes).splitlines() if line.strip()]


def source_diff() -> str:
    """The full uncommitted change of the source against HEAD: tracked files' diff plus every untracked file
    (not ignored) as a new-file diff, so the tree a folder was made from can be rebuilt from its commit."""
    excludes = [f":(exclude){p}" for p in NOT_SOURCE]
    out = [_git("diff", "--binary", "HEAD", "--", ".", *excludes)]
    for path in _git("ls-files", "--others", "--exclude-standard", "-z", "--", ".", *excludes).split("\0"):
        if path:
            out.append(_git("diff", "--binary", "--no-index", "/dev/null", path))
    return "".join(out)


#: Set by scripts/vm.sh's guest job when the project there is `git archive` of this commit (run --head): a tree
#: without a repository whose every file is that commit's, so what it measures can be published.
ENV_ARCHIVED_COMMIT = "QUICLAB_ARCHIVED_COMMIT"


def git(folder: Path | None = None, diff_name: str = SOURCE_DIFF) -> dict[str, Any]:
    """The project's commit, and whether its source had uncommitted changes; with `folder`, a dirty tree's whole
    diff is kept there as source.diff (named in the result with its SHA-256) so no folder is from unknown code."""
    commit = _git("rev-parse", "HEAD").strip()
    archived = os.environ.get(ENV_ARCHIVED_COMMIT, "").strip()
    if not commit and re.fullmatch(r"[0-9a-f]{40}", archived) and not (config.ROOT / ".git").exists():
        # no repository here: the project is `git archive` of that commit (scripts/vm.sh run --head), as committed
        return {"commit": archived, "dirty": False, "tree": "git archive (scripts/vm.sh --head)"}
    dirty = bool(source_changes())
    out: dict[str, Any] = {"commit": commit or "unknown", "dirty": dirty}
    if dirty and folder is not None:
        diff = source_diff()
        (folder / diff_name).write_text(diff)
        out["diff"] = diff_name
        out["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    return out


def images(names: list[str]) -> dict[str, dict[str, str]]:
    """The image of every container a sweep uses on this lab (the router and the implementations' containers):
    per container the image ID it runs and the name it was created from, read from Docker now (never cached)."""
    reg = registry()
    found = container_images([config.ROUTER_CONTAINER,
                              *dict.fromkeys(reg.implementations[n].container for n in names)])
    return {config.INSTANCE.service(name): image for name, image in found.items()}


def container_images(containers: list[str]) -> dict[str, dict[str, str]]:
    """Per container (by its name, e.g. `quiclab-7-client`): the image ID it runs and the name it was created from,
    read from Docker now; "unknown" with the reason when it cannot be inspected."""
    out: dict[str, dict[str, str]] = {}
    for name in dict.fromkeys(containers):
        try:
            c = docker.inspect_one(name)
        except docker.DockerError as e:
            why = e.reason(120)
            out[name] = {"id": "unknown", "name": "", "error": why}
            continue
        out[name] = {"id": c.image, "name": c.config_image}
    return out


def self_check(link: Link, backend: str) -> dict[str, Any]:
    """Measure the link a sweep's first point configures: ping RTT, and TCP goodput if a rate is set."""
    shaper.apply(link, backend)
    result: dict[str, Any] = {}
    try:
        out = docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", "10", "-i", "0.05", "-W", "3",
                                                        config.SERVER_IP])
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
        if rtts:
            result["rtt"] = {"configured_ms": round(link.rtt_s * 1000, 3),
                             "measured_median_ms": round(median(rtts), 3), "samples": len(rtts)}
    except docker.DockerError:
        result["rtt"] = {"error": "ping failed (loss on the link can make this fail)"}
    rate = link.downlink.effective_rate_bps
    if rate and link.downlink.loss.mean == 0:
        try:
            out = docker.exec_in(config.CLIENT_CONTAINER, ["iperf3", "-c", config.SERVER_IP, "-R", "-t", "3", "-f",
                                                            "m", "--connect-timeout", "3000"])
            m = re.findall(r"([\d.]+) Mbits/sec.*receiver", out)
            if m:
                result["rate"] = {"configured_mbit": round(rate / 1e6, 3), "tcp_goodput_mbit": float(m[-1]),
                                  "goodput/configured": round(float(m[-1]) / (rate / 1e6), 3)}
        except docker.DockerError:
            result["rate"] = {"error": "iperf3 failed"}
    result["interfaces"] = vars(router.interfaces())
    return result
