#!/usr/bin/env bash
# quiclab in a VM with a stock Debian kernel (sch_netem included): the lab's netem path tested on a host whose own
# kernel lacks netem (docs/link.md, "netem in a VM").
#
#   scripts/vm.sh build                 build (or find cached) the VM image
#   scripts/vm.sh check                 exit 0 if QEMU can run here (installing it if missing), else 2 saying why
#   scripts/vm.sh run [--head] -- CMD…  boot the VM, move the lab's images and the project in, run CMD in the
#                                       project inside it; its output, exit code and new results/ folders come back
#
# The image (Debian trixie, its stock kernel, Docker, Compose; recipe scripts/vm-image.sh) is cached under
# $QUICLAB_VM_CACHE (default /var/cache/quiclab/vm) and rebuilt only when the recipe changes. The guest disk is a
# qcow2 overlay on it that persists between runs (the lab's images loaded into the guest's Docker, uv's cache): a
# host image is saved (docker save) once per image ID and loaded into the guest only when the guest lacks that ID.
# Files move through a virtio-9p share; the guest runs the job at boot and powers off. The project is the worktree's
# tracked and untracked-but-not-ignored files (--head: `git archive HEAD`, its commit recorded by the guest's sweeps, so
# their folders can be published).
#
# Environment: QUICLAB_VM_SMP (vCPUs, default 2), QUICLAB_VM_CPUS (host cores QEMU is pinned to with taskset, e.g.
# "1"; default none), QUICLAB_VM_MEM (MiB, default 4096), QUICLAB_VM_ACCEL (auto|kvm|tcg; auto tries KVM once per
# host kernel and QEMU version and falls back to TCG when the guest does not come up), QUICLAB_VM_TIMEOUT (seconds
# for the whole job, default 3600), QUICLAB_VM_MIRROR (Debian mirror for the image, default the host's apt mirror),
# QUICLAB_VM_PROFILES (the lab's optional parts to move in as well, e.g. sid,browser; default none),
# QUICLAB_VM_SLOW (the guest's QUICLAB_SLOW under TCG, default 10: every deadline of the lab's own machinery, a
# `docker exec`, a readiness wait, a tshark read, that many times longer, lab/config.py `deadline`; 1 under KVM).
# Exit: the command's exit code; 2 with one line for a bad input or what the host lacks; 3 when the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$here/scripts/lib.sh"

cache=${QUICLAB_VM_CACHE:-/var/cache/quiclab/vm}
smp=${QUICLAB_VM_SMP:-2}
cpus=${QUICLAB_VM_CPUS:-}
mem=${QUICLAB_VM_MEM:-4096}
accel=${QUICLAB_VM_ACCEL:-auto}
timeout_s=${QUICLAB_VM_TIMEOUT:-3600}
kvm_boot_s=${QUICLAB_VM_KVM_BOOT_S:-90}
profiles=${QUICLAB_VM_PROFILES:-}
slow_tcg=${QUICLAB_VM_SLOW:-10}
need_gb_build=6   # free space for building the image and saving the lab's images (sparse disk, tars)
need_gb_run=4

