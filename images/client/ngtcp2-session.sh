#!/bin/bash
# quiclab-ngtcp2-session: the resume and 0rtt workloads with ngtcp2's gtlsclient (HTTP/3). Two connections, one
# after the other, each fetching URL: the first saves its TLS session ticket and QUIC transport parameters
# (--session-file, --tp-file, --wait-for-ticket); the second resumes that session, and with EARLY=1 sends its
# request as 0-RTT early data (EARLY=0: --disable-early-data). Environment: PROTOCOL (h3 only, else exit 127),
# URL, TIMEOUT, EARLY, CC, QLOGDIR, SSLKEYLOGFILE, HOST_ADDR (as quiclab-ngtcp2-fetch). gtlsclient reports no
# timings and does not say whether the server accepted early data: the lab proves resumption and 0-RTT from the
# decrypted capture of the run (lab/evidence/sessions.py). Prints one JSON line in quiclab-page-fetch's shape:
# {"exit": N, "mode": "sessions", "transfers": [{"t": <epoch s at its end>, "w": {"file": "first"|"second",
#  "http_version", "size_download", "time_total", "num_connects": 1}}, ...], "sha256": {...}, "errors": "...",
#  "udp_rcvbuf_errors": N}; time_total is each gtlsclient process's wall time.
set -uo pipefail
[ "${PROTOCOL:-h3}" = h3 ] || { echo "gtlsclient speaks HTTP/3 only, not ${PROTOCOL}" >&2; exit 127; }
url=${URL:?URL is not set}
rest=${url#https://}; authority=${rest%%/*}; path=/${rest#*/}
host=${authority%%:*}; port=443
[ "$authority" != "$host" ] && port=${authority#*:}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
args=(--quiet --exit-on-first-stream-close --timeout="${TIMEOUT:-60}s" --handshake-timeout="${TIMEOUT:-60}s"
      --session-file="$dir/session" --tp-file="$dir/tp")
[ -n "${CC:-}" ] && args+=("--cc=$CC")
[ -n "${QLOGDIR:-}" ] && { mkdir -p "$QLOGDIR"; args+=("--qlog-dir=$QLOGDIR"); }
drops0=$(quiclab-rcvbuf-errors)
rc=0; transfers=""; sums=""
# the name when it resolves to the registry's address: gtlsclient sends SNI only for a name (it ignores --sni for a
# numeric host, and Caddy refuses a handshake without SNI); else the address
connect=${HOST_ADDR:-$host}
[ -n "${HOST_ADDR:-}" ] && [ "$(getent hosts "$host" | awk '{print $1; exit}')" = "$HOST_ADDR" ] && connect=$host
for which in first second; do
  extra=(--wait-for-ticket)
  [ "$which" = second ] && { extra=(); [ "${EARLY:-1}" = 1 ] || extra=(--disable-early-data); }
  [ "$which" = second ] && [ ! -s "$dir/session" ] && { rc=3; echo "the first connection got no session ticket" >>"$dir/.errors"; break; }
  mkdir -p "$dir/$which"
  start=$EPOCHREALTIME
  timeout --kill-after=2 "${TIMEOUT:-60}" gtlsclient "${args[@]}" "${extra[@]}" --download="$dir/$which" \
    "$connect" "$port" "$url" >/dev/null 2>>"$dir/.errors"
  r=$?; end=$EPOCHREALTIME
  [ "$r" -eq 124 ] || [ "$r" -eq 137 ] && r=28
  file=$dir/$which/$(basename "$path"); size=0; hv=""
  if [ -f "$file" ]; then
    size=$(stat -c %s "$file"); sums+="${sums:+,}\"$which\":\"$(sha256sum "$file" | cut -d' ' -f1)\""
    [ "$r" -eq 0 ] && hv=3
  fi
  total=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }')
  transfers+="${transfers:+,}{\"t\":$end,\"w\":{\"file\":\"$which\",\"http_version\":\"$hv\",\"response_code\":200,\"size_download\":$size,\"time_total\":$total,\"num_connects\":1,\"exitcode\":$r}}"
  [ "$r" -ne 0 ] && { rc=$r; break; }
done
drops1=$(quiclab-rcvbuf-errors)
drops=null; [ -n "$drops0" ] && [ -n "$drops1" ] && drops=$((drops1 - drops0))
errs=$( { cat "$dir/.errors" 2>/dev/null || true; } | tail -c 300 | tr -d '\000-\037"\\')
printf '{"exit":%d,"mode":"sessions","transfers":[%s],"sha256":{%s},"errors":"%s","udp_rcvbuf_errors":%s}\n' \
  "$rc" "$transfers" "$sums" "$errs" "$drops"
