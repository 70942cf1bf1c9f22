#!/usr/bin/env python3
"""quiclab's aioquic endpoints: an HTTP/3 file server and a download client, both on aioquic's own HTTP/3 layer
(aioquic.h3.connection.H3Connection over aioquic.asyncio). Nothing else: no web framework, no ASGI.

  quiclab-aioquic server [--cc=reno|cubic]     serves /srv/www (the lab's objects under /obj/) on ${PORT:-443}/udp
                                              with /pki/aioquic/{cert,key}.pem; GET /healthz answers 204.
                                              QLOGDIR: one qlog per connection; SSLKEYLOGFILE: TLS secrets.
  quiclab-aioquic fetch                        the endpoint contract (docs/implementations.md): PROTOCOL, URL,
                                              TIMEOUT, HOST_ADDR, CC, QLOGDIR, SSLKEYLOGFILE in the environment;
                                              URL may be a space-separated list (N objects in turn on one
                                              connection). Prints one JSON line; exit 127 for anything but h3.

The congestion control is aioquic's QuicConfiguration.congestion_control_algorithm ("reno", its default, or
"cubic" in 1.7.2); the server's is on its command line (--cc=...), which is where the lab reads it back."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated, QuicEvent
from aioquic.quic.logger import QuicFileLogger

ROOT = "/srv/www"
CA_FILE = "/certs/ca.pem"
UNSUPPORTED = 127
TIMEOUT_EXIT = 28  # curl's "operation timed out": the lab's timeout outcome
CHUNK = 1 << 20
WINDOW = 16 * 1024 * 1024  # flow-control windows (aioquic's default is 1 MB: too small for the lab's BDPs)


def _algorithm(name: str) -> str:
    name = (name or "").strip().lower()
    if name in ("", "native", "default"):
        return "reno"  # aioquic's own default
    if name == "newreno":
        return "reno"
    if name not in ("reno", "cubic"):
        raise SystemExit(f"quiclab-aioquic: congestion control must be reno or cubic, got {name!r}")
    return name


def _keylog() -> object | None:
    path = os.environ.get("SSLKEYLOGFILE")
    return open(path, "a", buffering=1) if path else None  # kept open for the process


def _qlog() -> QuicFileLogger | None:
    folder = os.environ.get("QLOGDIR")
    if not folder:
        return None
    os.makedirs(folder, exist_ok=True)
    return QuicFileLogger(folder)


# --- server ---------------------------------------------------------------------------------------------------

class ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._h3: H3Connection | None = None

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._h3 = H3Connection(self._quic)
        if self._h3 is not None:
            for h3_event in self._h3.handle_event(event):
                self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, HeadersReceived):
            return
        headers = dict(event.headers)
        method = headers.get(b":method", b"")
        path = headers.get(b":path", b"/").decode(errors="replace").split("?", 1)[0]
        assert self._h3 is not None
        if method not in (b"GET", b"HEAD"):
            self._answer(event.stream_id, 405, b"")
        elif path == "/healthz":
            self._answer(event.stream_id, 204, b"")
        else:
            full = os.path.realpath(os.path.join(ROOT, path.lstrip("/")))
            if not full.startswith(ROOT + "/") or not os.path.isfile(full):
                self._answer(event.stream_id, 404, b"not found\n")
            else:
                with open(full, "rb") as f:
                    body = f.read()
                self._answer(event.stream_id, 200, b"" if method == b"HEAD" else body, len(body),
                             html=full.endswith(".html"))
        self.transmit()

    def _answer(self, stream_id: int, status: int, body: bytes, length: int | None = None,
                html: bool = False) -> None:
        assert self._h3 is not None
        headers = [(b":status", str(status).encode()), (b"server", b"quiclab-aioquic"),
                   (b"cache-control", b"no-store"),
                   (b"content-length", str(len(body) if length is None else length).encode())]
        if status == 200:  # as nginx's types: html for the workloads' test pages (index.html), else octet-stream
            headers.append((b"content-type", b"text/html" if html else b"application/octet-stream"))
        self._h3.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self._h3.send_data(stream_id, body, end_stream=True)


async def _serve(port: int, cc: str) -> None:
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, congestion_control_algorithm=cc,
                               max_data=WINDOW, max_stream_data=WINDOW, quic_logger=_qlog(),
                               secrets_log_file=_keylog())
    config.load_cert_chain("/pki/aioquic/cert.pem", "/pki/aioquic/key.pem")
    server = await serve(os.environ.get("ADDRESS", "0.0.0.0"), port, configuration=config,
                         create_protocol=ServerProtocol)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


# --- client ---------------------------------------------------------------------------------------------------

class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self._waiting: dict[int, Download] = {}

    def get(self, authority: str, path: str, download: Download) -> None:
        stream_id = self._quic.get_next_available_stream_id()
        self._waiting[stream_id] = download
        self.h3.send_headers(stream_id, [(b":method", b"GET"), (b":scheme", b"https"),
                                         (b":authority", authority.encode()), (b":path", path.encode()),
                                         (b"user-agent", b"quiclab-aioquic")], end_stream=True)
        self.transmit()

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3_event in self.h3.handle_event(event):
            download = self._waiting.get(getattr(h3_event, "stream_id", -1))
            if download is not None:
                download.event(h3_event)


class Download:
    def __init__(self, start: float) -> None:
        self.start, self.first, self.status = start, 0.0, 0
        self.size, self.digest, self.done = 0, hashlib.sha256(), asyncio.Event()

    def event(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            self.first = self.first or time.monotonic()
            self.status = int(dict(event.headers).get(b":status", b"0"))
        elif isinstance(event, DataReceived):
            self.first = self.first or time.monotonic()
            self.size += len(event.data)
            self.digest.update(event.data)
        if getattr(event, "stream_ended", False):
            self.done.set()


def _rcvbuf_errors() -> int | None:
    try:
        out = subprocess.run(["quiclab-rcvbuf-errors"], capture_output=True, text=True, timeout=5).stdout.strip()
        return int(out)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


async def _fetch(urls: list[str], address: str, timeout: float, cc: str) -> dict:
    first = urlsplit(urls[0])
    host, port = first.hostname or "", first.port or 443
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, congestion_control_algorithm=cc,
                               server_name=host, max_data=WINDOW, max_stream_data=WINDOW,
                               quic_logger=_qlog(), secrets_log_file=_keylog())
    config.verify_mode = ssl.CERT_REQUIRED
    config.load_verify_locations(CA_FILE)  # the lab CA: the server's certificate is verified
    start = time.monotonic()
    handshake = 0.0
    transfers: list[dict] = []
    digest = hashlib.sha256()
    total_size = 0

    async def run() -> None:
        nonlocal handshake, total_size
        async with connect(address or host, port, configuration=config, create_protocol=ClientProtocol) as proto:
            handshake = time.monotonic() - start
            assert isinstance(proto, ClientProtocol)
            for url in urls:
                parts = urlsplit(url)
                d = Download(time.monotonic())
                proto.get(parts.netloc, parts.path or "/", d)
                await d.done.wait()
                transfers.append({"url": url, "status": d.status, "size": d.size, "sha256": d.digest.hexdigest(),
                                  "t": time.time(), "ttfb": d.first - start if d.first else 0.0,
                                  "total": time.monotonic() - d.start})
                if d.status != 200:
                    raise RuntimeError(f"HTTP {d.status} for {parts.path}")
            proto.close()

    exit_code, message = 0, ""
    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        exit_code, message = TIMEOUT_EXIT, f"timed out after {timeout:g} s"
    except ConnectionError as e:  # aioquic: handshake or connection failure
        exit_code, message = 7, f"connection failed: {e}"
    except ssl.SSLError as e:
        exit_code, message = 60, f"certificate: {e}"
    except Exception as e:  # the contract wants one JSON line for every outcome
        exit_code, message = 1, f"{type(e).__name__}: {e}"
    total = time.monotonic() - start
    for t in transfers:
        total_size += t["size"]
    if len(transfers) == 1:
        sha = transfers[0]["sha256"]
    else:
        for t in transfers:
            digest.update(t["sha256"].encode())
        sha = digest.hexdigest() if transfers else ""
    got_all = exit_code == 0 and len(transfers) == len(urls)
    return {"exit": exit_code, "sha256": sha,
            "curl": {"http_version": "3" if got_all else "",
                     "response_code": transfers[-1]["status"] if transfers else 0,
                     "size_download": total_size, "time_total": round(total, 6),
                     "time_appconnect": round(handshake, 6),
                     "time_starttransfer": round(transfers[0]["ttfb"], 6) if transfers else 0,
                     "errormsg": message, "cc": cc},
            "transfers": transfers}


def fetch() -> int:
    env = os.environ
    protocol = env.get("PROTOCOL", "h3")
    if protocol != "h3":
        sys.stderr.write(f"aioquic speaks HTTP/3 only, not {protocol}\n")
        return UNSUPPORTED
    urls = (env.get("URL") or "").split()
    if not urls:
        sys.stderr.write("quiclab-aioquic fetch: URL is not set\n")
        return 2
    timeout = float(env.get("TIMEOUT") or 60)
    drops0 = _rcvbuf_errors()
    line = asyncio.run(_fetch(urls, env.get("HOST_ADDR", ""), timeout, _algorithm(env.get("CC", ""))))
    drops1 = _rcvbuf_errors()
    line["udp_rcvbuf_errors"] = drops1 - drops0 if drops0 is not None and drops1 is not None else None
    print(json.dumps(line, separators=(",", ":")), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="quiclab-aioquic")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--cc", default="reno")
    sub.add_parser("fetch")
    args = parser.parse_args()
    if args.cmd == "server":
        asyncio.run(_serve(int(os.environ.get("PORT") or 443), _algorithm(args.cc)))
        return 0
    return fetch()


if __name__ == "__main__":
    sys.exit(main())
