#!/usr/bin/env bash
# The recipe of the VM image scripts/vm.sh boots: Debian trixie with its stock kernel (which has sch_netem), Docker
# and Compose, and a one-shot job unit. scripts/vm.sh hashes this file: the cached image is rebuilt only when this
# file changes. Usage: vm-image.sh OUT_DIR MIRROR  (writes OUT_DIR/rootfs.img, vmlinuz, initrd.img; root only).
#
# The guest, at boot: systemd-networkd takes an address from QEMU's user-mode network (the Debian mirror and PyPI
# reach it; the lab's own traffic stays on the guest's internal Docker networks), dockerd starts, and
# quiclab-job.service mounts the host's 9p share (tag `quiclab`) at /mnt/host and runs /mnt/host/job.sh, which
# writes its output and exit code into the share and powers the guest off.
set -euo pipefail
out=${1:?usage: vm-image.sh OUT_DIR MIRROR}
mirror=${2:?usage: vm-image.sh OUT_DIR MIRROR}
size=${QUICLAB_VM_DISK:-24G}  # sparse: costs only what the guest writes

work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"

packages=linux-image-amd64,systemd-sysv,systemd-resolved,udev,dbus,docker.io,docker-cli,docker-compose,apparmor,
packages+=iproute2,iptables,kmod,ca-certificates,git,python3,tcpdump,tshark,procps,util-linux,e2fsprogs,less
DEBIAN_FRONTEND=noninteractive debootstrap --variant=minbase --include="$packages" trixie "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; echo "debootstrap failed" >&2; exit 1; }

echo quiclab-vm >"$root/etc/hostname"
# the second disk: Docker's data root with the lab's images, made on the host (scripts/vm.sh), fresh every run
printf '/dev/vda / ext4 rw,relatime 0 1\n/dev/vdb /var/lib/docker ext4 rw,relatime,nofail 0 2\n' >"$root/etc/fstab"
mkdir -p "$root/etc/systemd/network" "$root/mnt/host"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' >"$root/etc/systemd/network/20-wired.network"
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/"
# 9p at boot for the job, and the kernel modules that sch_netem's lab needs
printf '9p\n9pnet_virtio\nsch_netem\n' >"$root/etc/modules-load.d/quiclab.conf"
# the lab raises these on the host (scripts/setup.sh): the guest is the host here
cat >"$root/etc/sysctl.d/90-quiclab.conf" <<'EOF'
net.core.rmem_max=16777216
net.core.wmem_max=16777216
net.core.rmem_default=8388608
EOF

cat >"$root/usr/local/sbin/quiclab-job" <<'EOF'
#!/bin/bash
# Runs the host's job from the 9p share, then powers the guest off (scripts/vm.sh waits for QEMU to exit).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576,cache=none quiclab /mnt/host \
  || { echo "quiclab-job: cannot mount the host share" >/dev/ttyS0; systemctl poweroff; exit 1; }
echo "quiclab-job: guest up after $(cut -d' ' -f1 /proc/uptime) s" >/dev/ttyS0
if [ -x /mnt/host/job.sh ]; then
  /mnt/host/job.sh >/mnt/host/out/job.log 2>&1
  echo $? >/mnt/host/out/rc.tmp && mv /mnt/host/out/rc.tmp /mnt/host/out/rc
fi
sync
systemctl poweroff
EOF
chmod 0755 "$root/usr/local/sbin/quiclab-job"
cat >"$root/etc/systemd/system/quiclab-job.service" <<'EOF'
[Unit]
Description=quiclab: run the host's job from the 9p share
After=network-online.target docker.service
Wants=network-online.target docker.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/quiclab-job
StandardOutput=journal+console
TimeoutStartSec=infinity
[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/quiclab-job.service "$root/etc/systemd/system/multi-user.target.wants/"
ln -sf /lib/systemd/system/systemd-networkd-wait-online.service \
  "$root/etc/systemd/system/network-online.target.wants/" 2>/dev/null || true
chroot "$root" apt-get clean

kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n 1)
cp "$kernel" "$out/vmlinuz.new"
cp "$root/boot/initrd.img-${kernel##*/vmlinuz-}" "$out/initrd.img.new"
truncate -s "$size" "$work/rootfs.img"
mkfs.ext4 -q -F -d "$root" "$work/rootfs.img"
mv "$work/rootfs.img" "$out/rootfs.img.new"
