"""Start-up facts of a sweep cached per lab: the versions, congestion-control readings and the shaper self-check
cost seconds of `docker exec`, ping and iperf3, and do not change while the same containers run. They are kept
in a cache file keyed by the running containers (name, image, start time: a rebuilt image or a restarted
container is a new lab), the shaper backend and the link the self-check measured; a sweep whose key matches
reuses them and its manifest says so (`startup_cache`: where and when they were measured)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from lab import config, docker, lab
from lab.config import cache_dir
from lab.errors import QuiclabError


def lab_fingerprint() -> str | None:
    """The running lab's identity: each container's name, image and start time (None if Docker cannot say)."""
    try:
        containers = docker.labelled(lab.PROJECT_LABEL, running_only=True)
    except QuiclabError:  # DockerError too
        return None
    ident = sorted(f"{c.name} {c.image} {c.started_at}" for c in containers)
    return hashlib.sha256("\n".join(ident).encode()).hexdigest()


def key(parts: dict[str, Any]) -> str | None:
    fingerprint = lab_fingerprint()
    if fingerprint is None:
        return None
    doc = json.dumps({"lab": fingerprint, "project": config.PROJECT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()[:32]


def cached(parts: dict[str, Any], measure: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(facts, provenance): the cached facts for `parts` on this very lab, else `measure()` (then cached).
    Provenance says whether they were measured now or reused, and when they were measured."""
    k = key(parts)
    path = cache_dir() / f"startup-{k}.json" if k else None
    if path is not None:
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(path.read_text())
            if isinstance(doc, dict) and isinstance(doc.get("facts"), dict):
                return doc["facts"], {"reused": True, "measured_at": doc.get("measured_at"), "key": k}
    facts = measure()
    measured_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if path is not None:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"facts": facts, "measured_at": measured_at}, default=str))
            tmp.replace(path)
    return facts, {"reused": False, "measured_at": measured_at, "key": k}
