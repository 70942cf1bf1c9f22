#!/bin/bash
# quiclab-fetch CURL_ARGS...: run curl with the given arguments, stream the body through SHA-256 (nothing is
# written to disk) and print one JSON line: {"exit": curl's exit code, "sha256": "...", "curl": curl's %{json}}.
set -o pipefail
wo=$(mktemp)
sha=$(curl "$@" -o - -w "%output{$wo}%{json}" | sha256sum | cut -d' ' -f1)
rc=$?
out=$(cat "$wo"); rm -f "$wo"
printf '{"exit":%d,"sha256":"%s","curl":%s}\n' "$rc" "$sha" "${out:-null}"
