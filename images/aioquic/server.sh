#!/bin/bash
# quiclab server-aioquic start-up (the endpoint contract, docs/implementations.md): serves /srv/www (the objects
# under /obj/) over HTTP/3 on ${PORT:-443}/udp with the key and certificate the pki one-shot made. CC picks
# aioquic's congestion control (reno, aioquic's default, or cubic), passed on the command line as --cc=..., where
# the lab reads back the one in force; QLOGDIR, if set, gets one qlog per connection.
set -euo pipefail
test -s /pki/aioquic/cert.pem || { echo "quiclab-server-aioquic: no certificate in /pki/aioquic (the pki one-shot makes it)" >&2; exit 1; }
exec /opt/aioquic/bin/python /usr/local/lib/quiclab/quiclab_aioquic.py server "--cc=${CC:-reno}"
