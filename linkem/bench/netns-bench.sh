#!/bin/bash
# netns-bench.sh: forwarding throughput of linkem vs. plain kernel forwarding, without Docker.
#
# Builds a private three-namespace topology on the host (client lkc, router lkr, server lks; veth pairs
# lkc<->lkr 10.81.1.0/24 and lkr<->lks 10.81.2.0/24; offloads off on the router's veths, as the quiclab router
# does), then runs iperf3 client->server (uplink data) and -R (downlink data) through the router for each CASE:
#
#   kernel          no policy rules: the kernel forwards directly
#   single:BIN      BIN run --tun lktun0 (one TUN for both directions, the classic router.sh layout)
#   dual:BIN        BIN run --tun-down lktun-down --tun-up lktun-up (one TUN and one thread per direction)
#   napi:BIN        dual with --napi on (threaded NAPI: the kernel forwards written packets in its own thread)
#
# usage: netns-bench.sh [-t SECS] [-n RUNS] [-s] CASE...
#   -t SECS  iperf3 duration per run (default 5)
#   -n RUNS  runs per case and direction, cases interleaved run by run; the median is reported (default 3)
#   -s       shaping check instead of throughput: for each linkem CASE set 20 Mbit/s + 20 ms each way and report
#            iperf3 (both directions) and the ping RTT (expect ~19 Mbit/s and ~40 ms)
#   -u RATE  cost instead of capacity: a fixed-rate UDP flow (iperf3 -u -b RATE, 1400-byte datagrams) in each
#            direction; reports what arrived, linkem's CPU and the whole host's busy CPU per packet (us), which on
#            a shared host varies less than a capacity figure
#   -d RATE  delay error instead of capacity: 20 ms each way, a UDP flow of RATE toward the client, pings every
#            5 ms; reports ping RTT - 40 ms, p50/p99/max, per linkem CASE (the emulator's timing under load)
#   -o       endpoint offloads off (TSO/GSO/GRO on lkc0/lks0, as the quiclab lab has them), so the kernel path
#            forwards wire-sized packets like linkem does
#
# Needs root, iproute2, ethtool, iperf3, curl, jq, ping. Idempotent: removes its namespaces first and at exit.
# Touches nothing outside the namespaces lkc/lkr/lks.
set -euo pipefail

DUR=5 RUNS=3 SHAPE=0 UDP= OFFLOADS=on DELAYLOAD=
while getopts t:n:su:od: o; do
  case $o in
    d) DELAYLOAD=$OPTARG ;;
    t) DUR=$OPTARG ;;
    n) RUNS=$OPTARG ;;
    s) SHAPE=1 ;;
    u) UDP=$OPTARG ;;
    o) OFFLOADS=off ;;
    *) sed -n "2,27p" "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,27p' "$0" >&2; exit 2; }

C=lkc R=lkr S=lks
C_IP=10.81.1.1 RC_IP=10.81.1.254 S_IP=10.81.2.1 RS_IP=10.81.2.254
C_NET=10.81.1.0/24 S_NET=10.81.2.0/24
CIF=lkr-c SIF=lkr-s # the router's interfaces
CTL=127.0.0.1:9100  # linkem's control port, inside lkr
LINKEM_PID=

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

teardown() {
  if [ -n "$LINKEM_PID" ]; then kill "$LINKEM_PID" 2>/dev/null || true; wait "$LINKEM_PID" 2>/dev/null || true; fi
  LINKEM_PID=
  local ns
  for ns in $C $R $S; do
    if ip netns pids "$ns" >/dev/null 2>&1; then
      # only processes inside our own namespaces (iperf3 server, linkem)
      for p in $(ip netns pids "$ns"); do kill "$p" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
}
trap teardown EXIT

setup() {
  teardown
  ip netns add $C; ip netns add $R; ip netns add $S
  ip link add lkc0 netns $C type veth peer name $CIF netns $R
  ip link add lks0 netns $S type veth peer name $SIF netns $R
  nsx $C ip addr add $C_IP/24 dev lkc0
  nsx $S ip addr add $S_IP/24 dev lks0
  nsx $R ip addr add $RC_IP/24 dev $CIF
  nsx $R ip addr add $RS_IP/24 dev $SIF
  local ns
  for ns in $C $R $S; do nsx "$ns" ip link set lo up; done
  nsx $C ip link set lkc0 up; nsx $S ip link set lks0 up
  nsx $R ip link set $CIF up; nsx $R ip link set $SIF up
  nsx $C ip route add $S_NET via $RC_IP
  nsx $S ip route add $C_NET via $RS_IP
  nsx $R sysctl -qw net.ipv4.ip_forward=1
  nsx $R sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  nsx $R sysctl -qw net.ipv4.conf.$CIF.rp_filter=0 net.ipv4.conf.$SIF.rp_filter=0
  nsx $R ethtool -K $CIF tso off gso off gro off >/dev/null 2>&1 || true
  nsx $R ethtool -K $SIF tso off gso off gro off >/dev/null 2>&1 || true
  if [ $OFFLOADS = off ]; then
    nsx $C ethtool -K lkc0 tso off gso off gro off >/dev/null 2>&1 || true
    nsx $S ethtool -K lks0 tso off gso off gro off >/dev/null 2>&1 || true
  fi
  nsx $S iperf3 -s -D -B $S_IP >/dev/null
  sleep 0.3
}

