#!/bin/bash
# quiclab-hostnet: one lab's DOCKER-USER rules on the host (the compose service `hostnet`; lab/hostnet.py says why).
#
#   quiclab-hostnet hold     add the rules, wait, and remove them when stopped (SIGTERM: `docker compose down/stop`)
#   quiclab-hostnet add      add the rules that are missing
#   quiclab-hostnet remove   remove every copy of the rules
#   quiclab-hostnet check    exit 0 if every rule is in place (or none is needed)
#
# The bridges are QUICLAB_BRIDGES (space separated, e.g. "ql-client ql-server"). One rule per bridge accepts what
# enters and leaves that same bridge (traffic that stays inside the lab network), the rule quiclab itself adds:
#   -i BR -o BR -m comment --comment "quiclab lab bridge" -j ACCEPT
# Needed only where br_netfilter passes bridged frames to iptables (bridge-nf-call-iptables = 1); elsewhere every
# command does nothing. The back end (nft or legacy) is the one whose tables hold Docker's DOCKER-USER chain.
set -euo pipefail

bridges=${QUICLAB_BRIDGES:?QUICLAB_BRIDGES is not set}
cmd=
comment="quiclab lab bridge"
sysctl=/proc/sys/net/bridge/bridge-nf-call-iptables

needed() { [ "$(cat "$sysctl" 2>/dev/null || true)" = 1 ]; }

# The iptables command of the back end Docker uses: the one with DOCKER-USER (the one with more rules if both have
# it, as Kubernetes' iptables-wrapper decides). Empty if neither has the chain (Docker runs without iptables: it
# then adds no isolation rules either, and nothing is needed). iptables-legacy is asked only where the host's
# legacy filter table exists already (/proc/net/ip_tables_names): asking it creates that table in the host's
# namespace otherwise (an empty one, but a change to the host all the same).
backend() {
  local nft legacy=0
  nft=$(iptables-nft -w 5 -S DOCKER-USER 2>/dev/null | wc -l || true)
  if grep -qx filter /proc/net/ip_tables_names 2>/dev/null; then
    legacy=$(iptables-legacy -w 5 -S DOCKER-USER 2>/dev/null | wc -l || true)
  fi
  if [ "$nft" = 0 ] && [ "$legacy" = 0 ]; then echo ""
  elif [ "$legacy" -gt "$nft" ]; then echo iptables-legacy
  else echo iptables-nft; fi
}

# ipt OP BRIDGE: one iptables command (-C, -I, -D) on BRIDGE's rule, with the back end in $cmd
ipt() { "$cmd" -w 5 "$1" DOCKER-USER -i "$2" -o "$2" -m comment --comment "$comment" -j ACCEPT; }

add() {
  needed || { echo "hostnet: bridge-nf-call-iptables is not 1: no rule needed"; return 0; }
  local b
  cmd=$(backend)
  [ -n "$cmd" ] || { echo "hostnet: no DOCKER-USER chain (Docker without iptables): no rule needed"; return 0; }
  for b in $bridges; do
    if ! ipt -C "$b" 2>/dev/null; then
      ipt -I "$b"
      echo "hostnet: $cmd: accepting traffic that stays on $b"
    fi
  done
}

remove() {
  local b
  cmd=$(backend)
  [ -n "$cmd" ] || return 0
  for b in $bridges; do
    while ipt -D "$b" 2>/dev/null; do echo "hostnet: $cmd: removed the rule of $b"; done
  done
}

# The healthcheck runs every second (so that `up` sees the lab ready at once); the rules are read at most every
# CHECK_EVERY_S seconds (iptables dumps take the host's xtables lock and CPU on a 2-core machine during runs).
CHECK_EVERY_S=30
checked=/run/quiclab-hostnet.checked

check() {
  if [ -e "$checked" ] && [ $(( $(date +%s) - $(stat -c %Y "$checked") )) -lt "$CHECK_EVERY_S" ]; then return 0; fi
  full_check && touch "$checked"
}

full_check() {
  needed || return 0
  local b
  cmd=$(backend)
  [ -n "$cmd" ] || return 0
  for b in $bridges; do
    ipt -C "$b" 2>/dev/null || { echo "no rule for $b" >&2; return 1; }
  done
}

hold() {
  trap 'remove; exit 0' TERM INT
  add
  sleep infinity &
  wait $!
}

case "${1:-}" in
  hold) hold ;;
  add) add ;;
  remove) remove ;;
  check) check ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
