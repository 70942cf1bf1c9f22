"""Host firewall allowance for the lab's internal bridges.

With br_netfilter loaded (bridge-nf-call-iptables=1, the usual case on Docker hosts), frames bridged inside an
`internal: true` network pass the host's iptables FORWARD chain, where Docker's isolation rules drop every
packet whose destination is outside that network's subnet. The client's packets to the server (via the router's
MAC on the client network) are such packets. One rule per lab bridge in DOCKER-USER accepts traffic that enters
and leaves the same lab bridge, which never leaves the lab network, so isolation from everything else is kept.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lab.errors import EnvironmentProblem

LAB_BRIDGES = ("ql-client", "ql-server")
_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def rule_args(bridge: str) -> list[str]:
    return ["DOCKER-USER", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", "quiclab lab bridge",
            "-j", "ACCEPT"]


def needed() -> bool:
    return _SYSCTL.exists() and _SYSCTL.read_text().strip() == "1"


def ensure_bridge_rules() -> None:
    if not needed():
        return
    iptables = shutil.which("iptables")
    missing = [b for b in LAB_BRIDGES
               if iptables is None or subprocess.run([iptables, "-C", *rule_args(b)],
                                                     capture_output=True).returncode != 0]
    if not missing:
        return
    if iptables is None or os.geteuid() != 0:
        cmds = "; ".join(f"iptables -I {' '.join(rule_args(b))}" for b in missing)
        raise EnvironmentProblem(f"the host firewall drops traffic routed inside the lab networks: as root run {cmds}")
    for b in missing:
        r = subprocess.run([iptables, "-I", *rule_args(b)], capture_output=True, text=True)
        if r.returncode != 0:
            raise EnvironmentProblem(f"could not add the lab bridge rule for {b}: {r.stderr.strip()}")
