#!/bin/bash
# quiclab server-haproxy start-up: the static file server for the shared objects on loopback (once per container),
# then HAProxy with the key and certificate the `pki` one-shot made (/pki/haproxy, read-only).
#   PORT  the listening port, TCP and UDP (default 443)
#   CC    HAProxy's QUIC congestion control on the QUIC bind line (quic-cc-algo; default: HAProxy's own, cubic)
# Each instance's configuration is rendered to /tmp/haproxy-PORT.cfg; its stats socket is /tmp/haproxy-PORT.sock
# (`show quic` there lists its QUIC connections).
set -euo pipefail
port=${PORT:-443}
test -s /pki/haproxy/cert.pem || { echo "quiclab-server-haproxy: no certificate in /pki/haproxy (the pki one-shot makes it)" >&2; exit 1; }
pgrep -x lighttpd >/dev/null || lighttpd -f /etc/quiclab/lighttpd.conf  # daemonizes
pem=/tmp/haproxy.pem  # HAProxy reads certificate and key from one file
[ -s "$pem" ] || { umask 077; cat /pki/haproxy/cert.pem /pki/haproxy/key.pem >"$pem"; }
cc=""
case "${CC:-}" in
  "" | native | default) ;;
  reno | newreno) cc=" quic-cc-algo newreno" ;;
  cubic) cc=" quic-cc-algo cubic" ;;
  *) echo "quiclab-server-haproxy: CC must be cubic or newreno, got '${CC}'" >&2; exit 2 ;;
esac
cfg=/tmp/haproxy-$port.cfg
cat >"$cfg" <<CFG
global
    limited-quic
    stats socket /tmp/haproxy-$port.sock mode 600 level admin
    tune.bufsize 65536
    ssl-default-bind-options ssl-min-ver TLSv1.3
defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout client-fin 5s
frontend web
    bind :$port ssl crt $pem alpn h2,http/1.1
    bind quic4@:$port ssl crt $pem alpn h3$cc
    http-request return status 204 if { path /healthz }
    http-response set-header Alt-Svc 'h3=":$port"; ma=86400'
    http-response set-header Cache-Control no-store
    default_backend files
backend files
    server files 127.0.0.1:8080
CFG
exec haproxy -W -db -f "$cfg"
