#!/bin/bash
# quiclab-router: the router's control script (entrypoint and commands run through `docker exec`).
#
#   quiclab-router start                 configure forwarding + the shaper path, start linkem, wait
#   quiclab-router check                 health: interfaces found, forwarding on, shaper path up
#   quiclab-router ifaces                print "client=<if> server=<if>" (found by address, not by name order)
#   quiclab-router forwarding on|off     let packets between the lab networks through, or drop them all
#   quiclab-router path [linkem|kernel]  show, or choose, whether forwarded packets go through linkem (TUN) or
#                                        straight through the kernel (where tc netem shapes them, if it exists)
#   quiclab-router netem-probe           exit 0 if this kernel has sch_netem, 3 if not
#   quiclab-router tc-check TC_ARGS...   run one tc command against a scratch dummy interface (syntax check)
#   quiclab-router offloads              turn TSO/GSO/GRO off on the lab interfaces
#   quiclab-router endpoint-route NET VIA  (in an endpoint's netns, run by the one-shot *-route services) route
#                                        NET via the router and turn TSO/GSO/GRO off on that interface, so the
#                                        endpoint puts wire-sized packets on the link (not 64 KB GSO bundles
#                                        that a qdisc would shape, and a capture would see, as one packet)
set -euo pipefail

CLIENT_SIDE_IP=${QUICLAB_ROUTER_CLIENT_IP:-10.71.1.254}
SERVER_SIDE_IP=${QUICLAB_ROUTER_SERVER_IP:-10.71.2.254}
CLIENT_NET=${QUICLAB_CLIENT_NET:-10.71.1.0/24}
SERVER_NET=${QUICLAB_SERVER_NET:-10.71.2.0/24}
LINKEM_LISTEN=${QUICLAB_LINKEM_LISTEN:-0.0.0.0:9100}
# One TUN device (and one linkem thread) per direction, chosen by the interface a packet arrived on: from the
# server side (toward the client, downlink) into $TUN_DOWN, from the client side (toward the server, uplink) into
# $TUN_UP. linkem writes each packet back to the device it came from; it then has iif tun-*, matches no rule and
# the main table routes it out.
TUN_DOWN=tun-down
TUN_UP=tun-up
TABLE_UP=100   # iif <client-if> -> default dev $TUN_UP
TABLE_DOWN=101 # iif <server-if> -> default dev $TUN_DOWN

iface_of() { ip -o -4 addr show | awk -v ip="$1" '{split($4, a, "/"); if (a[1] == ip) print $2}'; }
cif() { local i; i=$(iface_of "$CLIENT_SIDE_IP"); [ -n "$i" ] || { echo "no interface has $CLIENT_SIDE_IP" >&2; return 1; }; echo "$i"; }
sif() { local i; i=$(iface_of "$SERVER_SIDE_IP"); [ -n "$i" ] || { echo "no interface has $SERVER_SIDE_IP" >&2; return 1; }; echo "$i"; }

offloads() {
  local i
  for i in "$(cif)" "$(sif)"; do
    ethtool -K "$i" tso off gso off gro off >/dev/null 2>&1 || true
  done
}

endpoint_route() {
  local net=${1:?NET} via=${2:?VIA} dev
  ip route replace "$net" via "$via"
  dev=$(ip -o route get "$via" | sed -nE 's/.* dev ([^ ]+).*/\1/p')
  ethtool -K "$dev" tso off gso off gro off >/dev/null 2>&1 || echo "warning: could not turn offloads off on $dev" >&2
  # UDP GSO is its own feature: with it on, a QUIC server's UDP_SEGMENT sends (ngtcp2) cross the veth as one
  # 64 KB datagram that the router's capture sees as one packet (the emulator still sends wire-sized ones)
  ethtool -K "$dev" tx-udp-segmentation off >/dev/null 2>&1 || true
}

