#!/usr/bin/env bash
# quiclab set-up: installs what is missing (Docker engine, Compose v2, uv, just), tunes the host for QUIC,
# installs the Python environment, builds the images and brings the lab up. Idempotent: a second run only checks.
#
#   bash scripts/setup.sh            set up, bring the lab up and run the default job
#   QUICLAB_SETUP_NO_JOB=1 ...       set up and bring the lab up, no job
#   QUICLAB_SETUP_NO_UP=1 ...        set up and build, but do not start the lab
#   QUICLAB_SETUP_NO_BUILD=1 ...     bring the lab up with the images present (e.g. `docker load`ed in CI), no build
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
# shellcheck source=scripts/lib.sh
source "$here/scripts/lib.sh"

need_root() {
  if [ "$(id -u)" != 0 ]; then
    die "installing $1 needs root: run this script as root (or install $1 yourself and run it again)"
  fi
}

apt_updated=0
apt_install() {
  need_root "$*"
  if [ "$apt_updated" = 0 ]; then
    step "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  step "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- Docker engine -----------------------------------------------------------------------------------------
docker_up() { timeout 10 docker info >/dev/null 2>&1; }

start_dockerd_by_hand() {
  # No service manager (containers, minimal VMs): start containerd and dockerd in the background.
  mkdir -p /var/log/quiclab
  if ! pgrep -x containerd >/dev/null; then
    step "starting containerd (log: /var/log/quiclab/containerd.log)"
    nohup containerd >/var/log/quiclab/containerd.log 2>&1 &
    for _ in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done
  fi
  if ! pgrep -x dockerd >/dev/null; then
    step "starting dockerd (log: /var/log/quiclab/dockerd.log)"
    nohup dockerd --containerd=/run/containerd/containerd.sock >/var/log/quiclab/dockerd.log 2>&1 &
  fi
}

ensure_docker() {
  if docker_up; then ok "Docker engine reachable ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"; return; fi
  if ! command -v dockerd >/dev/null; then
    apt_install docker.io iptables
  fi
  if [ -d /run/systemd/system ]; then
    step "starting docker with systemctl"
    systemctl start docker || true
  fi
  docker_up || start_dockerd_by_hand
  for _ in $(seq 1 60); do docker_up && break; sleep 1; done
  docker_up || die "Docker engine did not come up: see /var/log/quiclab/dockerd.log"
  ok "Docker engine started ($(docker version -f '{{.Server.Version}}'))"
}

# The Debian mirror the host's apt already uses (so images and private apt directories use it too).
debian_mirror() {
  local m
  m=$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } \
    | sed -nE 's/^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)(https?:\/\/[^ ]*\/debian\/?)([[:space:]].*)?$/\3/p' | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

# --- Compose v2 -----------------------------------------------------------------------------------------------
ensure_compose() {
  if docker compose version >/dev/null 2>&1; then ok "$(docker compose version | head -1)"; return; fi
  need_root "Docker Compose v2"
  command -v dpkg-deb >/dev/null || die "dpkg-deb is missing; install Docker Compose v2 yourself"
  # Compose v2 is packaged in Debian trixie; fetch that one package into a private apt directory so the host's
  # own package set is left alone, and install only its CLI plugin binary.
  step "fetching Docker Compose v2 from Debian trixie (private apt directory, host packages untouched)"
  local d=/var/cache/quiclab/apt-trixie
  mkdir -p "$d"/{etc/apt/sources.list.d,etc/apt/preferences.d,var/lib/apt/lists/partial,var/cache/apt/archives/partial,var/lib/dpkg,deb}
  touch "$d/var/lib/dpkg/status"
  local mirror
  mirror=$(debian_mirror)
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" >"$d/etc/apt/sources.list"
  local opts=(-o "Dir=$d" -o "Dir::State::status=$d/var/lib/dpkg/status" -o "Dir::Etc::SourceList=$d/etc/apt/sources.list"
    -o "Dir::Etc::SourceParts=$d/etc/apt/sources.list.d" -o "Dir::Etc::Preferences=$d/etc/apt/preferences"
    -o "Dir::Etc::PreferencesParts=$d/etc/apt/preferences.d" -o "APT::Architecture=$(dpkg --print-architecture)")
  apt-get "${opts[@]}" update -qq
  (cd "$d/deb" && apt-get "${opts[@]}" -o APT::Sandbox::User=root download docker-compose >/dev/null)
  rm -rf "$d/x" && mkdir -p "$d/x"
  dpkg-deb -x "$d"/deb/docker-compose_*.deb "$d/x"
  install -D -m 0755 "$d/x/usr/libexec/docker/cli-plugins/docker-compose" /usr/local/lib/docker/cli-plugins/docker-compose
  docker compose version >/dev/null 2>&1 || die "docker compose still not working after installing the plugin"
  ok "$(docker compose version | head -1) installed to /usr/local/lib/docker/cli-plugins"
}

# --- base images ----------------------------------------------------------------------------------------------------
# Every image builds FROM one Debian base, one suite per image (suites are never mixed inside an image):
#   QUICLAB_BASE_IMAGE      trixie: every image but the two below
#   QUICLAB_BASE_IMAGE_SID  unstable: server-nginx130 (nginx 1.30) and client-sid (curl 8.23)
# Each is debian:<suite>-slim where a registry can be reached, otherwise a local image made by debootstrap +
# docker import (cached: made once). The choice is written to .env, which docker compose reads, so a plain
# `docker compose build/up` uses it too.
#
# ensure_base SUITE REGISTRY_IMAGE LOCAL_IMAGE ENV_NAME
ensure_base() {
  local suite=$1 remote=$2 local_image=$3 var=$4 base
  if [ -n "${!var:-}" ]; then
    base=${!var}
  elif docker image inspect "$remote" >/dev/null 2>&1; then
    base=$remote
  elif docker image inspect "$local_image" >/dev/null 2>&1; then
    base=$local_image
  elif timeout 60 docker pull -q "$remote" >/dev/null 2>&1; then
    base=$remote
  else
    step "no registry reachable for $remote: building $local_image with debootstrap (once, ~1 min)"
    command -v debootstrap >/dev/null || apt_install debootstrap
    local mirror log=/var/log/quiclab-debootstrap-$suite.log
    mirror=$(debian_mirror)
    rootfs=$(mktemp -d /var/tmp/quiclab-rootfs.XXXXXX)
    trap 'rm -rf "${rootfs:?}"' EXIT
    debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$log" 2>&1 \
      || die "debootstrap $suite failed: see $log"
    # the images' apt must reach the same mirror the host uses
    echo "deb $mirror $suite main" >"$rootfs/etc/apt/sources.list"
    rm -f "$rootfs/etc/apt/sources.list.d/"*.sources
    if [ "$suite" = unstable ]; then
      # unstable's Release file carries a Valid-Until date (a week ahead); a mirror that serves a snapshot of it
      # is "expired" for apt. Baked in here so the Dockerfiles need no flags.
      printf '%s\n' '// quiclab (scripts/setup.sh): the mirror may serve a snapshot of unstable whose Release has expired' \
        'Acquire::Check-Valid-Until "false";' >"$rootfs/etc/apt/apt.conf.d/99quiclab-valid-until"
    fi
    tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$local_image" >/dev/null
    rm -rf "$rootfs"; trap - EXIT
    base=$local_image
  fi
  local line="$var=$base"
  if [ "$(grep -s "^$var=" .env)" != "$line" ]; then
    { grep -sv "^$var=" .env || true; echo "$line"; } >.env.tmp && mv .env.tmp .env
  fi
  ok "base image ($suite): $base"
}

ensure_base_images() {
  ensure_base trixie debian:trixie-slim quiclab/base:trixie QUICLAB_BASE_IMAGE
  # Debian unstable is optional (only nginx and curl from unstable build on it; lab/optional.py): when it cannot be
  # had, say so in one line and go on; `quiclab build` then reports that part unavailable and the lab runs without.
  ( ensure_base unstable debian:sid-slim quiclab/base:sid QUICLAB_BASE_IMAGE_SID ) \
    || warn "no Debian unstable base (see above): the lab comes up without nginx and curl from unstable"
  # The router's build stage fetches crates from crates.io: give it the CAs this host trusts (some networks
  # inspect TLS with their own CA). Copied only when it changed, so the build cache holds.
  local bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
  if [ -s "$bundle" ] && ! cmp -s "$bundle" linkem/.build-ca/ca.crt; then
    mkdir -p linkem/.build-ca && cp "$bundle" linkem/.build-ca/ca.crt
  fi
}

# --- uv and just ---------------------------------------------------------------------------------------------------
ensure_tools() {
  local tools=/opt/quiclab-tools
  local missing=()
  command -v uv >/dev/null || missing+=(uv)
  command -v just >/dev/null || missing+=(rust-just)
  if [ ${#missing[@]} = 0 ]; then ok "uv $(uv --version | cut -d' ' -f2), just $(just --version | cut -d' ' -f2)"; return; fi
  need_root "${missing[*]}"
  if [ ! -x "$tools/bin/pip" ]; then
    python3 -m venv "$tools" 2>/dev/null || { apt_install python3-venv; rm -rf "$tools"; python3 -m venv "$tools"; }
  fi
  step "installing ${missing[*]} from PyPI into $tools"
  "$tools/bin/pip" install -q "${missing[@]}"
  for b in uv uvx just; do [ -x "$tools/bin/$b" ] && ln -sf "$tools/bin/$b" /usr/local/bin/$b; done
  hash -r
  ok "uv $(uv --version | cut -d' ' -f2), just $(just --version | cut -d' ' -f2)"
}

# --- host sysctls ---------------------------------------------------------------------------------------------------
ensure_sysctls() {
  # QUIC endpoints ask for large UDP socket buffers; the kernel caps them with these host-wide limits
  # (they are not per network namespace, so they must be set on the host). rmem_default is the receive buffer of
  # every UDP socket that does not ask for one (curl's and gtlsclient's do not): at 212992 bytes a client that is
  # descheduled for ~10 ms on this 2-core machine drops 100 Mbit/s of QUIC in its own socket, losses the link did
  # not make (measured: UdpRcvbufErrors in the client, goodput 0.86-0.88 of the rate instead of 0.91-0.92).
  local want=16777216 want_default=8388608 changed=0 k v
  for k in net.core.rmem_max net.core.wmem_max net.core.rmem_default; do
    v=$want; [ "$k" = net.core.rmem_default ] && v=$want_default
    if [ "$(sysctl -n "$k")" -lt "$v" ]; then
      if [ "$(id -u)" = 0 ] && sysctl -qw "$k=$v" 2>/dev/null; then
        changed=1
      else
        warn "$k is $(sysctl -n "$k") (< $v): QUIC throughput will be capped; run: sysctl -w $k=$v"
      fi
    fi
  done
  local now="rmem_max=$(sysctl -n net.core.rmem_max) wmem_max=$(sysctl -n net.core.wmem_max)"
  now+=" rmem_default=$(sysctl -n net.core.rmem_default)"
  if [ "$changed" = 1 ]; then ok "raised the host's UDP buffer sizes for QUIC: $now"
  else ok "UDP buffer sizes: $now"; fi
  # Competing TCP flows (docs/adverse.md) choose their congestion control per socket (iperf3 -C), which an endpoint
  # without CAP_NET_ADMIN may do only for the host-wide allowed list (kernel default: reno + the default, bbr here).
  local allowed cc
  allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
  for cc in cubic bbr; do
    if grep -qw "$cc" <<<"$(sysctl -n net.ipv4.tcp_available_congestion_control)" && ! grep -qw "$cc" <<<"$allowed"; then
      allowed="$allowed $cc"
    fi
  done
  if [ "$allowed" != "$(sysctl -n net.ipv4.tcp_allowed_congestion_control)" ]; then
    if [ "$(id -u)" = 0 ] && sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed" 2>/dev/null; then
      ok "TCP congestion controls endpoints may choose: $allowed"
    else
      warn "competing TCP flows cannot choose their congestion control; run: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"$allowed\""
    fi
  fi
}

# --- Python environment ------------------------------------------------------------------------------------------------
ensure_python() {
  export UV_PYTHON_DOWNLOADS=never
  uv sync --frozen --quiet
  ok "Python environment ready ($(uv run --frozen python -c 'import sys; print(sys.version.split()[0])'))"
}

ensure_docker
ensure_compose
ensure_tools
ensure_sysctls
ensure_python
# The base images are only what images build FROM: with QUICLAB_SETUP_NO_BUILD=1 nothing is built (the lab's images
# are there already, e.g. loaded into scripts/vm.sh's guest, where a debootstrap under emulation took minutes)
[ "${QUICLAB_SETUP_NO_BUILD:-0}" = 1 ] || ensure_base_images
if [ "${QUICLAB_SETUP_NO_UP:-0}" = 1 ]; then
  uv run --frozen quiclab build
elif [ "${QUICLAB_SETUP_NO_BUILD:-0}" = 1 ]; then
  uv run --frozen quiclab up
else
  uv run --frozen quiclab up --build
fi

# The default job: one verified transfer per protocol through the router, then the default loss sweep
# (Connectify's: 10 MB, 160 ms RTT, 5 Mbit/s, loss 0-5 %) on parallel labs (--parallel auto: the number of labs
# this host's cores carry at the plan's link rate; every run passes the fidelity guard). --reuse makes a second
# run cheap: it shows the finished sweep (or resumes an unfinished one) instead of measuring everything again.
if [ "${QUICLAB_SETUP_NO_UP:-0}" != 1 ] && [ "${QUICLAB_SETUP_NO_JOB:-0}" != 1 ]; then
  uv run --frozen quiclab shape --clear >/dev/null
  uv run --frozen quiclab run --size 1MB
  uv run --frozen quiclab sweep loss --reuse --parallel auto
fi
