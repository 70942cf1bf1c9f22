#!/bin/bash
# quiclab-pki: the lab's one CA and a certificate for every server (run once per `up` by the one-shot `pki`
# service; the CA's key never leaves this run). Writes the CA certificate to /certs/ca.pem (the clients' trust,
# mounted read-only by them) and each server's key and certificate to /pki/NAME/{key,cert}.pem (mounted
# read-only by the servers only). Idempotent: if every certificate is there, signed by /certs/ca.pem, valid for
# another day and for its names, nothing changes (running servers keep working).
#   QUICLAB_PKI_SERVERS="nginx=server.quiclab,10.71.2.10 ngtcp2=ngtcp2.quiclab,10.71.2.11 ..."
set -euo pipefail
servers=${QUICLAB_PKI_SERVERS:?QUICLAB_PKI_SERVERS is not set}

current() {
  [ -s /certs/ca.pem ] || return 1
  for entry in $servers; do
    local name=${entry%%=*} dns=${entry#*=}; dns=${dns%%,*}
    local cert=/pki/$name/cert.pem
    [ -s "$cert" ] && [ -s "/pki/$name/key.pem" ] || return 1
    openssl verify -CAfile /certs/ca.pem "$cert" >/dev/null 2>&1 || return 1
    openssl x509 -in "$cert" -noout -checkend 86400 >/dev/null || return 1
    openssl x509 -in "$cert" -noout -checkhost "$dns" | grep -q 'does match' || return 1
  done
}
if current; then echo "quiclab-pki: certificates are current"; exit 0; fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=quiclab lab CA $(date -u +%Y%m%dT%H%M%SZ)" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
for entry in $servers; do
  name=${entry%%=*}; names=${entry#*=}
  san=""
  IFS=, read -ra parts <<<"$names"
  for n in "${parts[@]}"; do
    if [[ $n =~ ^[0-9.]+$ ]]; then san+="IP:$n,"; else san+="DNS:$n,"; fi
  done
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${parts[0]}" \
    -keyout "$work/$name.key" -out "$work/$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "${san%,}" >"$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 30 \
    -extfile "$work/$name.ext" -out "$work/$name.pem" 2>/dev/null
  mkdir -p "/pki/$name"; chmod 0755 "/pki/$name"
  install -m 0600 "$work/$name.key" "/pki/$name/key.pem.tmp" && mv "/pki/$name/key.pem.tmp" "/pki/$name/key.pem"
  install -m 0644 "$work/$name.pem" "/pki/$name/cert.pem.tmp" && mv "/pki/$name/cert.pem.tmp" "/pki/$name/cert.pem"
  echo "quiclab-pki: $name: ${san%,}"
done
chmod 0755 /pki
install -m 0644 "$work/ca.pem" /certs/ca.pem.tmp && mv /certs/ca.pem.tmp /certs/ca.pem