mktun() { # name
  nsx $R ip link del "$1" 2>/dev/null || true
  nsx $R ip tuntap add dev "$1" mode tun
  nsx $R ip link set "$1" up mtu 1500 txqueuelen 10000
  nsx $R sysctl -qw "net.ipv4.conf.$1.rp_filter=0"
}

rules_off() {
  local p
  for p in 100 101; do nsx $R ip rule del pref $p 2>/dev/null || true; done
  for p in 100 101; do nsx $R ip route flush table $p 2>/dev/null || true; done
}

start_linkem() { # kind bin
  local kind=$1 bin=$2
  rules_off
  case $kind in
    single)
      mktun lktun0
      nsx $R ip route replace default dev lktun0 table 100
      ip netns exec $R "$bin" run --tun lktun0 --downlink $C_NET --uplink $S_NET --listen $CTL 2>/tmp/netns-bench-linkem.log &
      LINKEM_PID=$!
      ;;
    dual|napi)
      local napi=(); [ "$kind" = napi ] && napi=(--napi on)
      mktun lktun-down; mktun lktun-up
      nsx $R ip route replace default dev lktun-up table 100
      nsx $R ip route replace default dev lktun-down table 101
      ip netns exec $R "$bin" run --tun-down lktun-down --tun-up lktun-up --downlink $C_NET --uplink $S_NET --listen $CTL \
        "${napi[@]}" 2>/tmp/netns-bench-linkem.log &
      LINKEM_PID=$!
      ;;
    *) echo "unknown case $kind" >&2; exit 2 ;;
  esac
  local i
  for i in $(seq 1 50); do nsx $R curl -fsS "http://$CTL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  nsx $R curl -fsS "http://$CTL/healthz" >/dev/null || { cat /tmp/netns-bench-linkem.log >&2; exit 1; }
  if [ "$kind" = single ]; then
    nsx $R ip rule add pref 100 iif $CIF lookup 100
    nsx $R ip rule add pref 101 iif $SIF lookup 100
  else
    nsx $R ip rule add pref 100 iif $CIF lookup 100
    nsx $R ip rule add pref 101 iif $SIF lookup 101
  fi
}

stop_linkem() {
  rules_off
  if [ -n "$LINKEM_PID" ]; then kill "$LINKEM_PID" 2>/dev/null || true; wait "$LINKEM_PID" 2>/dev/null || true; fi
  LINKEM_PID=
  local t
  for t in lktun0 lktun-down lktun-up; do nsx $R ip link del $t 2>/dev/null || true; done
}

cpu_ticks() { # total utime+stime of a pid (and its threads), in clock ticks
  [ -n "$LINKEM_PID" ] || { echo 0; return; }
  awk '{print $14 + $15}' "/proc/$LINKEM_PID/stat" 2>/dev/null || echo 0
}

iperf() { # extra-args... -> prints receiver Mbit/s
  if [ -n "$UDP" ]; then
    nsx $C iperf3 -c $S_IP -t "$DUR" -J -u -b "$UDP" -l 1400 "$@" | jq -r '.end.sum.bits_per_second / 1e5 | floor / 10'
  else
    nsx $C iperf3 -c $S_IP -t "$DUR" -J "$@" | jq -r '.end.sum_received.bits_per_second / 1e5 | floor / 10'
  fi
}

