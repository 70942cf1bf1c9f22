#!/bin/bash
# quiclab server-ngtcp2 start-up (the endpoint contract, docs/implementations.md): ROLE=server; serves /srv/www
# (the objects under /obj/) on ${PORT:-443}/udp with the key and certificate the pki one-shot made; CC picks the
# congestion controller (cubic | reno | bbr; gtlsserver's default is cubic); QLOGDIR, if set, gets one qlog per
# connection.
set -euo pipefail
args=(--quiet --htdocs=/srv/www)
[ -n "${CC:-}" ] && args+=("--cc=$CC")
[ -n "${QLOGDIR:-}" ] && { mkdir -p "$QLOGDIR"; args+=("--qlog-dir=$QLOGDIR"); }
exec gtlsserver "${args[@]}" "${ADDRESS:-0.0.0.0}" "${PORT:-443}" /pki/ngtcp2/key.pem /pki/ngtcp2/cert.pem
