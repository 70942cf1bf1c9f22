"""Issue 27 points 1-2: the optional parts of the lab (lab/optional.py) and the unstable images' capability checks
(images/*/capabilities.sh), without Docker: parts come from the compose file's profiles, a failed build is one line
that says why, a run asking for an unavailable part is refused with it, and the capability checks accept any
version that has what the lab relies on and name what is missing otherwise."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import config, lab, optional
from lab.endpoints import require_available
from lab.endpoints.registry import registry
from lab.errors import UsageError

IMAGES = config.ROOT / "images"


def test_the_parts_are_the_compose_profiles_and_hold_the_registrys_optional_implementations():
    parts = optional.parts()
    assert set(parts) == {"sid", "browser", "haproxy", "aioquic", "quicgo", "quinn", "quiche", "kwik"}
    assert tuple(optional.ON_DEMAND) == ("haproxy", "aioquic", "quicgo", "quinn", "quiche", "kwik")
    assert tuple(optional.PARTS) == ("sid", "browser")
    sid, browser = parts["sid"], parts["browser"]
    assert set(sid.built) == {"server-nginx130", "client-sid"}
    assert set(sid.one_shots) == {"server-nginx130-route", "client-sid-route"}
    assert browser.built == ("client-browser",) and browser.one_shots == ("client-browser-route",)
    reg = registry()
    assert optional.part_of(reg.server("nginx-sid").container) == "sid"
    assert optional.part_of(reg.client("curl-sid").container) == "sid"
    assert optional.part_of(reg.client("chromium").container) == "browser"
    # one image per stack, both roles: only the server's service builds it
    assert parts["haproxy"].built == ("server-haproxy",) and parts["haproxy"].one_shots == ("server-haproxy-route",)
    for stack, server, client in (("aioquic", "aioquic", "aioquic-client"), ("quicgo", "quic-go", "quic-go-client"),
                                   ("quinn", "quinn", "quinn-client"), ("quiche", "quiche", "quiche-client"),
                                   ("kwik", "kwik", "kwik-client")):
        assert optional.part_of(reg.server(server).container) == stack == optional.part_of(reg.client(client).container)
        assert parts[stack].built == (f"server-{stack}",) and len(parts[stack].containers) == 2
    for required in ("nginx", "ngtcp2", "caddy", "curl", "gtlsclient"):
        assert optional.part_of(reg.implementations[required].container) is None, required
    # the default job's containers are never optional
    assert not {config.ROUTER_CONTAINER, config.SERVER_CONTAINER, config.CLIENT_CONTAINER} & {
        c for p in parts.values() for c in p.containers}


@pytest.fixture
def no_sid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Docker holds every image but the sid part's; the last build of sid failed for a stated reason."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    present = frozenset({"quiclab/client-browser:dev", "quiclab/router:dev"})
    monkeypatch.setattr(optional, "_present_images", lambda: present)
    monkeypatch.setattr(optional, "parts", lambda: {
        "sid": optional.Part("sid", "nginx and curl from Debian unstable", ("server-nginx130", "client-sid"),
                             ("server-nginx130", "client-sid"),
                             ("quiclab/server-nginx130:dev", "quiclab/client-sid:dev"),
                             (config.SERVER_NGINX130_CONTAINER, config.CLIENT_SID_CONTAINER)),
        "browser": optional.Part("browser", "headless chromium", ("client-browser",), ("client-browser",),
                                 ("quiclab/client-browser:dev",), (config.BROWSER_CONTAINER,))})
    optional.record_failure("sid", "its base image quiclab/base:sid is not here and cannot be pulled")


def test_a_run_asking_for_an_unavailable_part_is_refused_in_one_line_naming_why(no_sid):
    assert optional.available_profiles() == ("browser",)
    with pytest.raises(UsageError) as e:
        require_available(["curl"], ["nginx-1.30"])  # the old name is an alias of nginx-sid
    line = str(e.value)
    assert "\n" not in line and e.value.exit_code == 2
    assert line.startswith("nginx-sid is unavailable: its base image quiclab/base:sid is not here")
    with pytest.raises(UsageError, match=r"^curl-sid is unavailable"):
        require_available(["curl-sid"], ["nginx"])
    require_available(["curl", "chromium", "gtlsclient"], ["nginx", "ngtcp2", "caddy"])  # the rest: fine


def test_the_lab_waits_for_and_checks_only_what_is_available(no_sid):
    names = lab.wanted(lab.REQUIRED_FOR_RUNS)
    assert config.SERVER_NGINX130_CONTAINER not in names and config.CLIENT_SID_CONTAINER not in names
    assert config.BROWSER_CONTAINER in names and config.ROUTER_CONTAINER in names
    assert optional.unavailable("browser") == ""


def test_an_image_that_was_never_built_says_so(no_sid):
    optional.record_success("sid")  # no failure kept: the image is simply missing
    assert optional.unavailable("sid") == "image quiclab/server-nginx130:dev is not built (run `quiclab build`)"


@pytest.mark.parametrize(("output", "line"), [
    ('ERROR: failed to solve: failed to do request: Head "https://registry-1.docker.io/v2/quiclab/base/manifests/sid":'
     ' dial tcp: lookup registry-1.docker.io: no such host',
     "its base image quiclab/base:sid is not here and cannot be pulled"),
    ('failed to do request: Head "https://registry-1.docker.io/v2/library/debian/manifests/sid-slim": dial tcp',
     "its base image debian:sid-slim is not here and cannot be pulled"),
    ("#9 2.1 E: Unable to locate package nginx\n#9 ERROR: process \"/bin/sh -c apt-get install\" did not complete",
     "E: Unable to locate package nginx"),
    ("#11 0.3 quiclab-capability: unstable's nginx/1.31.0 lacks what the lab relies on: cubic (no QUIC CUBIC code)\n"
     "#11 ERROR: process did not complete successfully: exit code: 1",
     "unstable's nginx/1.31.0 lacks what the lab relies on: cubic (no QUIC CUBIC code)"),
    ("#5 E: Failed to fetch http://deb.debian.org/debian/dists/unstable/InRelease  Could not resolve host",
     "E: Failed to fetch http://deb.debian.org/debian/dists/unstable/InRelease Could not resolve host"),
    ("something else entirely", "the image build failed (exit 17)"),
])
def test_a_failed_build_is_one_line_saying_why(output: str, line: str):
    assert optional.build_failure_line(output, 17) == line


# --- the capability checks (run at build time in the unstable images) --------------------------------------------

def nginx_v(version: str, v3: bool = True) -> str:
    modules = "--with-http_v2_module" + (" --with-http_v3_module" if v3 else "")
    return (f"nginx version: nginx/{version}\nbuilt with OpenSSL 3.6.5\nTLS SNI support enabled\n"
            f"configure arguments: --with-debug --with-http_ssl_module {modules} --with-threads\n")


def fake_binary(tmp_path: Path, cubic: bool = True, quic_api: bool = True) -> Path:
    b = tmp_path / "nginx"
    b.write_bytes(b"\x7fELF\x00junk\x00" + (b"quic congestion ack cubic t:%M\x00" if cubic else b"quic congestion "
                  b"avoidance\x00") + (b"SSL_set_quic_tls_cbs\x00" if quic_api else b"SSL_CTX_new\x00"))
    return b


def check(script: str, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(IMAGES / script / "capabilities.sh"), *args], input=stdin, text=True,
                          capture_output=True, check=False)


@pytest.mark.parametrize("version", ["1.30.6", "1.31.0", "1.32.12", "2.0.1"])
def test_nginx_of_any_version_with_the_capabilities_is_accepted_and_recorded(tmp_path: Path, version: str):
    record = tmp_path / "rec" / "implementation"
    done = check("server-nginx130", nginx_v(version), str(fake_binary(tmp_path)), str(record))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"nginx/{version}: h3 cubic 0rtt"
    assert record.read_text() == f"version=nginx/{version}\ncapabilities=h3 cubic 0rtt\n"


@pytest.mark.parametrize(("v3", "cubic", "quic_api", "missing"), [
    (False, True, True, ["h3 (no --with-http_v3_module)"]),
    (True, False, True, ["cubic (no QUIC CUBIC code)"]),
    (True, True, False, ["0rtt (not on OpenSSL's QUIC TLS API)"]),
    (True, False, False, ["cubic (no QUIC CUBIC code)", "0rtt (not on OpenSSL's QUIC TLS API)"]),
])
def test_nginx_without_a_capability_fails_in_one_line_naming_it(tmp_path: Path, v3, cubic, quic_api, missing):
    done = check("server-nginx130", nginx_v("1.31.2", v3), str(fake_binary(tmp_path, cubic, quic_api)))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("quiclab-capability: unstable's nginx/1.31.2 lacks what the lab relies on: "
                           + " ".join(missing) + "\n")


def test_nginx_check_refuses_what_is_not_nginx_output(tmp_path: Path):
    done = check("server-nginx130", "bash: nginx: command not found\n", str(fake_binary(tmp_path)))
    assert done.returncode == 1 and "not an nginx -V output" in done.stderr


def curl_version(first: str, features: str = "alt-svc HTTP2 HTTP3 HTTPS-proxy IPv6 SSL TLS-SRP") -> str:
    return f"{first}\nRelease-Date: 2026-11-05\nProtocols: http https\nFeatures: {features}\n"


@pytest.mark.parametrize("version", ["8.23.0", "8.24.1", "9.0.0"])
def test_curl_of_any_version_over_ngtcp2_is_accepted_and_recorded(tmp_path: Path, version: str):
    first = (f"curl {version} (x86_64-pc-linux-gnu) libcurl/{version} OpenSSL/3.6.5 nghttp2/1.68 ngtcp2/1.24.0 "
             "nghttp3/1.15")
    record = tmp_path / "implementation"
    done = check("client-sid", curl_version(first), str(record))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"curl {version}: h3 ngtcp2"
    assert record.read_text() == f"version={first}\ncapabilities=h3 ngtcp2\n"


@pytest.mark.parametrize(("first", "features", "missing"), [
    ("curl 8.24.0 (x86_64-pc-linux-gnu) libcurl/8.24.0 OpenSSL/3.6.5 nghttp2/1.68 nghttp3/1.15",
     "HTTP2 HTTP3 SSL", "ngtcp2 (its QUIC is not ngtcp2)"),
    ("curl 8.24.0 (x86_64-pc-linux-gnu) libcurl/8.24.0 OpenSSL/3.6.5 nghttp2/1.68 ngtcp2/1.24.0",
     "HTTP2 SSL", "h3 (no HTTP3 feature)"),
])
def test_curl_without_a_capability_fails_in_one_line_naming_it(first: str, features: str, missing: str):
    done = check("client-sid", curl_version(first, features))
    assert done.returncode == 1
    assert done.stderr == f"quiclab-capability: unstable's curl 8.24.0 lacks what the lab relies on: {missing}\n"


def test_no_unstable_dockerfile_pins_a_version_string():
    for image in ("server-nginx130", "client-sid"):
        text = (IMAGES / image / "Dockerfile").read_text()
        assert "capabilities.sh" in text, image
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert "1\\.30" not in code and "8\\.23" not in code and "grep -q '^curl" not in code, image


def test_the_parts_a_plan_needs_and_the_parts_option():
    reg = registry()
    assert optional.needed([reg.client("curl").container, reg.server("nginx").container]) == ()
    assert optional.needed([reg.client("chromium").container, reg.server("nginx-sid").container]) == ("sid", "browser")
    assert optional.needed([reg.client("quic-go-client").container, reg.server("haproxy").container]) == (
        "haproxy", "quicgo")
    assert optional.parse_parts("sid, browser") == ("sid", "browser") and optional.parse_parts("none") == ()
    assert optional.parse_parts("all") == ("sid", "browser", "haproxy", "aioquic", "quicgo", "quinn", "quiche",
                                           "kwik")
    for bad in ("foo", "", "sid,foo", ","):
        with pytest.raises(UsageError, match=r"^invalid --parts .*: allowed is a comma list of sid, browser, haproxy, "
                                             r"aioquic, quicgo, quinn, quiche, kwik, or all, or none$"):
            optional.parse_parts(bad)
