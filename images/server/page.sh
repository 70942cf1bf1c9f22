#!/bin/bash
# quiclab-page N BYTES: make sure the page /srv/www/obj/page-N-BYTES/ exists and print its manifest, one line per
# object: "<sha256>  <name>" (names 0 .. N-1). The objects are incompressible and deterministic (AES-128-CTR
# keystreams under the lab's fixed key, IV = object index + 1, so no two objects of a page, and no page object and
# the bulk object of the same size, are alike); index.html is the page a browser loads: its script fetches every
# object at once, hashes each body in the page (crypto.subtle.digest) and leaves the results in
# window.__quiclab (images/client-browser/browse.py reads them). Run by the lab in the nginx container, which owns
# the shared object volume (the other servers serve it read-only).
set -euo pipefail
n=${1:?usage: quiclab-page N BYTES}; size=${2:?usage: quiclab-page N BYTES}
[[ $n =~ ^[0-9]+$ && $n -ge 1 ]] || { echo "quiclab-page: N must be a whole number >= 1, got '$n'" >&2; exit 2; }
[[ $size =~ ^[0-9]+$ && $size -ge 1 ]] || { echo "quiclab-page: BYTES must be a whole number >= 1, got '$size'" >&2; exit 2; }
root=/srv/www/obj
dir=$root/page-$n-$size
if [ ! -s "$dir/SHA256SUMS" ]; then
  tmp=$(mktemp -d "$root/.page.XXXXXX")
  for ((i = 0; i < n; i++)); do
    { openssl enc -aes-128-ctr -nosalt -K 717569636c61622d6f626a6563747300 -iv "$(printf '%032x' $((i + 1)))" \
        -in /dev/zero 2>/dev/null || true; } | head -c "$size" >"$tmp/$i"
    [ "$(stat -c %s "$tmp/$i")" = "$size" ] || { echo "quiclab-page: could not make object $i" >&2; rm -rf "$tmp"; exit 1; }
  done
  cat >"$tmp/index.html" <<HTML
<!doctype html>
<html><head><meta charset="utf-8"><title>quiclab page $n x $size B</title></head>
<body>
<p>quiclab test page: $n objects of $size bytes</p>
<script>
"use strict";
// Every object is fetched at once (as a page's subresources are requested), each body hashed in the page.
window.__quiclab = {done: false, objects: []};
performance.setResourceTimingBufferSize(100000);
(async () => {
  const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
  const one = async (i) => {
    const url = new URL(String(i), location.href).href;
    try {
      const r = await fetch(url, {cache: "no-store"});
      const body = await r.arrayBuffer();
      const doneMs = performance.now();
      const sha256 = hex(await crypto.subtle.digest("SHA-256", body));
      return {name: String(i), url, status: r.status, bytes: body.byteLength, sha256, done_ms: doneMs};
    } catch (e) {
      return {name: String(i), url, status: 0, bytes: 0, sha256: "", error: String(e)};
    }
  };
  window.__quiclab.objects = await Promise.all(Array.from({length: $n}, (_, i) => one(i)));
  window.__quiclab.done = true;
})();
</script>
</body></html>
HTML
  (cd "$tmp" && for ((i = 0; i < n; i++)); do sha256sum "$i"; done) >"$tmp/SHA256SUMS.part"
  mv "$tmp/SHA256SUMS.part" "$tmp/SHA256SUMS"
  chmod 0755 "$tmp"; chmod 0644 "$tmp"/*
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then rm -rf "$tmp"; fi  # made meanwhile by another run: keep that one
fi
cat "$dir/SHA256SUMS"
