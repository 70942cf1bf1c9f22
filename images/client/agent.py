#!/usr/bin/python3
"""quiclab-agent: runs the lab's per-run commands in a client container (docs/implementations.md).

    quiclab-agent serve           JSON lines on stdin/stdout, one request at a time, for a whole sweep
    quiclab-fetch CURL_ARGS...    (a link to this file) one curl download, one JSON line (the endpoint contract)
    quiclab-ngtcp2-fetch          (a link to this file) one gtlsclient download; environment as below

`serve` exists so the lab starts one process per container for a sweep instead of one `docker exec` per run (each
costs ~80 ms on a 2-core host); it opens no port and needs no privileges. Between requests it keeps the next
fetch's curl started ("a spare", unless QUICLAB_CURL_SPARE=off): `curl -K -` loads its 34 libraries and initialises
(~12 ms here, more than the lab's own share of a run), then waits for its options on stdin; a fetch with the same
environment hands its options over as a curl config instead of starting curl. The same curl binary runs the same
options either way; curl's own timers start with the transfer in both. The lab talks to the agent over the stdin
and stdout of one `docker exec -i`. A request is {"id": N, "argv": [...], "env": {...}, "timeout": S}; the answer is
{"id": N, "exit": CODE, "stdout": "...", "stderr": "..."}: what running argv would have given. The two fetch
commands run in this process (no shell, no awk, no sha256sum: only curl or gtlsclient are started); any other
argv is run as a subprocess, killed with its process group after `timeout` seconds (exit 124). A leading
`env K=V ...` is applied here too.

The fetch commands print {"exit": N, "sha256": "<hex of the body>", "curl": {...curl's %{json} keys...},
"udp_rcvbuf_errors": N|null}. The body is hashed as it streams (nothing is written to disk by quiclab-fetch).
"prestarted": true when the curl of the fetch was started ahead of it (below).
udp_rcvbuf_errors: datagrams this network namespace dropped because a UDP socket's receive buffer was full
during the transfer (UdpRcvbufErrors in /proc/net/snmp; the client container runs one transfer at a time).

quiclab-ngtcp2-fetch takes PROTOCOL (h3 only; anything else exits 127 = unsupported), URL, TIMEOUT (seconds),
CC (cubic | reno | bbr), QLOGDIR and SSLKEYLOGFILE (optional evidence), HOST_ADDR (optional address to connect
to), CHANGE_LOCAL_ADDR (a duration, e.g. 1000ms: gtlsclient moves to a new local port that long after its
handshake), NAT_REBINDING (1: it does so without validating the new path itself) and QUIC_WINDOW (bytes: the flow-
control window it grants, fixed). gtlsclient reports no timings of its own: time_total is the wall time of the
gtlsclient process (connection set-up + handshake + transfer, as curl's time_total); time_appconnect and
time_starttransfer are seen from outside it through inotify (`_Moments`): when its TLS key log received the
application traffic secrets (CLIENT_TRAFFIC_SECRET_0: the client has the server's Finished and its own is sent,
where curl's time_appconnect ends) and when the first byte of the response body was written to its download
folder (the response's first bytes reached the application; curl's time_starttransfer is its first header byte).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO

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


#: curl options the lab's fetches use, by whether they take a value: what curl_config() can write as a config.
CURL_FLAGS = frozenset({"--http1.1", "--http2", "--http3", "--http3-only", "--ipv4", "--ipv6", "--silent", "-s",
                        "--show-error", "-S", "--insecure", "-k", "--compressed", "--no-keepalive", "--tlsv1.2",
                        "--tlsv1.3", "--no-progress-meter"})
CURL_VALUED = frozenset({"--resolve", "--connect-to", "--cacert", "--max-time", "-m", "--connect-timeout", "-o",
                         "--output", "-w", "--write-out", "--limit-rate", "--range", "-r", "--header", "-H",
                         "--user-agent", "-A", "--interface", "--local-port", "--ciphers", "--curves"})


def _quoted(value: str) -> str:
    """A value in a curl config: double quotes, with the escapes curl's config parser reads back."""
    for raw, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t"), ("\r", "\\r"), ("\v", "\\v")):
        value = value.replace(raw, escaped)
    return f'"{value}"'


def curl_config(argv: list[str]) -> str | None:
    """curl's ARGV as a config for `curl -K -` (one option per line, values quoted, the URL as `url = ...`); None
    when an option is not one whose arity is known here (such a fetch starts its own curl)."""
    lines: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in CURL_FLAGS:
            lines.append(arg)
        elif arg in CURL_VALUED:
            value = next(it, None)
            if value is None:
                return None
            lines.append(f"{arg} {_quoted(value)}")
        elif arg.startswith("-"):
            return None
        else:
            lines.append(f"url = {_quoted(arg)}")
    return "".join(f"{line}\n" for line in lines)


