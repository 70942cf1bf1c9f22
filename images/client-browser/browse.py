#!/usr/bin/python3
"""quiclab-browse: load one generated test page (images/server/page.sh) in headless chromium, driven over WebDriver
(chromium-driver + python3-selenium from Debian), and report it in quiclab-page-fetch's JSON shape.

Environment: PROTOCOL h1 | h2 | h3 (h3: QUIC forced for the page's origin with --origin-to-force-quic-on; h2: QUIC
off; h1: QUIC and HTTP/2 off), URL (the page's index.html), TIMEOUT (seconds), CA (the lab CA, trusted through a
fresh NSS database per run), SSLKEYLOGFILE (optional: chromium writes its TLS secrets there).

Every run starts a fresh browser: a new profile (--user-data-dir) and NSS database in a new temporary HOME, no
cache, no connection or session carried over. The page's script fetches every object at once and hashes each
body in the page (crypto.subtle.digest); this reads the Navigation and Resource Timing entries
(performance.getEntries) with nextHopProtocol per resource. Prints one JSON line:
  {"exit": N, "mode": "browser", "page_start": <epoch s of the navigation's fetchStart>, "navigation": {...},
   "transfers": [{"t": <epoch s of the object's responseEnd>, "w": {"file", "http_version" (from
   nextHopProtocol), "response_code", "size_download" (body bytes the page read), "time_total" (responseEnd -
   startTime), "time_appconnect", "time_starttransfer", "num_connects" (1 if the request opened a connection)}}],
   "sha256": {"<name>": "<hex digest the page computed>"}, "errors": "...", "version": "..."}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

PROTOCOLS = {"h1": "http/1.1", "h2": "h2", "h3": "h3"}
HTTP_VERSION = {"http/1.1": "1.1", "h2": "2", "h3": "3"}
COLLECT = """return {
  origin: performance.timeOrigin,
  nav: performance.getEntriesByType("navigation").map((e) => e.toJSON()),
  res: performance.getEntriesByType("resource").map((e) => e.toJSON()),
  objects: (window.__quiclab || {}).objects || [],
  done: !!(window.__quiclab && window.__quiclab.done),
  page: typeof window.__quiclab !== "undefined",
  type: document.contentType,
  href: location.href,
  text: document.body ? document.body.innerText.slice(0, 400) : "",
  version: navigator.userAgent,
};"""


def _emit(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, separators=(",", ":")))


def _nss(home: str, ca: str) -> None:
    db = f"sql:{os.path.join(home, '.pki', 'nssdb')}"
    os.makedirs(os.path.join(home, ".pki", "nssdb"))
    subprocess.run(["certutil", "-N", "--empty-password", "-d", db], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-n", "quiclab lab CA", "-t", "C,,", "-i", ca, "-d", db], check=True,
                   capture_output=True)


def _options(protocol: str, host: str, port: int, home: str) -> Any:
    from selenium.webdriver.chrome.options import Options

    o = Options()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update", "--no-first-run",
              "--no-default-browser-check", "--disable-extensions", "--disable-sync", "--mute-audio",
              "--disable-features=MediaRouter,OptimizationHints,Translate", f"--user-data-dir={home}/profile"):
        o.add_argument(a)
    if protocol == "h3":
        o.add_argument("--enable-quic")
        o.add_argument(f"--origin-to-force-quic-on={host}:{port}")
    else:
        o.add_argument("--disable-quic")
    if protocol == "h1":
        o.add_argument("--disable-http2")
    return o


def _transfer(e: dict[str, Any], obj: dict[str, Any], origin_ms: float) -> dict[str, Any]:
    start = e["startTime"]
    opened = e.get("connectEnd", 0) > e.get("connectStart", 0)
    w = {"file": obj["name"], "http_version": HTTP_VERSION.get(e.get("nextHopProtocol", ""), e.get("nextHopProtocol", "")),
         "response_code": obj.get("status", 0), "size_download": obj.get("bytes", 0),
         "time_total": (e["responseEnd"] - start) / 1000,
         "time_appconnect": (e["connectEnd"] - start) / 1000 if opened else 0,
         "time_starttransfer": (e["responseStart"] - start) / 1000 if e.get("responseStart") else 0,
         "num_connects": 1 if opened else 0, "exitcode": 0}
    return {"t": (origin_ms + e["responseEnd"]) / 1000, "w": w}


def _not_the_page(data: dict[str, Any]) -> str:
    """Why the test page's script is absent: chromium's own error page (a network error: it names it, e.g.
    ERR_QUIC_PROTOCOL_ERROR) or a document that is not the page."""
    href, text = str(data.get("href") or ""), " ".join(str(data.get("text") or "").split())
    codes = [w.strip(".,;:()") for w in text.split() if w.strip(".,;:()").startswith("ERR_")]
    if href.startswith("chrome-error:") or codes:
        return f"the browser showed its error page, not the test page: {codes[0] if codes else text[:200] or '?'}"
    nav = data["nav"][0] if data.get("nav") else {}
    got = (f"HTTP {nav.get('responseStatus', '?')} over {nav.get('nextHopProtocol') or '?'}, "
           f"{nav.get('decodedBodySize', '?')} bytes")
    if text.startswith("quiclab test page"):  # the document's first paragraph came, its script did not run
        return f"the test page's script did not run: its document ({got}) was cut short or its script failed"
    return (f"the test page did not run in the browser (its document at {href or '?'}, {got}, is "
            f"{data.get('type') or 'unknown'}: is index.html served as text/html?)")


def main() -> int:
    protocol = os.environ.get("PROTOCOL", "h3")
    if protocol not in PROTOCOLS:
        print(f"quiclab-browse: unknown PROTOCOL {protocol!r}: h1, h2 or h3", file=sys.stderr)
        return 127
    url = os.environ["URL"]
    timeout = float(os.environ.get("TIMEOUT", "60"))
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    home = tempfile.mkdtemp(prefix="quiclab-browse-")
    os.environ["HOME"] = home  # chromium reads its NSS database from $HOME/.pki/nssdb
    driver = None
    doc: dict[str, Any] = {"exit": 0, "mode": "browser", "transfers": [], "sha256": {}, "errors": ""}
    try:
        _nss(home, os.environ.get("CA", "/certs/ca.pem"))
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service

        try:
            driver = webdriver.Chrome(options=_options(protocol, host, port, home),
                                      service=Service("/usr/bin/chromedriver"))
            driver.set_page_load_timeout(timeout)
            driver.set_script_timeout(timeout)
            deadline = time.monotonic() + timeout
            driver.get(url)
            data = driver.execute_script(COLLECT)
            while not data["done"] and time.monotonic() < deadline:
                time.sleep(0.05)
                data = driver.execute_script(COLLECT)
        except WebDriverException as e:
            doc.update(exit=28 if "timeout" in str(e).lower() else 1, errors=" ".join(str(e).split())[:300])
            _emit(doc)
            return 0
        if not data["done"] and not data.get("page"):
            doc.update(exit=1, errors=_not_the_page(data))
        elif not data["done"]:
            doc.update(exit=28, errors=f"the page's objects were not all loaded within {timeout:g} s")
        doc["version"] = data["version"]
        nav = data["nav"][0] if data["nav"] else {}
        doc["page_start"] = (data["origin"] + nav.get("fetchStart", 0)) / 1000
        nav_proto = nav.get("nextHopProtocol", "")
        doc["navigation"] = {"protocol": nav_proto, "status": nav.get("responseStatus"),
                             "duration_s": nav.get("duration", 0) / 1000,
                             "opened_connection": nav.get("connectEnd", 0) > nav.get("connectStart", 0)}
        if nav_proto != PROTOCOLS[protocol] and not doc["exit"]:
            doc.update(exit=1, errors=f"the page itself came over {nav_proto or '?'}, not {PROTOCOLS[protocol]}")
        by_url = {e["name"]: e for e in data["res"]}
        for obj in data["objects"]:
            if obj.get("error"):
                doc["errors"] = (doc["errors"] + f" object {obj['name']}: {obj['error']}").strip()[:300]
                continue
            e = by_url.get(obj["url"])
            if e is None:
                doc["errors"] = (doc["errors"] + f" object {obj['name']}: no resource timing entry").strip()[:300]
                continue
            doc["transfers"].append(_transfer(e, obj, data["origin"]))
            doc["sha256"][obj["name"]] = obj.get("sha256", "")
        doc["connections_navigation"] = 1 if doc["navigation"]["opened_connection"] else 0
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001 - the run's result is already read; a browser that will not quit is killed below
                pass
        subprocess.run(["pkill", "-u", str(os.getuid()), "-f", "--", f"--user-data-dir={home}/profile"], check=False,
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    _emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
