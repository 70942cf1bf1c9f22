#!/bin/sh
# quiclab-kwik server|fetch|version: the kwik stack's one command (images/kwik/src: lab.quiclab.kwik), run on the
# image's JRE with its jars (/opt/quiclab-kwik: quiclab-kwik.jar and lib/ as Maven resolved them) and the JVM's
# defaults. `server`: the HTTP/3 file server; `fetch`: the download client (its contract is in the environment);
# `version`: the library versions read from the jars.
case "${1:-}" in
  server) main=lab.quiclab.kwik.Server ;;
  fetch) main=lab.quiclab.kwik.Fetch ;;
  version) main=lab.quiclab.kwik.Contract ;;
  *) echo "quiclab-kwik: unknown command \"${1:-}\": allowed are server, fetch, version" >&2; exit 2 ;;
esac
shift
exec java -cp '/opt/quiclab-kwik/quiclab-kwik.jar:/opt/quiclab-kwik/lib/*' "$main" "$@"
