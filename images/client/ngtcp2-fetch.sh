#!/bin/bash
# quiclab-ngtcp2-fetch: one HTTP/3 download with ngtcp2's gtlsclient, per the endpoint contract
# (docs/implementations.md). Environment: PROTOCOL (h3 only; anything else exits 127 = unsupported), URL,
# TIMEOUT (seconds), CC (cubic | reno | bbr), QLOGDIR and SSLKEYLOGFILE (optional evidence), HOST_ADDR (optional
# address to connect to; default: the URL's host, resolved via /etc/hosts), CHANGE_LOCAL_ADDR (a duration: move
# to a new local port that long after the handshake) and NAT_REBINDING (1: without the client's own path
# validation). Prints one JSON line in the shape quiclab-fetch prints: {"exit": N, "sha256": "...",
# "curl": {"http_version": "3", "size_download": N, "time_total": S, "errormsg": "..."}}. gtlsclient reports no
# timings of its own: time_total is the wall time of the gtlsclient process (connection set-up + handshake +
# transfer, as curl's time_total), and there is no handshake or first-byte time. The body is written to a private
# temporary directory, hashed and deleted. "udp_rcvbuf_errors": datagrams dropped by a full UDP receive buffer in
# this network namespace during the transfer (as quiclab-fetch reports it).
set -uo pipefail
[ "${PROTOCOL:-h3}" = h3 ] || { echo "gtlsclient speaks HTTP/3 only, not ${PROTOCOL}" >&2; exit 127; }
url=${URL:?URL is not set}
rest=${url#https://}; authority=${rest%%/*}; path=/${rest#*/}
host=${authority%%:*}; port=443
[ "$authority" != "$host" ] && port=${authority#*:}
args=(--quiet --exit-on-first-stream-close --timeout="${TIMEOUT:-60}s" --handshake-timeout="${TIMEOUT:-60}s")
[ -n "${CC:-}" ] && args+=("--cc=$CC")
[ -n "${QLOGDIR:-}" ] && { mkdir -p "$QLOGDIR"; args+=("--qlog-dir=$QLOGDIR"); }
# a path change by the client itself (lab/adverse/path.py): a new local port DURATION after the handshake
[ -n "${CHANGE_LOCAL_ADDR:-}" ] && args+=("--change-local-addr=$CHANGE_LOCAL_ADDR")
[ -n "${NAT_REBINDING:-}" ] && args+=("--nat-rebinding")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
err=$dir/.stderr
drops0=$(quiclab-rcvbuf-errors)
start=$(date +%s.%N)
timeout --kill-after=2 "${TIMEOUT:-60}" gtlsclient "${args[@]}" --download="$dir" "${HOST_ADDR:-$host}" "$port" \
  "$url" >/dev/null 2>"$err"
rc=$?
end=$(date +%s.%N)
drops1=$(quiclab-rcvbuf-errors)
drops=null; [ -n "$drops0" ] && [ -n "$drops1" ] && drops=$((drops1 - drops0))
file=$dir/$(basename "$path")
size=0; sha=""
if [ -f "$file" ]; then
  size=$(stat -c %s "$file")
  sha=$(sha256sum "$file" | cut -d' ' -f1)
fi
# gtlsclient exits 0 even when the server answers with an error status or closes early: a missing or short body
# is caught by the size and hash checks. A timeout (124) is reported as curl's 28 so the lab calls it a timeout.
[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && rc=28
msg=$(tail -c 300 "$err" | tr -d '\000-\037"\\' )
total=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }')
hv=""; [ "$rc" -eq 0 ] && [ -f "$file" ] && hv=3
printf '{"exit":%d,"sha256":"%s","curl":{"http_version":"%s","size_download":%d,"time_total":%s,"errormsg":"%s"},"udp_rcvbuf_errors":%s}\n' \
  "$rc" "$sha" "$hv" "$size" "$total" "$msg" "$drops"
