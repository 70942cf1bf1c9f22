"""Runs tshark in the router container on one capture, decrypted with the run's key log (the only IO of the
analysis; as lab/evidence/sessions.py does it)."""

from __future__ import annotations

from pathlib import Path

from lab.evidence import tshark as evidence_tshark
from lab.explain.rows import FIELDS


def fields(pcap: Path, keylog: Path | None) -> str:
    """tshark's FIELDS text of `pcap` (one line per frame); `keylog` None: not decrypted. TCP segments are
    reassembled out of order too: on the client's side of a lossy link the server's TLS records arrive with holes,
    and without it one lost handshake segment leaves the whole connection undissected. HTTP/1.1 bodies are not
    reassembled: the response is marked where its headers arrive (its TTFB), not where its last byte does."""
    return evidence_tshark.run(pcap, keylog, ["-o", "tcp.reassemble_out_of_order:TRUE",
                                              "-o", "http.desegment_body:FALSE", "-T", "fields",
                                              "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=;",
                                              *(x for f in FIELDS for x in ("-e", f))])
