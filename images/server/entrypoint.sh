#!/bin/bash
# quiclab server start-up (nginx): the standard test objects in the shared object volume (the other servers serve
# the same files, read-only), iperf3, then nginx with the key and certificate the `pki` one-shot made
# (/pki/nginx, read-only; the clients trust the lab CA from /certs/ca.pem).
set -euo pipefail
mkdir -p /srv/www/obj
test -s /pki/nginx/cert.pem || { echo "quiclab-server: no certificate in /pki/nginx (the pki one-shot makes it)" >&2; exit 1; }

# Standard objects (decimal sizes: 10 kB, 100 kB, 1 MB, 10 MB); others are made on demand by quiclab-object.
for n in ${QUICLAB_OBJECTS:-10000 100000 1000000 10000000}; do quiclab-object "$n" >/dev/null; done

# iperf3 for the link self-checks and benchmarks (raw TCP/UDP capacity through the router).
iperf3 --server --daemon --logfile /tmp/iperf3.log

exec nginx -g 'daemon off;'