host_busy() { # busy jiffies of the whole host (user+nice+system+irq+softirq+steal)
  awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RESULT CPU # "case dir" -> space-separated values of all runs

declare -A HOSTUS # "case dir" -> host busy CPU per packet (us), -u mode

measure_once() { # case: one run in each direction, results appended to RESULT/CPU
  local case=$1 dir args v t0 t1 h0 h1 hz
  hz=$(getconf CLK_TCK)
  for dir in up down; do
    args=(); [ $dir = down ] && args=(-R)
    t0=$(cpu_ticks); h0=$(host_busy)
    v=$(iperf "${args[@]}")
    t1=$(cpu_ticks); h1=$(host_busy)
    RESULT["$case $dir"]+="$v "
    CPU["$case $dir"]+="$(( (t1 - t0) * 100 / hz / DUR )) "
    if [ -n "$UDP" ]; then # packets = Mbit/s * DUR / (1428 bytes * 8) (1400-byte payload + UDP/IP headers)
      HOSTUS["$case $dir"]+="$(awk -v b=$((h1 - h0)) -v hz="$hz" -v m="$v" -v d="$DUR" \
        'BEGIN {p = m * 1e6 * d / (1428 * 8); printf "%.1f", (p > 0 ? b / hz * 1e6 / p : 0)}') "
    fi
  done
}

report() { # cases...
  local case dir vals
  for case in "$@"; do
    for dir in up down; do
      vals=${RESULT["$case $dir"]:-}
      printf '%-32s %-4s median %6s Mbit/s   runs: %-22s linkem cpu%%: %-12s %s\n' "$case" "$dir" \
        "$(printf '%s\n' $vals | median)" "$vals" "${CPU["$case $dir"]:-}" \
        "${HOSTUS["$case $dir"]:+host busy us/packet: ${HOSTUS["$case $dir"]}}"
    done
  done
}

shape_check() { # label
  local label=$1 cfg='{"downlink":{"rate_bps":20000000,"delay_us":20000},"uplink":{"rate_bps":20000000,"delay_us":20000}}'
  echo "$cfg" | nsx $R "$BIN" set --addr $CTL - >/dev/null
  local up down rtt
  up=$(iperf); down=$(iperf -R)
  rtt=$(nsx $C ping -q -c 20 -i 0.1 $S_IP | awk -F/ '/^rtt|^round-trip/ {print $5}')
  printf '%-28s shaped 20 Mbit/s + 20 ms: up %s Mbit/s, down %s Mbit/s, ping avg RTT %s ms\n' "$label" "$up" "$down" "$rtt"
  nsx $R curl -fsS "http://$CTL/metrics" | awk '/^quiclab_link_packets_total.*protocol="(tcp|icmp)"/ && $2 > 0 {printf "    %s\n", $0}'
  nsx $R curl -fsS "http://$CTL/metrics" | awk '/^quiclab_link_(drops_total|config_applied_total)/ && $2 > 0 {printf "    %s\n", $0}' 
  echo '{}' | nsx $R "$BIN" set --addr $CTL - >/dev/null
}

delay_check() { # label: ping RTT error under a UDP load toward the client, 20 ms each way
  local label=$1 cfg='{"downlink":{"delay_us":20000},"uplink":{"delay_us":20000}}'
  echo "$cfg" | nsx $R "$BIN" set --addr $CTL - >/dev/null
  nsx $C iperf3 -c $S_IP -t $((DUR + 2)) -u -b "$DELAYLOAD" -l 1400 -R >/dev/null 2>&1 &
  local load=$!
  sleep 1
  nsx $C ping -n -c $((DUR * 200)) -i 0.005 $S_IP | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n |
    awk -v l="$label" '{a[NR] = $1 - 40} END {printf "%-28s delay error under UDP load: p50 %.3f p99 %.3f max %.3f ms (%d pings)\n",
      l, a[int(NR * 0.5)], a[int(NR * 0.99)], a[NR], NR}'
  wait $load || true
  echo '{}' | nsx $R "$BIN" set --addr $CTL - >/dev/null
}

setup
nsx $C ping -q -c 1 -W 2 $S_IP >/dev/null || { echo "topology broken: no ping" >&2; exit 1; }
for case in "$@"; do # validate first
  kind=${case%%:*}
  case $kind in kernel) ;; single|dual|napi) [ -x "${case#*:}" ] || { echo "${case#*:}: not executable" >&2; exit 2; } ;;
    *) echo "unknown case $case" >&2; exit 2 ;; esac
done
# Cases are interleaved run by run, so that load changes on the host hit all of them alike.
for run in $(seq 1 "$RUNS"); do
  for case in "$@"; do
    kind=${case%%:*}
    if [ "$kind" = kernel ]; then
      [ $SHAPE = 1 ] || [ -n "$DELAYLOAD" ] && continue
      rules_off
      measure_once kernel
      continue
    fi
    BIN=${case#*:}
    start_linkem "$kind" "$BIN"
    nsx $C ping -q -c 1 -W 2 $S_IP >/dev/null || { echo "$case: no ping through linkem" >&2; exit 1; }
    if [ $SHAPE = 1 ]; then shape_check "$case"
    elif [ -n "$DELAYLOAD" ]; then delay_check "$case"
    else measure_once "$case"; fi
    stop_linkem
  done
  [ $SHAPE = 1 ] && break
done
[ $SHAPE = 1 ] || [ -n "$DELAYLOAD" ] || report "$@"