class Spare:
    """A curl started before its fetch: libraries loaded and initialised, waiting for a config on its stdin."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (handed to the fetch, or closed by discard)
        self.proc = subprocess.Popen(["curl", "-K", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env)

    def take(self, config: str) -> subprocess.Popen[bytes] | None:
        """Hand the fetch's options over; None if it has gone meanwhile."""
        assert self.proc.stdin is not None
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(config.encode())
                self.proc.stdin.close()
                return self.proc
            except OSError:
                pass
        return None

    def discard(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            if f is not None:
                f.close()


def spares_enabled() -> bool:
    return os.environ.get("QUICLAB_CURL_SPARE", "on").lower() not in ("off", "0", "no", "false")


def fetch_curl(args: list[str], env: dict[str, str], spare: Spare | None = None) -> tuple[int, str, str]:
    """curl ARGS with the body streamed through SHA-256 and %{json} written aside: (0, JSON line, stderr). A spare
    started with the same environment runs it when curl_config can write ARGS (it is used up either way)."""
    fd, wo = tempfile.mkstemp(prefix="quiclab-wo-")
    os.close(fd)
    drops0 = rcvbuf_errors()
    argv = [*args, "-o", "-", "-w", f"%output{{{wo}}}%{{json}}"]
    proc: subprocess.Popen[bytes] | None = None
    err: IO[bytes] | None = None
    if spare is not None:
        config = curl_config(argv) if spare.env == env else None
        proc = spare.take(config) if config is not None else None
        if proc is None:
            spare.discard()
        else:
            err = spare.err
    prestarted = proc is not None
    with err or tempfile.TemporaryFile() as err:
        if proc is None:
            proc = subprocess.Popen(["curl", *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                    env=env)
        assert proc.stdout is not None
        digest = hashlib.sha256()
        while chunk := proc.stdout.read(CHUNK):
            digest.update(chunk)
        rc = proc.wait()
        proc.stdout.close()
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
    line = {"exit": rc, "sha256": digest.hexdigest(), "curl": writeout, "prestarted": prestarted,
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


class _Moments:
    """Two moments of a gtlsclient run, seen through inotify (Linux; no polling, no CPU while waiting): the key log
    file getting CLIENT_TRAFFIC_SECRET_0 (handshake done) and the first write into the download folder (first body
    byte). Times are time.monotonic() of the event's reading, within microseconds of the write."""

    IN_MODIFY, IN_CREATE = 0x2, 0x100
    SECRET = b"CLIENT_TRAFFIC_SECRET_0"

    def __init__(self, keylog: str, download: str) -> None:
        import ctypes
        self.keylog = keylog
        self.handshake: float | None = None
        self.first_byte: float | None = None
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_CLOEXEC)
        self._stop_r, self._stop_w = os.pipe()
        self._wd_keys = self._libc.inotify_add_watch(self._fd, os.path.dirname(keylog).encode(),
                                                     self.IN_MODIFY | self.IN_CREATE)
        self._wd_body = self._libc.inotify_add_watch(self._fd, download.encode(), self.IN_MODIFY)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        if self._fd >= 0 and self._wd_keys >= 0 and self._wd_body >= 0:
            self._thread.start()

    def _loop(self) -> None:
        name = os.path.basename(self.keylog).encode()
        while self.handshake is None or self.first_byte is None:
            ready, _, _ = select.select([self._fd, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            data, now = os.read(self._fd, 65536), time.monotonic()
            at = 0
            while at + 16 <= len(data):
                wd, _mask, _cookie, length = struct.unpack_from("iIII", data, at)
                filename = data[at + 16:at + 16 + length].rstrip(b"\0")
                at += 16 + length
                if wd == self._wd_body and self.first_byte is None:
                    self.first_byte = now
                elif wd == self._wd_keys and filename == name and self.handshake is None and self._has_secret():
                    self.handshake = now

    def _has_secret(self) -> bool:
        try:
            with open(self.keylog, "rb") as f:
                return self.SECRET in f.read()
        except OSError:
            return False

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=1)
        for fd in (self._fd, self._stop_r, self._stop_w):
            if fd >= 0:
                os.close(fd)


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
    if env.get("QUIC_WINDOW"):  # the window it grants, fixed: initial = maximum, so auto-tuning cannot grow it
        w = int(env["QUIC_WINDOW"])
        args += [f"--max-data={w}", f"--max-stream-data-bidi-local={w}", f"--max-window={w}",
                 f"--max-stream-window={w}"]
    if env.get("QLOGDIR"):
        os.makedirs(env["QLOGDIR"], exist_ok=True)
        args.append(f"--qlog-dir={env['QLOGDIR']}")
    if env.get("CHANGE_LOCAL_ADDR"):  # a path change by the client itself (lab/adverse/path.py)
        args.append(f"--change-local-addr={env['CHANGE_LOCAL_ADDR']}")
        if env.get("NAT_REBINDING"):
            args.append("--nat-rebinding")
    folder = tempfile.mkdtemp(prefix="quiclab-dl-")
    keys = tempfile.mkdtemp(prefix="quiclab-keys-")
    env = dict(env)
    if not env.get("SSLKEYLOGFILE"):  # its own key log, only to see when the handshake ended (removed below)
        env["SSLKEYLOGFILE"] = os.path.join(keys, "keys.log")
    moments = None
    try:
        drops0 = rcvbuf_errors()
        moments = _Moments(env["SSLKEYLOGFILE"], folder)
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
        if moments is not None:
            moments.close()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(keys, ignore_errors=True)
    handshake = None if moments is None or moments.handshake is None else round(moments.handshake - start, 6)
    first_byte = None if moments is None or moments.first_byte is None else round(moments.first_byte - start, 6)
    # gtlsclient exits 0 even when the server answers with an error status or closes early: a missing or short
    # body is caught by the lab's size and hash checks.
    message = "".join(c for c in err.decode(errors="replace")[-300:] if c >= " " and c not in '"\\')
    line = {"exit": rc, "sha256": sha,
            "curl": {"http_version": "3" if rc == 0 and sha else "", "size_download": size,
                     "time_total": round(total, 6), "time_appconnect": handshake,
                     "time_starttransfer": first_byte, "errormsg": message},
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


def run(argv: list[str], env: dict[str, str], timeout: float, spare: Spare | None = None) -> tuple[int, str, str]:
    argv, env = _split_env(argv, env)
    name = os.path.basename(argv[0]) if argv else ""
    if name == "quiclab-fetch":
        return fetch_curl(argv[1:], env, spare)
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


def _is_fetch(argv: list[str], env: dict[str, str]) -> dict[str, str] | None:
    """The environment a `quiclab-fetch` request runs curl with; None for any other request."""
    argv, env = _split_env(argv, env)
    return env if argv and os.path.basename(argv[0]) == "quiclab-fetch" else None


def _stopped(fetch_line: str) -> bool:
    """Whether a fetch's curl was ended by a signal (its JSON line's exit is negative)."""
    try:
        return int(json.loads(fetch_line).get("exit", 0)) < 0
    except (ValueError, TypeError, AttributeError):
        return False


def serve() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab stops transfers itself; the agent outlives them
    out = sys.stdout
    out.write(json.dumps({"agent": "quiclab-agent", "version": 1, "pid": os.getpid()}) + "\n")
    out.flush()
    spares = spares_enabled()
    spare: Spare | None = None
    fetch_env: dict[str, str] | None = None  # what the next curl is started with (None: none is started)
    last_fetch_env: dict[str, str] | None = None
    buf = b""
    try:
        while True:
            if b"\n" not in buf:
                # Nothing to do until the next request: start its curl now, unless a request or the end of input
                # is already waiting (after Ctrl-C the lab closes stdin: no curl is started then).
                if (spares and fetch_env is not None and (spare is None or spare.proc.poll() is not None)
                        and not select.select([0], [], [], 0)[0]):
                    if spare is not None:
                        spare.discard()
                    try:
                        spare = Spare(fetch_env)
                    except OSError:  # curl cannot be started: every fetch will say so itself
                        spare, spares = None, False
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                continue
            raw, _, buf = buf.partition(b"\n")
            if not raw.strip():
                continue
            req: dict = {}
            try:
                req = json.loads(raw)
                env = {**os.environ, **{str(k): str(v) for k, v in (req.get("env") or {}).items()}}
                argv = [str(a) for a in req["argv"]]
                this_fetch = _is_fetch(argv, env)
                if this_fetch is not None:
                    taken, spare = spare, None
                    code, stdout, stderr = run(argv, env, float(req.get("timeout") or 3600), taken)
                    # A curl ended by a signal was stopped by the lab (Ctrl-C): no curl is started after it. Nor
                    # after a fetch whose environment differs from the one before (evidence: a key log file per
                    # run): a curl started with it would not be used.
                    steady = this_fetch == last_fetch_env or last_fetch_env is None
                    last_fetch_env = this_fetch
                    fetch_env = this_fetch if steady and not _stopped(stdout) else None
                else:
                    code, stdout, stderr = run(argv, env, float(req.get("timeout") or 3600))
            except (ValueError, KeyError, TypeError, OSError) as e:
                code, stdout, stderr = 125, "", f"quiclab-agent: {type(e).__name__}: {e}"
            out.write(json.dumps({"id": req.get("id"), "exit": code, "stdout": stdout, "stderr": stderr}) + "\n")
            out.flush()
    finally:
        if spare is not None:
            spare.discard()
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
