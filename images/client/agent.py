#!/usr/bin/python3
"""quiclab-agent: runs the lab's per-run commands in a client container (docs/implementations.md).

    quiclab-agent serve           JSON lines on stdin/stdout, one request at a time, for a whole sweep
    quiclab-fetch CURL_ARGS...    (a link to this file) one curl download, one JSON line (the endpoint contract)
    quiclab-ngtcp2-fetch          (a link to this file) one gtlsclient download; environment as below

`serve` exists so the lab starts one process per container for a sweep instead of one `docker exec` per run (each
costs ~80 ms on a 2-core host); it opens no port and needs no privileges: the lab talks to it over the stdin and
stdout of one `docker exec -i`. A request is {"id": N, "argv": [...], "env": {...}, "timeout": S}; the answer is
{"id": N, "exit": CODE, "stdout": "...", "stderr": "..."}: what running argv would have given. The two fetch
commands run in this process (no shell, no awk, no sha256sum: only curl or gtlsclient are started); any other
argv is run as a subprocess, killed with its process group after `timeout` seconds (exit 124). A leading
`env K=V ...` is applied here too.

The fetch commands print {"exit": N, "sha256": "<hex of the body>", "curl": {...curl's %{json} keys...},
"udp_rcvbuf_errors": N|null}. The body is hashed as it streams (nothing is written to disk by quiclab-fetch).
udp_rcvbuf_errors: datagrams this network namespace dropped because a UDP socket's receive buffer was full
during the transfer (UdpRcvbufErrors in /proc/net/snmp; the client container runs one transfer at a time).

quiclab-ngtcp2-fetch takes PROTOCOL (h3 only; anything else exits 127 = unsupported), URL, TIMEOUT (seconds),
CC (cubic | reno | bbr), QLOGDIR and SSLKEYLOGFILE (optional evidence), HOST_ADDR (optional address to connect
to), CHANGE_LOCAL_ADDR (a duration, e.g. 1000ms: gtlsclient moves to a new local port that long after its
handshake) and NAT_REBINDING (1: it does so without validating the new path itself). gtlsclient reports no timings of its own: time_total is the wall time of the gtlsclient process
(connection set-up + handshake + transfer, as curl's time_total); there is no handshake or first-byte time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

UNSUPPORTED = 127
CURL_TIMEOUT = 28
CHUNK = 1 << 18


def rcvbuf_errors() -> int | None:
    """This network namespace's UdpRcvbufErrors (None if the kernel does not say)."""
    try:
        with open("/proc/net/snmp") as f:
            udp = [line.split() for line in f if line.startswith("Udp:")]
        return int(udp[1][udp[0].index("RcvbufErrors")])
    except (OSError, ValueError, IndexError):
        return None


def _drops(before: int | None, after: int | None) -> int | None:
    return after - before if before is not None and after is not None else None


