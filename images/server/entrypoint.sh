#!/bin/bash
# quiclab server start-up: a fresh lab CA and server certificate (the CA's certificate goes to the shared
# /certs volume for the clients; keys never leave this container), the standard test objects, then nginx.
set -euo pipefail
pki=/etc/quiclab/pki
mkdir -p "$pki" /certs /srv/www/obj
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=quiclab lab CA $(date -u +%Y%m%dT%H%M%SZ)" -keyout "$pki/ca.key" -out "$pki/ca.pem" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=server.quiclab" -keyout "$pki/server.key" -out "$pki/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:server.quiclab,IP:%s\nextendedKeyUsage=serverAuth\n' "${QUICLAB_SERVER_IP:-10.71.2.10}" >"$pki/ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
  -extfile "$pki/ext" -out "$pki/server.pem" 2>/dev/null
chmod 0644 "$pki/server.pem" "$pki/ca.pem"
umask 022
cp "$pki/ca.pem" /certs/ca.pem.tmp && mv /certs/ca.pem.tmp /certs/ca.pem

# Standard objects (decimal sizes: 10 kB, 100 kB, 1 MB, 10 MB); others are made on demand by quiclab-object.
for n in ${QUICLAB_OBJECTS:-10000 100000 1000000 10000000}; do quiclab-object "$n" >/dev/null; done

# iperf3 for the link self-checks and benchmarks (raw TCP/UDP capacity through the router).
iperf3 --server --daemon --logfile /tmp/iperf3.log

exec nginx -g 'daemon off;'
