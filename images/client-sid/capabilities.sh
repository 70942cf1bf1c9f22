#!/bin/sh
# quiclab: does this curl provide what the lab relies on? Run at image build time, so the image accepts whatever
# version Debian unstable carries that day (8.23.x, 8.24.x, ...) as long as it has these capabilities, and fails
# with one line saying which one is missing (the set-up then runs the lab without this optional part):
#   h3      HTTP/3 (`curl --version` Features: HTTP3)
#   ngtcp2  its QUIC is ngtcp2 + nghttp3 (the backend beside trixie's OpenSSL-QUIC curl that the lab compares)
#
#   curl --version | capabilities.sh [RECORD_FILE]
# Prints the version line on success and writes it with the capabilities to RECORD_FILE (default: none).
set -eu
record=${1:-}
info=$(cat)
first=$(printf '%s\n' "$info" | head -n 1)
case $first in
  curl\ *) ;;
  *) echo "quiclab-capability: not a curl --version output ($first)" >&2; exit 1 ;;
esac
version=$(printf '%s\n' "$first" | cut -d' ' -f1-2)
missing=""
printf '%s\n' "$info" | grep -q '^Features:.* HTTP3' || missing="$missing h3 (no HTTP3 feature)"
printf '%s\n' "$first" | grep -q ' ngtcp2/' || missing="$missing ngtcp2 (its QUIC is not ngtcp2)"
if [ -n "$missing" ]; then
  echo "quiclab-capability: unstable's $version lacks what the lab relies on:$missing" >&2
  exit 1
fi
if [ -n "$record" ]; then
  mkdir -p "$(dirname "$record")"
  printf 'version=%s\ncapabilities=h3 ngtcp2\n' "$first" >"$record"
fi
echo "$version: h3 ngtcp2"
