"""The images' configuration files, without Docker: nginx 1.30's configuration is nginx 1.26's but for the few
lines that must differ, so a sweep comparing the two versions compares versions, not settings."""

from __future__ import annotations

import re
from pathlib import Path

from lab import config

IMAGES = config.ROOT / "images"


def directives(path: Path) -> list[str]:
    """The configuration's directives, one per line, without comments and surrounding blanks."""
    lines = (re.sub(r"#.*", "", line).strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_nginx_130_is_configured_as_nginx_126_but_for_its_certificate_name_and_0rtt():
    old, new = directives(IMAGES / "server/nginx.conf"), directives(IMAGES / "server-nginx130/nginx.conf")
    only_old = [d for d in old if d not in new]
    only_new = [d for d in new if d not in old]
    assert only_old == ["ssl_certificate /pki/nginx/cert.pem;", "ssl_certificate_key /pki/nginx/key.pem;",
                        "server_name server.quiclab;"]
    assert only_new == ["ssl_certificate /pki/nginx-sid/cert.pem;", "ssl_certificate_key /pki/nginx-sid/key.pem;",
                        "ssl_early_data on;", "server_name nginx130.quiclab;"]
    assert "http3_stream_buffer_size 16m;" in new and "quic_gso off;" in new


def test_the_unstable_images_build_from_the_unstable_base_and_reuse_the_client_wrappers():
    compose = config.COMPOSE_FILE.read_text()
    for image in ("server-nginx130", "client-sid"):
        assert f"build: {{<<: *build-sid, dockerfile: images/{image}/Dockerfile}}" in compose
        assert "FROM ${BASE_IMAGE}" in (IMAGES / image / "Dockerfile").read_text()
    assert "BASE_IMAGE: ${QUICLAB_BASE_IMAGE_SID:-debian:sid-slim}" in compose
    client = (IMAGES / "client-sid/Dockerfile").read_text()
    assert "COPY images/client/agent.py /usr/local/bin/quiclab-agent" in client
    assert "ln -s quiclab-agent /usr/local/bin/quiclab-fetch" in client
    setup = (config.ROOT / "scripts/setup.sh").read_text()
    assert "ensure_base unstable debian:sid-slim quiclab/base:sid QUICLAB_BASE_IMAGE_SID" in setup
    assert 'Acquire::Check-Valid-Until "false";' in setup
