"""tshark in the router over one of a run's captures: the one place that copies the pcap (and its TLS key log,
to decrypt TLS and QUIC) into the router, runs Debian's tshark there and removes the copies. Used by the
explanation (lab/explain), the workloads' session check (lab/workloads/sessions.py) and the path-change check
(lab/adverse/path.py)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from pathlib import Path

from lab import config, docker
from lab.errors import EnvironmentProblem

#: how long tshark may take over one run's capture (a 10 MB transfer's capture decodes in seconds here)
TIMEOUT_S = 300.0


def run(pcap: Path, keylog: Path | None, args: Sequence[str], timeout_s: float = TIMEOUT_S) -> str:
    """tshark's output for `tshark -n -r PCAP [-o tls.keylog_file:KEYS] ARGS...` in the router. A failure is an
    EnvironmentProblem naming the capture (and, when the router is not there, saying to bring the lab up)."""
    box = f"/tmp/quiclab-tshark-{uuid.uuid4().hex[:12]}"
    rp, rk = f"{box}.pcap", f"{box}.keys"
    keys = ["-o", f"tls.keylog_file:{rk}"] if keylog is not None else []
    try:
        docker.copy_to(pcap, config.ROUTER_CONTAINER, rp)
        if keylog is not None:
            docker.copy_to(keylog, config.ROUTER_CONTAINER, rk)
        return docker.exec_in(config.ROUTER_CONTAINER, ["tshark", "-n", "-r", rp, *keys, *args], timeout_s=timeout_s)
    except docker.DockerError as e:
        why = e.reason(200)
        hint = (": tshark runs in the lab's router, bring the lab up first (quiclab up)"
                if "No such container" in why or "is not running" in why else "")
        raise EnvironmentProblem(f"tshark in the router could not read {pcap}: {why}{hint}") from None
    finally:
        with contextlib.suppress(EnvironmentProblem):  # (docker.DockerError is one)
            docker.exec_in(config.ROUTER_CONTAINER, ["rm", "-f", rp, rk])
