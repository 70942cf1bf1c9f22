"""Host firewall allowance for the lab's internal bridges.

With br_netfilter loaded (bridge-nf-call-iptables=1, the usual case on Docker hosts), frames bridged inside an
`internal: true` network pass the host's iptables FORWARD chain, where Docker's isolation rules drop every
packet whose destination is outside that network's subnet. The client's packets to the server (via the router's
MAC on the client network) are such packets. One rule per lab bridge in DOCKER-USER accepts traffic that enters
and leaves the same lab bridge, which never leaves the lab network, so isolation from everything else is kept.

The compose service `hostnet` (images/hostnet/hostnet.sh: host network, NET_ADMIN and NET_RAW only) adds these
rules when the lab starts and removes them when it stops, so a plain `docker compose up -d` passes traffic and
`docker compose down` leaves no rule. `quiclab up` checks them too (and adds any that is missing, as before), and
`quiclab down` removes whatever the service could not (a killed container): `remove_bridge_rules`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from lab import config
from lab.errors import EnvironmentProblem

COMMENT = "quiclab lab bridge"
LAB_BRIDGES = (config.INSTANCE.bridge("client"), config.INSTANCE.bridge("server"))
_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def rule_args(bridge: str) -> list[str]:
    return ["DOCKER-USER", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", COMMENT, "-j", "ACCEPT"]


def needed() -> bool:
    return _SYSCTL.exists() and _SYSCTL.read_text().strip() == "1"


def _iptables() -> str | None:
    return shutil.which("iptables")


def _present(iptables: str, bridge: str) -> bool:
    return subprocess.run([iptables, "-w", "5", "-C", *rule_args(bridge)], capture_output=True).returncode == 0


def ensure_bridge_rules(bridges: tuple[str, ...] = LAB_BRIDGES) -> None:
    if not needed():
        return
    iptables = _iptables()
    missing = [b for b in bridges if iptables is None or not _present(iptables, b)]
    if not missing:
        return
    if iptables is None or os.geteuid() != 0:
        cmds = "; ".join(f"iptables -I {' '.join(rule_args(b))}" for b in missing)
        raise EnvironmentProblem(f"the host firewall drops traffic routed inside the lab networks: as root run {cmds}")
    for b in missing:
        r = subprocess.run([iptables, "-w", "5", "-I", *rule_args(b)], capture_output=True, text=True)
        if r.returncode != 0:
            raise EnvironmentProblem(f"could not add the lab bridge rule for {b}: {r.stderr.strip()}")


def lab_rules(bridges: tuple[str, ...] = LAB_BRIDGES) -> list[str]:
    """quiclab's DOCKER-USER rules (as `iptables -S` prints them: its comment, one of these bridges); empty where
    the host has no iptables or no DOCKER-USER chain."""
    iptables = _iptables()
    if iptables is None:
        return []
    r = subprocess.run([iptables, "-w", "5", "-S", "DOCKER-USER"], capture_output=True, text=True)
    if r.returncode != 0:
        return []
    return [line for line in r.stdout.splitlines()
            if COMMENT in shlex.split(line) and any(_names(line, b) for b in bridges)]


def _names(rule: str, bridge: str) -> bool:
    words = shlex.split(rule)
    return any(words[i] in ("-i", "-o") and words[i + 1] == bridge for i in range(len(words) - 1))


def remove_bridge_rules(bridges: tuple[str, ...] = LAB_BRIDGES) -> None:
    """Delete every rule quiclab put in DOCKER-USER for these bridges (its comment, this lab's bridge names: another
    lab's bridges have other names, and a rule of the host's own is left alone). Nothing to do where there is none;
    one line naming the rules when it cannot be done."""
    iptables = _iptables()
    left = lab_rules(bridges)
    if not left or iptables is None:
        return
    if os.geteuid() != 0:
        raise EnvironmentProblem(f"the host firewall still holds the lab's rules ({'; '.join(left)}): as root run "
                                 f"iptables -D for each")
    for rule in left:
        args = shlex.split(rule)  # `iptables -S` quotes the comment as a shell would
        if args[:1] != ["-A"]:
            continue
        r = subprocess.run([iptables, "-w", "5", "-D", *args[1:]], capture_output=True, text=True)
        if r.returncode != 0:
            raise EnvironmentProblem(f"could not remove the lab rule `{rule}`: {r.stderr.strip()}")
