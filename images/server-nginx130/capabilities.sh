#!/bin/sh
# quiclab: does this nginx provide what the lab relies on? Run at image build time, so the image accepts whatever
# version Debian unstable carries that day (1.30.x, 1.31.x, ...) as long as it has these capabilities, and fails
# with one line saying which one is missing (the set-up then runs the lab without this optional part):
#   h3     the HTTP/3 module (`nginx -V`: --with-http_v3_module)
#   cubic  QUIC with CUBIC congestion control (nginx >= 1.27.5; its code's debug strings "quic congestion ack
#          cubic" are in the binary: Debian builds --with-debug)
#   0rtt   QUIC 0-RTT, i.e. nginx on OpenSSL's own QUIC TLS API (SSL_set_quic_tls_cbs, OpenSSL >= 3.5.1, nginx >=
#          1.29.1); the OpenSSL compatibility layer nginx otherwise uses has no early data
#
#   nginx -V 2>&1 | capabilities.sh /usr/sbin/nginx [RECORD_FILE]
# Prints the version on success and writes it with the capabilities to RECORD_FILE (default: none).
set -eu
binary=$1
record=${2:-}
info=$(cat)
version=$(printf '%s\n' "$info" | sed -n 's/^nginx version: //p' | head -n 1)
[ -n "$version" ] || { echo "quiclab-capability: not an nginx -V output (no 'nginx version:' line)" >&2; exit 1; }
missing=""
printf '%s\n' "$info" | grep -q -- '--with-http_v3_module' || missing="$missing h3 (no --with-http_v3_module)"
grep -aq 'quic congestion ack cubic' "$binary" || missing="$missing cubic (no QUIC CUBIC code)"
grep -aq 'SSL_set_quic_tls_cbs' "$binary" || missing="$missing 0rtt (not on OpenSSL's QUIC TLS API)"
if [ -n "$missing" ]; then
  echo "quiclab-capability: unstable's $version lacks what the lab relies on:$missing" >&2
  exit 1
fi
if [ -n "$record" ]; then
  mkdir -p "$(dirname "$record")"
  printf 'version=%s\ncapabilities=h3 cubic 0rtt\n' "$version" >"$record"
fi
echo "$version: h3 cubic 0rtt"
