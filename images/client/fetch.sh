#!/bin/bash
# quiclab-fetch CURL_ARGS...: run curl with the given arguments, stream the body through SHA-256 (nothing is
# written to disk) and print one JSON line: {"exit": curl's exit code, "sha256": "...", "curl": curl's %{json},
# "udp_rcvbuf_errors": datagrams this network namespace dropped because a UDP socket's receive buffer was full,
# during the transfer (UdpRcvbufErrors in /proc/net/snmp; the client container runs one transfer at a time)}.
set -o pipefail
drops0=$(quiclab-rcvbuf-errors)
wo=$(mktemp)
sha=$(curl "$@" -o - -w "%output{$wo}%{json}" | sha256sum | cut -d' ' -f1)
rc=$?
drops1=$(quiclab-rcvbuf-errors)
drops=null; [ -n "$drops0" ] && [ -n "$drops1" ] && drops=$((drops1 - drops0))
out=$(cat "$wo"); rm -f "$wo"
printf '{"exit":%d,"sha256":"%s","curl":%s,"udp_rcvbuf_errors":%s}\n' "$rc" "$sha" "${out:-null}" "$drops"