nft_rules() {
  # Only traffic between the two lab subnets is forwarded, through the lab interfaces (and the TUNs). Nothing from
  # the lab networks reaches the router's management port.
  local c s
  c=$(cif); s=$(sif)
  nft -f - <<NFT
table inet quiclab
delete table inet quiclab
table inet quiclab {
  # The router forwards lab traffic statelessly: no connection tracking for it. (Docker's DNS NAT rules make
  # conntrack active in this namespace, and packets through linkem enter the stack twice; tracking them cost
  # ~15 % of forwarding throughput, kernel path and linkem alike.)
  chain raw {
    type filter hook prerouting priority raw; policy accept;
    ip saddr { $CLIENT_NET, $SERVER_NET } ip daddr { $CLIENT_NET, $SERVER_NET } notrack
  }
  chain forward {
    type filter hook forward priority 0; policy drop;
  }
  chain input {
    type filter hook input priority 0; policy accept;
    iifname { "$c", "$s" } tcp dport ${LINKEM_LISTEN##*:} drop
  }
}
NFT
}

forwarding() {
  local c s
  c=$(cif); s=$(sif)
  nft flush chain inet quiclab forward
  if [ "$1" = on ]; then
    nft add rule inet quiclab forward iifname "{ $c, $s, $TUN_DOWN, $TUN_UP }" oifname "{ $c, $s, $TUN_DOWN, $TUN_UP }" \
      ip saddr "{ $CLIENT_NET, $SERVER_NET }" ip daddr "{ $CLIENT_NET, $SERVER_NET }" accept
  fi
}

path() {
  local c s
  c=$(cif); s=$(sif)
  ip rule del pref 100 2>/dev/null || true
  ip rule del pref 101 2>/dev/null || true
  if [ "$1" = linkem ]; then
    ip rule add pref 100 iif "$c" lookup $TABLE_UP
    ip rule add pref 101 iif "$s" lookup $TABLE_DOWN
  fi
}

start() {
  [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || { echo "net.ipv4.ip_forward is off (compose sysctls)" >&2; exit 1; }
  offloads
  nft_rules
  forwarding on
  if [ -x /usr/local/bin/linkem ] && [ -c /dev/net/tun ]; then
    local t
    for t in tun0 "$TUN_DOWN" "$TUN_UP"; do ip link del "$t" 2>/dev/null || true; done # tun0: the older layout
    for t in "$TUN_DOWN" "$TUN_UP"; do
      ip tuntap add dev "$t" mode tun
      ip link set "$t" up mtu 1500 txqueuelen 10000
    done
    ip route replace default dev "$TUN_UP" table $TABLE_UP
    ip route replace default dev "$TUN_DOWN" table $TABLE_DOWN
    # --napi on: linkem attaches with IFF_NAPI, so the TUNs' NAPI can be made threaded at run time. This container's
    # /sys is read-only: linkem says it cannot, and the kernel forwards what linkem writes inside linkem's write
    # (NAPI run in the softirq of that write), as without NAPI. `quiclab up` with QUICLAB_LINKEM_NAPI=on makes it
    # threaded from the host (lab/link/napi.py): the kernel then forwards in threads of its own.
    linkem run --tun-down "$TUN_DOWN" --tun-up "$TUN_UP" --downlink "$CLIENT_NET" --uplink "$SERVER_NET" \
      --listen "$LINKEM_LISTEN" --spin-us "${QUICLAB_LINKEM_SPIN_US:-200}" --napi on &
    linkem_pid=$!
    for _ in $(seq 1 50); do curl -fsS "http://127.0.0.1:${LINKEM_LISTEN##*:}/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
    path linkem
    echo "router: $(cif) (client side) <-> $(sif) (server side), shaper: linkem on $TUN_DOWN + $TUN_UP"
  else
    echo "router: $(cif) (client side) <-> $(sif) (server side), no linkem (kernel forwarding only)"
  fi
  trap 'kill ${linkem_pid:-} 2>/dev/null; exit 0' TERM INT
  if [ -n "${linkem_pid:-}" ]; then
    wait "$linkem_pid"
    echo "router: linkem exited" >&2
    exit 1
  fi
  sleep infinity &
  wait
}

path_show() {
  if [[ $(ip rule show pref 100) == *"lookup $TABLE_UP"* && $(ip rule show pref 101) == *"lookup $TABLE_DOWN"* ]]; then
    echo linkem
  else
    echo kernel
  fi
}

# A scratch veth interface (never up, carries no traffic; this kernel may lack the dummy driver) for probing qdiscs and checking tc syntax.
SCRATCH=qlscratch
scratch() { ip link show "$SCRATCH" >/dev/null 2>&1 || ip link add "$SCRATCH" type veth peer name "$SCRATCH-p"; }

netem_probe() {
  scratch
  if tc qdisc replace dev "$SCRATCH" root netem delay 1ms 2>/dev/null; then
    tc qdisc del dev "$SCRATCH" root 2>/dev/null || true
    return 0
  fi
  return 3
}

tc_check() {
  # Replace the device argument with the scratch interface and run the command; print tc's own error.
  scratch
  local args=() prev=
  for a in "$@"; do
    if [ "$prev" = dev ]; then args+=("$SCRATCH"); else args+=("$a"); fi
    prev=$a
  done
  local rc=0
  tc "${args[@]}" || rc=$?
  tc qdisc del dev "$SCRATCH" root 2>/dev/null || true
  return $rc
}

check() {
  # Outputs are read whole before they are matched: `producer | grep -q` under pipefail fails the check now and
  # then (exit 141) when grep exits at its first match and the producer is still writing (SIGPIPE).
  cif >/dev/null && sif >/dev/null
  [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ]
  [[ $(nft list chain inet quiclab forward) == *accept* ]]
  if [ -x /usr/local/bin/linkem ] && [ -c /dev/net/tun ]; then
    curl -fsS "http://127.0.0.1:${LINKEM_LISTEN##*:}/healthz" >/dev/null
    ip link show "$TUN_DOWN" >/dev/null && ip link show "$TUN_UP" >/dev/null
    [[ $(ip route show table $TABLE_UP) == *"dev $TUN_UP"* && $(ip route show table $TABLE_DOWN) == *"dev $TUN_DOWN"* ]]
  fi
}

case "${1:-}" in
  start) start ;;
  check) check ;;
  ifaces) echo "client=$(cif) server=$(sif)" ;;
  forwarding) [[ ${2:-} =~ ^(on|off)$ ]] || { echo "usage: quiclab-router forwarding on|off" >&2; exit 2; }; forwarding "$2" ;;
  path)
    if [ -z "${2:-}" ]; then path_show
    else [[ $2 =~ ^(linkem|kernel)$ ]] || { echo "usage: quiclab-router path [linkem|kernel]" >&2; exit 2; }; path "$2"; fi ;;
  netem-probe) netem_probe ;;
  tc-check) shift; tc_check "$@" ;;
  offloads) offloads ;;
  endpoint-route) shift; endpoint_route "$@" ;;
  *) sed -n '2,19p' "$0" >&2; exit 2 ;;
esac
