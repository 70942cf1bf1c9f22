#!/usr/bin/env bash
# The seed atlas's data (issue 26): run seed presets and publish each finished sweep as
# results/reference/<preset>/ (runs.csv, manifest.json, summary.md, the other CSVs and the plots; no pcaps, no
# per-lab logs), ready to commit, and regenerate the documents that cite them (`quiclab docs`: docs/seeds.md, the
# generated blocks of README.md and docs/results.md).
#
#   bash scripts/atlas.sh [--parallel N|auto] [PRESET ...]   (default: every seed preset, --parallel 3; auto picks
#   the number of labs from each plan's link rates and this host's cores: docs/results.md "Parallel labs")
#
# A preset whose reference folder is complete is skipped; an interrupted sweep stays in results/atlas/<preset>/
# and is resumed (`quiclab sweep --resume`) on the next call. kth-unshaped runs on one lab (an unshaped link
# would measure the host, not the link, when labs share its two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
parallel=3
if [[ "${1:-}" == "--parallel" ]]; then parallel=$2; shift 2; fi
quiclab=(.venv/bin/quiclab)
# every seed preset (tests/unit/test_seed_presets.py: names starting connectify, yu, kth, survey, jitter, bolina),
# quickest first so that a session's time buys the most seed experiments
all=(connectify-rate connectify-rate-cubic connectify-rate-nginx-sid connectify-rtt connectify-rtt-cubic
     connectify-rtt-nginx-sid survey-delay survey-loss survey-spikes jitter-reorder jitter bolina-0rtt yu-reuse
     kth-unshaped kth-size kth-loss connectify-loss connectify-cc survey-grid bolina yu yu-rtt35 yu-senders
     connectify-loss-nginx-sid connectify-loss-cubic)
presets=("$@")
((${#presets[@]})) || presets=("${all[@]}")
complete() { [[ -f $1/manifest.json ]] && .venv/bin/python -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("status") != "complete")' "$1/manifest.json"; }
work=results/atlas
for p in "${presets[@]}"; do
  ref=results/reference/$p
  if complete "$ref"; then echo "· $p: $ref is complete: skipped"; continue; fi
  n=$parallel
  [[ $p == kth-unshaped ]] && n=1
  par=(); [[ $n == auto ]] || ((n > 1)) && par=(--parallel "$n")
  folder=$(ls -d "$work/$p"/*/ 2>/dev/null | tail -1 || true)
  if [[ -n $folder ]] && complete "$folder"; then
    echo "· $p: $folder is complete: publishing it"
  elif [[ -n $folder ]]; then
    echo "· $p: resuming $folder"; "${quiclab[@]}" sweep --resume "$folder"  # (with the labs it was started with)
  else
    echo "· $p: sweeping on $n lab(s)"; "${quiclab[@]}" sweep "$p" "${par[@]}" --out "$work/$p"
    folder=$(ls -d "$work/$p"/*/ | tail -1)
  fi
  complete "$folder" || { echo "✗ $p: $folder is not complete: not published" >&2; exit 1; }
  rm -rf "$ref" && mkdir -p "$ref"
  (cd "$folder" && find . \( -name '*.csv' -o -name '*.md' -o -name manifest.json -o -path './plots/*' \) \
     -type f -not -path './evidence/*' -not -path './labs/*' -print0 | xargs -0 cp --parents -t "$OLDPWD/$ref")
  echo "✓ $p published: $ref ($(du -sh "$ref" | cut -f1))"
  "${quiclab[@]}" docs  # docs/seeds.md and the generated blocks now cite it: commit them with the folder
done
