"""curl's multi-object workloads through quiclab-page-fetch (images/client/page-fetch.sh): command and parsing."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from lab import config
from lab.models import TIMEOUT_EXIT, ClientReport
from lab.protocols import Protocol
from lab.workloads.result import ObjectReport, ParsedRun
from lab.workloads.spec import H1_CONNECTIONS, Workload

_LEADING_ZEROS = re.compile(r'":0+(\d)')
#: workload kind -> the wrapper's MODE
MODES = {"page": "parallel", "reuse": "sequential", "new": "separate", "resume": "resume"}
#: why curl cannot run a workload over a protocol ("" when it can)
RESUME_H1_ONLY = ("curl resumes a session on a second connection over HTTP/1.1 only here (Connection: close in one "
                  "curl process; Debian's curl 8.14 has no --ssl-sessions, and curl keeps an HTTP/2 or HTTP/3 "
                  "connection open)")


def unsupported(w: Workload, protocol: Protocol) -> str:
    return RESUME_H1_ONLY if w.kind == "resume" and protocol is not Protocol.H1 else ""


def command(w: Workload, protocol: Protocol, base: str, names: list[str], timeout_s: float,
            env: dict[str, str]) -> list[str]:
    """The wrapper's argument list (environment via `env`, never a shell string)."""
    values = {"PROTOCOL": protocol.value, "MODE": MODES[w.kind], "BASE": base, "NAMES": " ".join(names),
              "TIMEOUT": f"{max(1, round(timeout_s))}", "PARALLEL": str(H1_CONNECTIONS), "CA": config.CA_FILE,
              **env}
    return ["env", *(f"{k}={v}" for k, v in sorted(values.items())), "quiclab-page-fetch"]


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f


def parse(stdout: str) -> ParsedRun:
    """The wrapper's JSON line -> the run's exit status and errors, one ObjectReport per reported transfer and,
    where the client says so, when the page load started and the connections its page request opened (the browser).
    exit_code -1 when there is no readable line (the wrapper did not finish: the lab's failure, not a result)."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    # curl writes %{response_code} as 000 for a transfer that got no response (a timeout): not JSON as it stands
    line = _LEADING_ZEROS.sub(r'":\1', line)
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return ParsedRun(ClientReport(exit_code=-1, error=f"unreadable client output: {line[:200]!r}"), [])
    sums = doc.get("sha256") or {}
    out = []
    for t in doc.get("transfers") or []:
        w = t.get("w") or {}
        name = os.path.basename(str(w.get("file", "")))
        code = int(w.get("response_code") or 0)
        err = "" if code == 200 else f"HTTP status {code}"
        if int(w.get("exitcode") or 0):
            err = f"curl exit code {w.get('exitcode')}"
        out.append(ObjectReport(
            name=name, http_version=str(w.get("http_version", "")), bytes=int(w.get("size_download") or 0),
            sha256=str(sums.get(name, "")), total_s=_float(w.get("time_total")), done_at=_float(t.get("t")),
            new_connection=int(w.get("num_connects") or 0) > 0, error=err,
            handshake_s=_float(w.get("time_appconnect")) or None, ttfb_s=_float(w.get("time_starttransfer")) or None))
    drops = doc.get("udp_rcvbuf_errors")
    code = int(doc.get("exit", -1))
    report = ClientReport(exit_code=code, error=str(doc.get("errors") or ""), timed_out=code == TIMEOUT_EXIT,
                          udp_rcvbuf_drops=drops if isinstance(drops, int) and drops >= 0 else None)
    start = doc.get("page_start")
    extra = doc.get("connections_navigation")
    return ParsedRun(report, out, float(start) if isinstance(start, (int, float)) else None,
                     extra if isinstance(extra, int) else 0)
