"""docker-compose.yml as compose reads it for one lab: its QUICLAB_INSTANCE splices substituted (lab/instance.py).
Only the three forms the file uses; tests/lab/test_instances.py checks the same against `docker compose config`."""

from __future__ import annotations

import re

from lab import config
from lab.instance import Instance

SPLICES = ("${QUICLAB_INSTANCE:+-}", "${QUICLAB_INSTANCE:-}", "${QUICLAB_INSTANCE:-0}")


def rendered(lab: Instance) -> str:
    text = config.COMPOSE_FILE.read_text()
    other = set(re.findall(r"\$\{QUICLAB_INSTANCE[^}]*\}", text)) - set(SPLICES)
    assert not other, f"docker-compose.yml uses QUICLAB_INSTANCE forms this helper does not know: {other}"
    return (text.replace(SPLICES[0], "-" if lab.tag else "").replace(SPLICES[1], lab.tag)
            .replace(SPLICES[2], lab.tag or "0"))
