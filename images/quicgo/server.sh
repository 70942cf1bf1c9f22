#!/bin/bash
# quiclab server-quicgo start-up (the endpoint contract, docs/implementations.md): quic-go's HTTP/3 server on
# ${PORT:-443}/udp, serving /srv/www (the objects under /obj/) with the key and certificate the pki one-shot made;
# QLOGDIR, if set, gets one qlog per connection. Its congestion control is fixed (quic-go's Reno).
set -euo pipefail
test -s /pki/quic-go/cert.pem || { echo "quiclab-server-quicgo: no certificate in /pki/quic-go (the pki one-shot makes it)" >&2; exit 1; }
exec quiclab-quicgo server
