#!/bin/bash
# quiclab-object BYTES: make sure /srv/www/obj/BYTES exists and print its SHA-256. The bytes are incompressible and
# deterministic (an AES-128-CTR keystream under a fixed key: the same size always has the same content and hash),
# so objects made again by another `up` (a new volume) never invalidate the hashes a running sweep holds.
set -euo pipefail
n=${1:?usage: quiclab-object BYTES}
[[ $n =~ ^[0-9]+$ ]] || { echo "quiclab-object: size must be a whole number of bytes, got '$n'" >&2; exit 2; }
dir=/srv/www/obj
if [ ! -s "$dir/$n.sha256" ] || [ ! -f "$dir/$n" ]; then
  tmp=$(mktemp "$dir/.tmp.XXXXXX")
  { openssl enc -aes-128-ctr -nosalt -K 717569636c61622d6f626a6563747300 -iv 0 -in /dev/zero 2>/dev/null \
      || true; } | head -c "$n" >"$tmp"
  [ "$(stat -c %s "$tmp")" = "$n" ] || { echo "quiclab-object: could not make $n bytes" >&2; rm -f "$tmp"; exit 1; }
  sha256sum "$tmp" | cut -d' ' -f1 >"$tmp.sha256"
  chmod 0644 "$tmp" "$tmp.sha256"
  mv "$tmp" "$dir/$n"
  mv "$tmp.sha256" "$dir/$n.sha256"
fi
cat "$dir/$n.sha256"