vm_fail() { printf '%serror:%s %s\n' "$c_err" "$c_off" "$*" >&2; exit 3; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

usage() { die "usage: scripts/vm.sh check | build | run [--head] -- COMMAND... (got: ${*:-nothing})"; }

# --- checks -----------------------------------------------------------------------------------------------------
check_settings() {
  [[ $smp =~ ^[1-9][0-9]*$ ]] || die "QUICLAB_VM_SMP=$smp: a positive number of vCPUs is allowed"
  [[ $mem =~ ^[1-9][0-9]*$ && $mem -ge 1024 ]] || die "QUICLAB_VM_MEM=$mem: MiB, at least 1024, is allowed"
  [[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "QUICLAB_VM_TIMEOUT=$timeout_s: a positive number of seconds is allowed"
  case $accel in auto|kvm|tcg) ;; *) die "QUICLAB_VM_ACCEL=$accel: allowed are auto, kvm, tcg";; esac
  [[ $slow_tcg =~ ^[1-9][0-9]*$ && $slow_tcg -le 100 ]] \
    || die "QUICLAB_VM_SLOW=$slow_tcg: a whole number from 1 to 100 is allowed"
  if [ -n "$cpus" ]; then
    [[ $cpus =~ ^[0-9]+([,-][0-9]+)*$ ]] || die "QUICLAB_VM_CPUS=$cpus: a CPU list such as 1 or 0-1 is allowed"
    taskset -c "$cpus" true 2>/dev/null || die "QUICLAB_VM_CPUS=$cpus: not CPUs of this host ($(nproc) cores)"
  fi
}

ensure_tools() {
  local missing=()
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  command -v qemu-img >/dev/null || missing+=(qemu-utils)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
              >/dev/null 2>&1; } \
      || die "no QEMU here and installing ${missing[*]} with apt-get failed"
  else
    die "no QEMU here (missing: ${missing[*]}) and no way to install it (needs root and apt-get)"
  fi
}

