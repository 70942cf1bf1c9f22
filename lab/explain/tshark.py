"""Runs tshark in the router container on one capture, decrypted with the run's key log (the only IO of the
analysis; as lab/workloads/sessions.py does it)."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from lab import config, docker
from lab.errors import EnvironmentProblem
from lab.explain.rows import FIELDS


def fields(pcap: Path, keylog: Path | None) -> str:
    """tshark's FIELDS text of `pcap` (one line per frame); `keylog` None: not decrypted."""
    tag = uuid.uuid4().hex[:12]
    rp, rk = f"/tmp/quiclab-explain-{tag}.pcap", f"/tmp/quiclab-explain-{tag}.keys"
    keys = ["-o", f"tls.keylog_file:{rk}"] if keylog is not None else []
    try:
        docker.copy_to(pcap, config.ROUTER_CONTAINER, rp)
        if keylog is not None:
            docker.copy_to(keylog, config.ROUTER_CONTAINER, rk)
        return docker.exec_in(config.ROUTER_CONTAINER, [
            "tshark", "-n", "-r", rp, *keys, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a",
            "-E", "aggregator=;", *(x for f in FIELDS for x in ("-e", f))], timeout_s=300)
    except docker.DockerError as e:
        why = (e.stderr or "").strip()[:200] or str(e)
        hint = ": explain runs tshark in the lab's router, bring the lab up first (quiclab up)" if (
            "No such container" in why or "is not running" in why) else ""
        raise EnvironmentProblem(f"tshark in the router could not read {pcap}: {why}{hint}") from None
    finally:
        with contextlib.suppress(EnvironmentProblem):  # (docker.DockerError is one)
            docker.exec_in(config.ROUTER_CONTAINER, ["rm", "-f", rp, rk])
