#!/bin/bash
# quiclab server start-up for kwik (the endpoint contract, docs/implementations.md), installed as
# quiclab-server-kwik: kwik's ServerConnector with flupke's HTTP/3 on ${PORT:-443}/udp, serving /srv/www (the
# objects under /obj/) with the key and certificate the pki one-shot made in /pki/kwik/. kwik's congestion control
# is NewReno, fixed (no CC to pass); it writes no qlog (kwik's qlog module is not on Maven Central).
set -euo pipefail
test -s /pki/kwik/cert.pem || { echo "quiclab-server-kwik: no certificate in /pki/kwik (the pki one-shot makes it)" >&2; exit 1; }
exec quiclab-kwik server
