#!/bin/bash
# quiclab-pki: the lab's CA and a certificate for every server (run once per `up` by the one-shot `pki` service;
# a CA's key never leaves the run that made it). Writes the CA certificates to /certs/ca.pem (the clients' trust,
# mounted read-only by them) and each server's key and certificate to /pki/NAME/{key,cert}.pem (mounted
# read-only by the servers only). Idempotent: a server whose certificate is there, signed by a CA in
# /certs/ca.pem, valid for another day and for its names, keeps it (a running server keeps working).
#   QUICLAB_PKI_SERVERS="nginx=server.quiclab,10.71.2.10 ngtcp2=ngtcp2.quiclab,10.71.2.11 ..."
# Only the servers without a good certificate get one, from a new CA whose certificate is added to /certs/ca.pem
# (a server added to a running lab gets its certificate without invalidating the others' that the running servers
# hold in memory); CA certificates that have expired are dropped from it. If no server has a good certificate,
# /certs/ca.pem starts over with the one new CA.
set -euo pipefail
servers=${QUICLAB_PKI_SERVERS:?QUICLAB_PKI_SERVERS is not set}

good() { # NAME DNS: the server's certificate and key are there, trusted, valid for another day and for DNS
  local name=$1 dns=$2 cert=/pki/$1/cert.pem
  [ -s /certs/ca.pem ] && [ -s "$cert" ] && [ -s "/pki/$name/key.pem" ] || return 1
  openssl verify -CAfile /certs/ca.pem "$cert" >/dev/null 2>&1 || return 1
  openssl x509 -in "$cert" -noout -checkend 86400 >/dev/null || return 1
  openssl x509 -in "$cert" -noout -checkhost "$dns" | grep -q 'does match'
}

todo=() total=0
for entry in $servers; do
  name=${entry%%=*} dns=${entry#*=}; dns=${dns%%,*}
  total=$((total + 1))
  good "$name" "$dns" || todo+=("$entry")
done
if [ ${#todo[@]} = 0 ]; then echo "quiclab-pki: certificates are current"; exit 0; fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
umask 077
# The CA certificates to keep: those in /certs/ca.pem that have not expired, unless every server needs a new one.
if [ ${#todo[@]} -lt "$total" ] && [ -s /certs/ca.pem ]; then
  awk -v dir="$work" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (dir "/old-ca-" n ".pem") }' /certs/ca.pem
  for f in "$work"/old-ca-*.pem; do
    [ -e "$f" ] || continue
    if openssl x509 -in "$f" -noout -checkend 0 >/dev/null 2>&1; then cat "$f" >>"$work/bundle.pem"; fi
  done
fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=quiclab lab CA $(date -u +%Y%m%dT%H%M%SZ)" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
cat "$work/ca.pem" >>"$work/bundle.pem"
for entry in "${todo[@]}"; do
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
install -m 0644 "$work/bundle.pem" /certs/ca.pem.tmp && mv /certs/ca.pem.tmp /certs/ca.pem
echo "quiclab-pki: /certs/ca.pem holds $(grep -c 'BEGIN CERTIFICATE' /certs/ca.pem) CA certificate(s)"
