#!/bin/bash
# quiclab server start-up for the Rust stacks (the endpoint contract, docs/implementations.md), installed as
# quiclab-server-quinn / quiclab-server-quiche: the stack's HTTP/3 file server on ${PORT:-443}/udp, serving
# /srv/www (the objects under /obj/) with the key and certificate the pki one-shot made in /pki/<stack>/. CC picks
# the library's congestion control (cubic, both libraries' default, when unset), passed on the command line as
# --cc=..., where the lab reads back the one in force; QLOGDIR, if set, gets one qlog per connection.
set -euo pipefail
stack=${0##*/quiclab-server-}
test -s "/pki/$stack/cert.pem" || { echo "quiclab-server-$stack: no certificate in /pki/$stack (the pki one-shot makes it)" >&2; exit 1; }
exec "quiclab-$stack" server "--cc=${CC:-cubic}"
