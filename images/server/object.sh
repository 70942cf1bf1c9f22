#!/bin/bash
# quiclab-object BYTES: make sure /srv/www/obj/BYTES exists (incompressible random bytes) and print its SHA-256.
set -euo pipefail
n=${1:?usage: quiclab-object BYTES}
[[ $n =~ ^[0-9]+$ ]] || { echo "quiclab-object: size must be a whole number of bytes, got '$n'" >&2; exit 2; }
dir=/srv/www/obj
if [ ! -s "$dir/$n.sha256" ] || [ ! -f "$dir/$n" ]; then
  tmp=$(mktemp "$dir/.tmp.XXXXXX")
  head -c "$n" /dev/urandom >"$tmp"
  sha256sum "$tmp" | cut -d' ' -f1 >"$tmp.sha256"
  chmod 0644 "$tmp" "$tmp.sha256"
  mv "$tmp" "$dir/$n"
  mv "$tmp.sha256" "$dir/$n.sha256"
fi
cat "$dir/$n.sha256"