def fetch_curl(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """curl ARGS with the body streamed through SHA-256 and %{json} written aside: (0, JSON line, stderr)."""
    fd, wo = tempfile.mkstemp(prefix="quiclab-wo-")
    os.close(fd)
    drops0 = rcvbuf_errors()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(["curl", *args, "-o", "-", "-w", f"%output{{{wo}}}%{{json}}"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env)
        assert proc.stdout is not None
        digest = hashlib.sha256()
        while chunk := proc.stdout.read(CHUNK):
            digest.update(chunk)
        rc = proc.wait()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    drops1 = rcvbuf_errors()
    try:
        with open(wo) as f:
            writeout = json.loads(f.read() or "null")
    except (OSError, ValueError):
        writeout = None
    finally:
        os.unlink(wo)
    line = {"exit": rc, "sha256": digest.hexdigest(), "curl": writeout,
            "udp_rcvbuf_errors": _drops(drops0, drops1)}
    return 0, json.dumps(line, separators=(",", ":")), stderr


def _connect_to(host: str, address: str | None) -> str:
    """What gtlsclient connects to: the name when it resolves to the registry's address (gtlsclient sends SNI only
    for a name, and ignores --sni for a numeric host: Caddy refuses a handshake without SNI), else the address."""
    if not address:
        return host
    try:
        return host if socket.gethostbyname(host) == address else address
    except OSError:
        return address


def fetch_ngtcp2(env: dict[str, str]) -> tuple[int, str, str]:
    protocol = env.get("PROTOCOL", "h3")
    if protocol != "h3":
        return UNSUPPORTED, "", f"gtlsclient speaks HTTP/3 only, not {protocol}\n"
    url = env.get("URL")
    if not url:
        return 2, "", "quiclab-ngtcp2-fetch: URL is not set\n"
    rest = url.removeprefix("https://")
    authority, _, path = rest.partition("/")
    host, _, port = authority.partition(":")
    timeout = float(env.get("TIMEOUT") or 60)
    args = ["--quiet", "--exit-on-first-stream-close", f"--timeout={timeout:g}s", f"--handshake-timeout={timeout:g}s"]
    if env.get("CC"):
        args.append(f"--cc={env['CC']}")
    if env.get("QLOGDIR"):
        os.makedirs(env["QLOGDIR"], exist_ok=True)
        args.append(f"--qlog-dir={env['QLOGDIR']}")
    if env.get("CHANGE_LOCAL_ADDR"):  # a path change by the client itself (lab/adverse/path.py)
        args.append(f"--change-local-addr={env['CHANGE_LOCAL_ADDR']}")
        if env.get("NAT_REBINDING"):
            args.append("--nat-rebinding")
    folder = tempfile.mkdtemp(prefix="quiclab-dl-")
    try:
        drops0 = rcvbuf_errors()
        start = time.monotonic()
        proc = subprocess.Popen(["gtlsclient", *args, f"--download={folder}", _connect_to(host, env.get("HOST_ADDR")),
                                 port or "443", url], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            rc = CURL_TIMEOUT  # a timeout is reported as curl's 28 so the lab calls it a timeout
        total = time.monotonic() - start
        drops1 = rcvbuf_errors()
        body = os.path.join(folder, os.path.basename(path))
        size, sha = 0, ""
        if os.path.isfile(body):
            size = os.path.getsize(body)
            digest = hashlib.sha256()
            with open(body, "rb") as f:
                while chunk := f.read(CHUNK):
                    digest.update(chunk)
            sha = digest.hexdigest()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # gtlsclient exits 0 even when the server answers with an error status or closes early: a missing or short
    # body is caught by the lab's size and hash checks.
    message = "".join(c for c in err.decode(errors="replace")[-300:] if c >= " " and c not in '"\\')
    line = {"exit": rc, "sha256": sha,
            "curl": {"http_version": "3" if rc == 0 and sha else "", "size_download": size,
                     "time_total": round(total, 6), "errormsg": message},
            "udp_rcvbuf_errors": _drops(drops0, drops1)}
    return 0, json.dumps(line, separators=(",", ":")), ""


def _split_env(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """`env K=V ... CMD ARGS` -> (CMD ARGS, env with K=V)."""
    if argv and argv[0] == "env":
        argv = argv[1:]
        env = dict(env)
        while argv and "=" in argv[0] and not argv[0].startswith("="):
            k, _, v = argv.pop(0).partition("=")
            env[k] = v
    return argv, env


def run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    argv, env = _split_env(argv, env)
    name = os.path.basename(argv[0]) if argv else ""
    if name == "quiclab-fetch":
        return fetch_curl(argv[1:], env)
    if name == "quiclab-ngtcp2-fetch":
        return fetch_ngtcp2(env)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return 124, out.decode(errors="replace"), err.decode(errors="replace") + f"\ntimed out after {timeout:g} s"
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def serve() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab stops transfers itself; the agent outlives them
    out = sys.stdout
    out.write(json.dumps({"agent": "quiclab-agent", "version": 1, "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req: dict = {}
        try:
            req = json.loads(line)
            env = {**os.environ, **{str(k): str(v) for k, v in (req.get("env") or {}).items()}}
            code, stdout, stderr = run([str(a) for a in req["argv"]], env, float(req.get("timeout") or 3600))
        except (ValueError, KeyError, TypeError, OSError) as e:
            code, stdout, stderr = 125, "", f"quiclab-agent: {type(e).__name__}: {e}"
        out.write(json.dumps({"id": req.get("id"), "exit": code, "stdout": stdout, "stderr": stderr}) + "\n")
        out.flush()
    return 0


def main() -> int:
    name = os.path.basename(sys.argv[0])
    if name == "quiclab-fetch":
        code, stdout, stderr = fetch_curl(sys.argv[1:], dict(os.environ))
    elif name == "quiclab-ngtcp2-fetch":
        code, stdout, stderr = fetch_ngtcp2(dict(os.environ))
    elif sys.argv[1:] == ["serve"]:
        return serve()
    else:
        sys.stderr.write("usage: quiclab-agent serve (or run as quiclab-fetch / quiclab-ngtcp2-fetch)\n")
        return 2
    sys.stderr.write(stderr)
    if stdout:
        sys.stdout.write(stdout + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