check_disk() {
  mkdir -p "$cache" 2>/dev/null || die "cannot create the VM cache $cache (QUICLAB_VM_CACHE)"
  local free_gb
  free_gb=$(df -Pk "$cache" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
  [ "$free_gb" -ge "$1" ] || die "not enough disk for the VM: ${free_gb} GB free under $cache, $1 GB needed"
}

# --- the image --------------------------------------------------------------------------------------------------
recipe_hash() { sha256sum "$here/scripts/vm-image.sh" | cut -c1-16; }

mirror() {
  [ -n "${QUICLAB_VM_MIRROR:-}" ] && { echo "$QUICLAB_VM_MIRROR"; return; }
  local m
  m=$(grep -hsoE '^(URIs:|deb) +https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
      | grep -v security | head -n 1 | awk '{ print $NF }')
  echo "${m:-http://deb.debian.org/debian}"
}

ensure_image() {
  img=$cache/image-$(recipe_hash)
  if [ -f "$img/rootfs.img" ]; then ok "VM image cached ($img)"; return; fi
  check_disk "$need_gb_build"
  [ "$(id -u)" = 0 ] || die "building the VM image needs root (debootstrap, chroot)"
  local t0; t0=$(now)
  step "building the VM image (Debian trixie, stock kernel, Docker; $(mirror))"
  mkdir -p "$img"
  ${cpus:+taskset -c "$cpus"} bash "$here/scripts/vm-image.sh" "$img" "$(mirror)" \
    || { rm -rf "$img"; vm_fail "building the VM image failed (scripts/vm-image.sh, see above)"; }
  for f in vmlinuz initrd.img rootfs.img; do mv "$img/$f.new" "$img/$f"; done
  # older images (another recipe) and their overlays are no longer used
  find "$cache" -maxdepth 1 \( -name 'image-*' -o -name 'state-*.qcow2' \) ! -name "image-$(recipe_hash)" \
    ! -name "state-$(recipe_hash).qcow2" -exec rm -rf {} +
  ok "VM image built in $(secs "$t0") s ($img)"
}

# --- moving things in -------------------------------------------------------------------------------------------
share_images() {
  local refs t0 n=0 ref
  # the images of the lab's services (docker-compose.yml) without the optional parts, unless QUICLAB_VM_PROFILES
  # names some (e.g. sid,browser): the guest loads what it runs
  refs=$(cd "$here" && COMPOSE_PROFILES=$profiles docker compose config --images 2>/dev/null | sort -u) \
    || die "docker compose cannot read the lab's docker-compose.yml here (needs Docker and Compose v2: scripts/setup.sh)"
  for ref in $refs; do
    docker image inspect "$ref" >/dev/null 2>&1 && continue
    [[ $ref == quiclab/* ]] || continue  # a pulled image (Grafana) the lab does without
    die "the lab image $ref is not on this host: run scripts/setup.sh first (docker image ls | grep quiclab)"
  done
  refs=$(for ref in $refs; do docker image inspect "$ref" >/dev/null 2>&1 && echo "$ref"; done)
  mkdir -p "$cache/images"
  t0=$(now)
  : >"$share/images.list"
  local id keep=()
  for ref in $refs; do
    id=$(docker image inspect -f '{{.Id}}' "$ref")
    local tar=$cache/images/${id#sha256:}.tar
    if [ ! -f "$tar" ]; then
      docker save -o "$tar.tmp" "$ref" || { rm -f "$tar.tmp"; vm_fail "docker save $ref failed"; }
      mv "$tar.tmp" "$tar"; n=$((n + 1))
    fi
    echo "$ref $id" >>"$share/images.list"
    keep+=("${id#sha256:}.tar")
  done
  for tar in "$cache"/images/*.tar; do  # images not moved in this time (gone from the host, or not selected)
    [[ " ${keep[*]} " == *" ${tar##*/} "* ]] || rm -f "$tar"
  done
  ok "$(wc -l <"$share/images.list") lab images saved ($n now, $(secs "$t0") s)"
  docker_disk
}

# The guest's /var/lib/docker with those images, loaded on the host by a private dockerd (its own data root,
# socket, exec root; no networking) into an ext4 image: loading 3 GB of images inside an emulated guest took longer
# than the tests. Cached per set of image IDs; the guest gets a fresh qcow2 overlay on it every run.
# The private dockerd runs in a network namespace of its own (unshare --net): with --bridge=none, dockerd deletes
# any interface named docker0 it sees (moby's removeDefaultBridgeInterface), and in the host's namespace that was
# the host Docker's own bridge (2026-11-27: every later `docker run` on the default network failed).
docker_disk() {
  local key t0 tmp pid
  key=$(sha256sum "$share/images.list" | cut -c1-16)
  ddisk=$cache/docker-$key.img
  if [ ! -f "$ddisk" ]; then
    t0=$(now)
    check_disk "$need_gb_build"
    tmp=$(mktemp -d "$cache/dockerd.XXXXXX")
    dockerd_tmp=$tmp
    unshare --net -- dockerd --data-root "$tmp/root" --exec-root "$tmp/exec" --pidfile "$tmp/pid" \
      -H "unix://$tmp/sock" \
      --bridge=none --iptables=false --ip6tables=false --ip-masq=false --storage-driver=overlay2 \
      >"$tmp/log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do docker -H "unix://$tmp/sock" info >/dev/null 2>&1 && break; sleep 0.5; done
    docker -H "unix://$tmp/sock" info >/dev/null 2>&1 || vm_fail "a private dockerd for the guest's images did not start ($tmp/log)"
    while read -r _ id; do
      docker -H "unix://$tmp/sock" load -q -i "$cache/images/${id#sha256:}.tar" >/dev/null \
        || vm_fail "loading ${id:7:12} into the guest's Docker data root failed"
    done <"$share/images.list"
    stop_dockerd
    local mb; mb=$(du -sm "$tmp/root" | cut -f1)
    truncate -s "$(( mb + 8192 ))M" "$ddisk.tmp"
    mkfs.ext4 -q -F -d "$tmp/root" "$ddisk.tmp" || { rm -f "$ddisk.tmp"; vm_fail "mkfs.ext4 -d of the guest's Docker data root failed"; }
    rm -rf "$tmp"; dockerd_tmp=
    find "$cache" -maxdepth 1 -name 'docker-*.img' ! -name "docker-$key.img" -delete
    mv "$ddisk.tmp" "$ddisk"
    ok "the guest's Docker data root made on the host in $(secs "$t0") s (${mb} MB)"
  fi
  rundisk=$cache/run-docker.qcow2
  rm -f "$rundisk"
  qemu-img create -q -f qcow2 -b "$ddisk" -F raw "$rundisk" || vm_fail "qemu-img could not create $rundisk"
}

dockerd_pid=
dockerd_tmp=
stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  kill "$dockerd_pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" 2>/dev/null || true
  dockerd_pid=
  [ -n "$dockerd_tmp" ] && umount -R "$dockerd_tmp/exec" 2>/dev/null || true
}

share_project() {
  rm -f "$share/project.commit"
  if [ "$from_head" = 1 ]; then
    git -C "$here" archive --format=tar HEAD >"$share/project.tar"
    git -C "$here" rev-parse HEAD >"$share/project.commit"  # what the guest's sweeps record as their source
  else
    (cd "$here" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r ls -d 2>/dev/null \
      | tar -cf "$share/project.tar" --no-recursion -T -)
  fi
  [ -f "$here/.env" ] && cp "$here/.env" "$share/project.env"
  cp "$(command -v uv)" "$share/uv" || die "uv not found on this host (scripts/setup.sh installs it)"
  mkdir -p "$share/ca"
  cp /usr/local/share/ca-certificates/*.crt "$share/ca/" 2>/dev/null || true
}

write_job() {
  printf '%q ' "$@" >"$share/cmd"
  cat >"$share/job.sh" <<'EOF'
#!/bin/bash
# runs inside the guest (quiclab-job.service), output to /mnt/host/out/job.log
set -uo pipefail
h=/mnt/host
say() { echo "quiclab-vm: $*"; }
t() { cut -d' ' -f1 /proc/uptime; }
if ls $h/ca/*.crt >/dev/null 2>&1; then
  cp $h/ca/*.crt /usr/local/share/ca-certificates/ && update-ca-certificates >/dev/null 2>&1
fi
export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
export UV_CACHE_DIR=/var/cache/uv UV_PYTHON_PREFERENCE=only-system HOME=/root  # uv reads SSL_CERT_FILE
# how many times slower than a real host this guest is (scripts/vm.sh: QUICLAB_VM_SLOW under TCG, 1 under KVM)
export QUICLAB_SLOW=$(cat $h/slow 2>/dev/null || echo 1)
install -m 0755 $h/uv /usr/local/bin/uv
say "kernel $(uname -r), $(nproc) vCPUs, sch_netem: $(modprobe sch_netem 2>&1 && echo loaded || echo missing), QUICLAB_SLOW=$QUICLAB_SLOW"
for _ in $(seq 120); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { say "dockerd did not start"; exit 97; }
say "dockerd up at $(t) s after boot"
mountpoint -q /var/lib/docker || { say "the Docker data disk is not mounted"; exit 97; }
while read -r ref id; do
  [ "$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null)" = "$id" ] || { say "image $ref missing in the guest"; exit 97; }
done <$h/images.list
say "$(wc -l <$h/images.list) lab images in place"
rm -rf /root/quiclab && mkdir -p /root/quiclab && tar -xf $h/project.tar -C /root/quiclab || exit 97
grep -v '^COMPOSE_PROFILES=' $h/project.env >/root/quiclab/.env 2>/dev/null
cd /root/quiclab
# run --head: the tree is `git archive` of this commit, recorded as the source of what it measures
[ -f $h/project.commit ] && export QUICLAB_ARCHIVED_COMMIT=$(cat $h/project.commit)
touch /tmp/job-start
eval "set -- $(cat $h/cmd)"
say "running: $*"
"$@"
rc=$?
say "command exited $rc at $(t) s after boot"
mkdir -p $h/out/results
if [ -d results ]; then
  find results -mindepth 1 -maxdepth 1 -type d -newer /tmp/job-start -exec cp -r {} $h/out/results/ \;
fi
exit $rc
EOF
  chmod 0755 "$share/job.sh"
}

# --- booting ----------------------------------------------------------------------------------------------------
qemu_pid=
tail_pid=
cleanup() {
  stop_dockerd
  [ -n "$dockerd_tmp" ] && rm -rf "$dockerd_tmp"
  [ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill "$qemu_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$qemu_pid" 2>/dev/null || true
  fi
  qemu_pid=
}
interrupted() { cleanup; printf '%s!%s interrupted: %s\n' "$c_warn" "$c_off" "${1:-the VM was stopped}" >&2; exit 130; }

# A QEMU left by a scripts/vm.sh that was killed outright (SIGKILL: no trap ran). It does not hold the lock (QEMU
# gets no copy of its descriptor), so the lock is ours and the QEMU in the pid file, if it is this cache's, is stale.
stale_qemu() {
  local pid
  pid=$(cat "$cache/qemu.pid" 2>/dev/null) || return 0
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "file:$cache/console.log"; then
    warn "stopping a QEMU left running by an earlier scripts/vm.sh (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$cache/qemu.pid"
}

kvm_key() { echo "$(uname -r) $(qemu-system-x86_64 --version | head -n 1)"; }

start_qemu() {  # $1 = kvm|tcg
  local machine cpu
  if [ "$1" = kvm ]; then machine=q35,accel=kvm; cpu=host; else machine=q35,accel=tcg; cpu=max; fi
  rm -rf "$share/out"; mkdir -p "$share/out"
  # the lab's deadlines in the guest (QUICLAB_SLOW): an emulated CPU is several times slower than the host's
  if [ "$1" = kvm ]; then echo 1; else echo "$slow_tcg"; fi >"$share/slow"
  : >"$cache/console.log"
  ${cpus:+taskset -c "$cpus"} qemu-system-x86_64 -machine "$machine" -cpu "$cpu" -smp "$smp" -m "$mem" \
    -display none -monitor none -no-reboot -nodefaults -serial "file:$cache/console.log" \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "root=/dev/vda rw console=ttyS0 quiet panic=5" \
    -drive "file=$state,if=virtio,format=qcow2,cache=unsafe" \
    -drive "file=$rundisk,if=virtio,format=qcow2,cache=unsafe" \
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
    -virtfs "local,path=$share,mount_tag=quiclab,security_model=none,id=fs0" \
    -pidfile "$cache/qemu.pid" </dev/null >"$cache/qemu.log" 2>&1 9>&- &
  qemu_pid=$!
}

# Waits until the guest's job has started (it writes job.log); 1 if QEMU ended or the deadline passed first.
wait_up() {
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ -s "$share/out/job.log" ] && return 0
    kill -0 "$qemu_pid" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

boot() {
  state=$cache/state-$(recipe_hash).qcow2
  [ -f "$state" ] || qemu-img create -q -f qcow2 -b "$img/rootfs.img" -F raw "$state" \
    || vm_fail "qemu-img could not create the guest disk $state"
  local t0 verdict=$cache/kvm-verdict
  t0=$(now)
  used=tcg
  if [ "$accel" = kvm ] || { [ "$accel" = auto ] && [ -w /dev/kvm ] \
       && [ "$(cat "$verdict" 2>/dev/null)" != "no: $(kvm_key)" ]; }; then
    start_qemu kvm
    if wait_up "$kvm_boot_s"; then
      used=kvm; echo "yes: $(kvm_key)" >"$verdict"
    else
      cleanup
      [ "$accel" = kvm ] && vm_fail "the guest did not come up under KVM within ${kvm_boot_s} s (QUICLAB_VM_ACCEL=kvm)"
      echo "no: $(kvm_key)" >"$verdict"
      warn "KVM did not bring the guest up within ${kvm_boot_s} s (nested KVM here): using TCG (remembered)"
    fi
  fi
  if [ "$used" = tcg ]; then
    start_qemu tcg
    wait_up 600 || vm_fail "the guest did not come up under TCG within 600 s: see $cache/console.log"
  fi
  ok "guest up under ${used^^} in $(secs "$t0") s (${smp} vCPUs${cpus:+, pinned to host CPU $cpus}, ${mem} MiB, QUICLAB_SLOW=$(cat "$share/slow"))"
}

run() {
  local t_all; t_all=$(now)
  check_settings
  ensure_tools
  check_disk "$need_gb_run"
  exec 9>"$cache/.lock"
  flock -n 9 || die "another scripts/vm.sh is using $cache (one VM at a time)"
  stale_qemu
  ensure_image
  share=$cache/share
  rm -rf "$share"; mkdir -p "$share"
  trap interrupted INT TERM
  trap cleanup EXIT
  share_images
  share_project
  write_job "$@"
  boot
  tail -n +1 -F "$share/out/job.log" 2>/dev/null &
  tail_pid=$!
  local deadline=$(( $(date +%s) + timeout_s ))
  while kill -0 "$qemu_pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      cleanup; vm_fail "the job did not finish within ${timeout_s} s (QUICLAB_VM_TIMEOUT): the VM was stopped"
    fi
    sleep 1
  done
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=
  sleep 0.5; kill "$tail_pid" 2>/dev/null || true; tail_pid=
  if [ ! -f "$share/out/rc" ]; then
    # a Ctrl-C that reached QEMU while this script's own SIGINT is ignored (a `nohup ... &` launch: no trap runs)
    local sig; sig=$(sed -n 's/.*terminating on signal \([0-9]*\).*/\1/p' "$cache/qemu.log" 2>/dev/null | head -n 1)
    [ -n "$sig" ] && interrupted "QEMU was stopped by signal $sig, the job did not finish"
    # a guest kernel panic reboots it after 5 s (panic=5), which ends QEMU (-no-reboot): not left to the timeout
    local panic; panic=$(grep -a -m1 -o 'Kernel panic - not syncing: .*' "$cache/console.log" 2>/dev/null | tr -d '\r')
    [ -n "$panic" ] && vm_fail "the guest's kernel panicked ($panic; $cache/console.log), the job did not finish; \
the folders it had written are on the guest disk $state until the next run (docs/link.md, netem in a VM)"
    vm_fail "the guest stopped without the job's exit code: see $cache/console.log"
  fi
  local rc; rc=$(cat "$share/out/rc")
  if [ -d "$share/out/results" ] && [ -n "$(ls -A "$share/out/results")" ]; then
    mkdir -p "$here/results/vm"
    cp -r "$share/out/results/." "$here/results/vm/"
    ok "result folders brought back to results/vm/: $(ls "$share/out/results" | tr '\n' ' ')"
  fi
  cp "$share/out/job.log" "$cache/last-job.log"
  if [ "$rc" = 0 ]; then ok "the command passed in the VM ($used; $(secs "$t_all") s in all)"
  else printf '%serror:%s the command exited %s inside the VM (log: %s)\n' "$c_err" "$c_off" "$rc" \
         "$cache/last-job.log" >&2; fi
  exit "$rc"
}

from_head=0
case "${1:-}" in
  check) shift; [ $# -eq 0 ] || usage "$@"; check_settings; ensure_tools
         qemu-system-x86_64 -accel help 2>/dev/null | grep -qx tcg \
           || die "this QEMU cannot emulate a CPU (no TCG accelerator)"
         ok "QEMU can run here ($(qemu-system-x86_64 --version | head -n 1))" ;;
  build) shift; [ $# -eq 0 ] || usage "$@"; check_settings; ensure_tools; mkdir -p "$cache"
         exec 9>"$cache/.lock"; flock -n 9 || die "another scripts/vm.sh is using $cache"; ensure_image ;;
  run) shift
       [ "${1:-}" = --head ] && { from_head=1; shift; }
       [ "${1:-}" = -- ] || usage "$@"
       shift; [ $# -gt 0 ] || usage "run --"
       run "$@" ;;
  *) usage "$@" ;;
esac
