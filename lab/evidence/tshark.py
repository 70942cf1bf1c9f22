"""tshark in the router over one of a run's captures: the one place that copies the pcap (and its TLS key log,
to decrypt TLS and QUIC) into the router, runs Debian's tshark there and removes the copies. Used by the
explanation (lab/explain), the workloads' session check (lab/evidence/sessions.py) and the path-change check
(lab/adverse/path.py)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from pathlib import Path

from lab import config, docker
from lab.endpoints.registry import registry
from lab.errors import EnvironmentProblem

#: how long tshark may take over one run's capture at least (a 10 MB transfer's capture decodes in seconds here)
TIMEOUT_S = 300.0
#: ... and per MB of capture: decrypting QUIC costs far more per packet than TCP (a 49 MB capture of a QUIC run that
#: re-sent 5x its data took over 300 s of one core, 2026-11-26)
SECONDS_PER_MB = 30.0


def deadline_s(pcap: Path) -> float:
    """How long tshark may take over this capture: TIMEOUT_S, or SECONDS_PER_MB per MB of it if that is longer."""
    try:
        size_mb = pcap.stat().st_size / 1e6
    except OSError:
        size_mb = 0.0
    return max(TIMEOUT_S, SECONDS_PER_MB * size_mb)


def decode_as(*extra: int) -> list[str]:
    """tshark options that read the servers' QUIC ports as QUIC. tshark has no UDP port for QUIC: it finds QUIC by a
    heuristic that runs only after the port table, so a client whose random source port is registered to another
    protocol is read as that one (port 34980 is EtherCAT's: a resumed connection from it vanished from a
    capture's handshakes, CI 2026-11-27). A port in the table wins when it is the lower of the two, as 443 is."""
    ports = sorted({*registry().quic_ports(), *extra})  # (`extra`: a run's own port, once)
    return [x for p in ports for x in ("-d", f"udp.port=={p},quic")]


def run(pcap: Path, keylog: Path | None, args: Sequence[str], timeout_s: float | None = None) -> str:
    """tshark's output for `tshark -n -r PCAP [-o tls.keylog_file:KEYS] ARGS...` in the router (within
    `timeout_s`, by default `deadline_s(pcap)`). A failure is an EnvironmentProblem naming the capture (and, when the
    router is not there, saying to bring the lab up)."""
    timeout_s = deadline_s(pcap) if timeout_s is None else timeout_s
    box = f"/tmp/quiclab-tshark-{uuid.uuid4().hex[:12]}"
    rp, rk = f"{box}.pcap", f"{box}.keys"
    keys = ["-o", f"tls.keylog_file:{rk}"] if keylog is not None else []
    try:
        docker.copy_to(pcap, config.ROUTER_CONTAINER, rp)
        if keylog is not None:
            docker.copy_to(keylog, config.ROUTER_CONTAINER, rk)
        return docker.exec_in(config.ROUTER_CONTAINER, ["tshark", "-n", "-r", rp, *keys, *decode_as(), *args],
                              timeout_s=timeout_s)
    except docker.DockerError as e:
        why = e.reason(200)
        hint = (": tshark runs in the lab's router, bring the lab up first (quiclab up)"
                if "No such container" in why or "is not running" in why else "")
        raise EnvironmentProblem(f"tshark in the router could not read {pcap}: {why}{hint}") from None
    finally:
        with contextlib.suppress(EnvironmentProblem):  # (docker.DockerError is one)
            docker.exec_in(config.ROUTER_CONTAINER, ["rm", "-f", rp, rk])
