#!/bin/sh
# quiclab: does this HAProxy provide what the lab relies on? Run at image build time; fails with one line naming
# what is missing (the part is then unavailable, with that line as its reason):
#   quic    HTTP/3 over QUIC built in (`haproxy -vv` OPTIONS: USE_QUIC=1)
#   compat  on OpenSSL's QUIC compatibility layer (USE_QUIC_OPENSSL_COMPAT=1: HAProxy 3.0 does not use OpenSSL
#           3.5's own QUIC TLS API; the layer has no 0-RTT, and `limited-quic` must be set in the configuration)
#   ossl35  OpenSSL 3.5 at run time ("Running on OpenSSL version : OpenSSL 3.5")
#
#   haproxy -vv | capabilities.sh [RECORD_FILE]
set -eu
record=${1:-}
info=$(cat)
version=$(printf '%s\n' "$info" | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p' | head -n 1)
[ -n "$version" ] || { echo "quiclab-capability: not a haproxy -vv output (no 'HAProxy version' line)" >&2; exit 1; }
openssl=$(printf '%s\n' "$info" | sed -n 's/^Running on OpenSSL version : OpenSSL \([0-9.]*\).*/\1/p' | head -n 1)
missing=""
printf '%s\n' "$info" | grep -q 'USE_QUIC=1' || missing="$missing quic (no USE_QUIC=1)"
printf '%s\n' "$info" | grep -q 'USE_QUIC_OPENSSL_COMPAT=1' || missing="$missing compat (no USE_QUIC_OPENSSL_COMPAT=1)"
case "$openssl" in 3.5|3.5.*) ;; *) missing="$missing ossl35 (runs on OpenSSL '${openssl:-unknown}')" ;; esac
if [ -n "$missing" ]; then
  echo "quiclab-capability: trixie's HAProxy $version lacks what the lab relies on:$missing" >&2
  exit 1
fi
if [ -n "$record" ]; then
  mkdir -p "$(dirname "$record")"
  printf 'version=HAProxy %s (OpenSSL %s)\ncapabilities=quic compat ossl35\n' "$version" "$openssl" >"$record"
fi
echo "HAProxy $version on OpenSSL $openssl: quic compat ossl35"
