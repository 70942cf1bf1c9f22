#!/usr/bin/env bash
# The seed atlas's data (issue 26): run seed presets and publish each finished sweep as
# results/reference/<preset>/ (runs.csv, manifest.json, summary.md, the other CSVs and the plots; no pcaps, no
# per-lab logs), ready to commit, and regenerate the documents that cite them (`quiclab docs`: docs/seeds.md, the
# generated blocks of README.md and docs/results.md).
#
#   bash scripts/atlas.sh [--parallel N|auto] [--rerun] [PRESET ...]   (default: every seed preset, --parallel 3; auto picks
#   the number of labs from each plan's link rates and this host's cores: docs/results.md "Parallel labs")
#
# A preset whose reference folder is complete is skipped; an interrupted sweep stays in results/atlas/<preset>/
# and is resumed (`quiclab sweep --resume`) on the next call. kth-unshaped runs on one lab (an unshaped link
# would measure the host, not the link, when labs share its two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
parallel=3 rerun=0 published=0
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --parallel) parallel=$2; shift 2 ;;
    --rerun) rerun=1; shift ;;  # measure again even where a complete reference folder exists (replaced when done)
    *) echo "✗ unknown option $1: allowed --parallel N|auto, --rerun" >&2; exit 2 ;;
  esac
done
quiclab=(.venv/bin/quiclab)
# every seed preset (tests/unit/test_seed_presets.py: names starting connectify, yu, kth, survey, jitter, bolina),
# quickest first so that a session's time buys the most seed experiments
all=(connectify-rate connectify-rate-cubic connectify-rate-nginx-sid connectify-rtt connectify-rtt-cubic
     connectify-rtt-nginx-sid survey-delay survey-loss survey-spikes jitter-reorder jitter bolina-0rtt yu-reuse
     kth-unshaped kth-size kth-loss connectify-loss connectify-cc survey-grid bolina yu yu-rtt35 yu-senders
     connectify-loss-nginx-sid connectify-loss-cubic connectify-loss-captured connectify-rtt-window
     connectify-rate-window yu-senders-quic survey-loss-cubic)
presets=("$@")
((${#presets[@]})) || presets=("${all[@]}")
# A reference folder is made from committed code only (`quiclab publish` refuses anything else): say so before an
# hour of sweeping, not after it.
if [[ -n $(git status --porcelain -- . ':(exclude)results') ]]; then
  echo "✗ the source tree has uncommitted changes (git status): commit them first; a reference folder must be made" \
       "from committed code" >&2
  exit 1
fi
complete() { [[ -f $1/manifest.json ]] && .venv/bin/python -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("status") != "complete")' "$1/manifest.json"; }
work=results/atlas
for p in "${presets[@]}"; do
  ref=results/reference/$p
  if ((!rerun)) && complete "$ref"; then echo "· $p: $ref is complete: skipped"; continue; fi
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
  "${quiclab[@]}" publish "$folder" "$p"  # refuses a folder not made from committed code, or without image IDs
  echo "✓ $p published: $ref ($(du -sh "$ref" | cut -f1))"
  published=1
done
# docs/seeds.md and the generated blocks now cite them: commit them with the folders. (Once, after every sweep:
# regenerated docs are source changes, and the next preset's sweep must start from a clean tree.)
if ((published)); then "${quiclab[@]}" docs; fi
