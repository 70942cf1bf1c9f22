"""Runs tshark in the router container on one capture, decrypted with the run's key log (the only IO of the
analysis; as lab/workloads/sessions.py does it)."""

from __future__ import annotations

from pathlib import Path

from lab.evidence import tshark as evidence_tshark
from lab.explain.rows import FIELDS


def fields(pcap: Path, keylog: Path | None) -> str:
    """tshark's FIELDS text of `pcap` (one line per frame); `keylog` None: not decrypted."""
    return evidence_tshark.run(pcap, keylog, ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a",
                                              "-E", "aggregator=;", *(x for f in FIELDS for x in ("-e", f))])
