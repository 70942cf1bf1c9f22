#!/bin/bash
# quiclab-page-fetch: several objects with curl, per the endpoint contract's workload extension
# (docs/implementations.md "Workloads"). Environment:
#   PROTOCOL  h1 | h2 | h3 (curl runs --http1.1, --http2 or --http3-only: never a silent fallback)
#   MODE      parallel   one curl, every URL at once (--parallel): HTTP/2 and HTTP/3 multiplex them on one
#                        connection; HTTP/1.1 opens up to PARALLEL connections at once (--parallel-immediate)
#             sequential one curl, the URLs one after the other (one connection, reused)
#             separate   one curl per URL, one after the other (a new connection and a full handshake each)
#             resume     (HTTP/1.1; NAMES="first second", BASE = the object's URL) one curl, two connections one
#                        after the other, the second resuming the first's TLS session
#   BASE      the URL the object names are relative to (ends in /);  NAMES  the object names, space-separated
#   TIMEOUT   seconds for the whole run;  PARALLEL  connections for HTTP/1.1 pages (default 6);  CA  the CA file
# Each body is written to a private temporary directory, hashed and deleted. Prints one JSON line:
#   {"exit": N, "mode": "...", "transfers": [{"t": <epoch s when curl reported the transfer done>, "w": {curl's
#    write-out of it: file, http_version, response_code, size_download, time_*, num_connects, conn_id}}, ...], "sha256": {"<name>": "<hex>", ...}, "errors": "...", "udp_rcvbuf_errors": N}
# curl reports each transfer on stderr (unbuffered) the moment it completes; this script stamps the line with
# the wall clock as it arrives, so completion times of parallel transfers share one clock.
set -uo pipefail
case "${PROTOCOL:-}" in
  h1) flag=--http1.1 ;; h2) flag=--http2 ;; h3) flag=--http3-only ;;
  *) echo "quiclab-page-fetch: unknown PROTOCOL '${PROTOCOL:-}'" >&2; exit 127 ;;
esac
base=${BASE:?BASE is not set}; read -ra names <<<"${NAMES:?NAMES is not set}"
timeout=${TIMEOUT:-60}; mode=${MODE:-parallel}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
# the write-out: what the lab reads of each transfer (curl's %{json} would carry the certificates every time)
wfmt='{"file":"%{filename_effective}","http_version":"%{http_version}","response_code":"%{response_code}",'
wfmt+='"size_download":%{size_download},"time_connect":%{time_connect},"time_appconnect":%{time_appconnect},'
wfmt+='"time_starttransfer":%{time_starttransfer},"time_total":%{time_total},"num_connects":%{num_connects},'
wfmt+='"conn_id":%{conn_id},"exitcode":%{exitcode}}'
common=("$flag" --silent --show-error --cacert "${CA:-/certs/ca.pem}" --connect-timeout "$timeout"
        -w "%{stderr}@@quiclab $wfmt\n")
targets=(); for n in "${names[@]}"; do targets+=(-o "$dir/$n" "$base$n"); done
drops0=$(quiclab-rcvbuf-errors)
stamp() { while IFS= read -r line; do
            if [[ $line == "@@quiclab "* ]]; then printf '%s %s\n' "$EPOCHREALTIME" "${line#@@quiclab }" >>"$dir/.lines"
            else printf '%s\n' "$line" >>"$dir/.errors"; fi
          done; }
rc=0
case "$mode" in
  parallel)
    extra=(--parallel --parallel-max "${#names[@]}")
    [ "$PROTOCOL" = h1 ] && extra=(--parallel --parallel-max "${PARALLEL:-6}" --parallel-immediate)
    curl "${common[@]}" "${extra[@]}" --max-time "$timeout" "${targets[@]}" 2>&1 >/dev/null | stamp
    rc=${PIPESTATUS[0]} ;;
  sequential)
    curl "${common[@]}" --max-time "$timeout" "${targets[@]}" 2>&1 >/dev/null | stamp
    rc=${PIPESTATUS[0]} ;;
  separate)
    end=$(( $(date +%s) + ${timeout%.*} ))
    for n in "${names[@]}"; do
      left=$(( end - $(date +%s) )); [ "$left" -ge 1 ] || { rc=28; echo "timeout before object $n" >>"$dir/.errors"; break; }
      curl "${common[@]}" --max-time "$left" -o "$dir/$n" "$base$n" 2>&1 >/dev/null | stamp
      r=${PIPESTATUS[0]}; [ "$r" -ne 0 ] && { rc=$r; break; }
    done ;;
  resume)  # BASE is the object's URL; two connections in one curl: the first closes after its response
    # (Connection: close), the second resumes its TLS session from curl's session cache (HTTP/1.1 only)
    curl "${common[@]}" --max-time "$timeout" -H "Connection: close" -o "$dir/first" "$base" --next \
      "${common[@]}" --max-time "$timeout" -o "$dir/second" "$base" 2>&1 >/dev/null | stamp
    rc=${PIPESTATUS[0]} ;;
  *) echo "quiclab-page-fetch: unknown MODE '$mode'" >&2; exit 2 ;;
esac
drops1=$(quiclab-rcvbuf-errors)
drops=null; [ -n "$drops0" ] && [ -n "$drops1" ] && drops=$((drops1 - drops0))
transfers=""
if [ -f "$dir/.lines" ]; then
  while IFS= read -r l; do transfers+="${transfers:+,}{\"t\":${l%% *},\"w\":${l#* }}"; done <"$dir/.lines"
fi
sums=""
present=(); for n in "${names[@]}"; do [ -f "$dir/$n" ] && present+=("$n"); done
if [ "${#present[@]}" -gt 0 ]; then  # one sha256sum for all objects (a process per object costs ~0.3 s a page)
  while read -r digest name; do sums+="${sums:+,}\"$name\":\"$digest\""; done \
    < <(cd "$dir" && sha256sum -- "${present[@]}")
fi
errs=$( { cat "$dir/.errors" 2>/dev/null || true; } | tail -c 300 | tr -d '\000-\037"\\')
printf '{"exit":%d,"mode":"%s","transfers":[%s],"sha256":{%s},"errors":"%s","udp_rcvbuf_errors":%s}\n' \
  "$rc" "$mode" "$transfers" "$sums" "$errs" "$drops"
