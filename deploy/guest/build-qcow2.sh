#!/bin/sh
# Builds the QEMU desktop guest: a qcow2 disk made from the root file system
# of rolloutmesh/desktop:dev (deploy/guest/build-desktop-image.sh, built
# first if needed) plus Debian's kernel, booted by direct kernel boot: the
# kernel and initramfs are written next to the image, and the vmmanager
# qemu provider passes them with -kernel/-initrd when it finds them there.
# PID 1 is deploy/guest/qcow2/qemu-init, which sets up the system and the
# network (user-mode's fixed address, or DHCP on a bridge) and execs the image's /sbin/desktop-init (desktopd with
# Xvfb on guest port 5000).
#
#   deploy/guest/build-qcow2.sh [out-dir]     (root; default out-dir .cache/guest)
#
# Output: desktop.qcow2, desktop.vmlinuz, desktop.initrd. The build is
# skipped when desktop.stamp holds the same hash of the inputs (the docker
# image's id, this script, deploy/guest/qcow2/*). No loop mount: the ext4
# file system is made from the directory with mkfs.ext4 -d.
#
# Environment: IMAGE (default rolloutmesh/desktop:dev; rolloutmesh/desktop:full
# gives a guest with OSWorld's applications), MIRROR (default:
# the first Debian mirror apt uses here), SUITE (bookworm), FORCE=1.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out="${1:-$repo/.cache/guest}"
image="${IMAGE:-rolloutmesh/desktop:dev}"
suite="${SUITE:-bookworm}"
# The kernel, what the initramfs needs to find the root disk, ip(8) for
# the init's static network, and a DHCP client for a VM on a host bridge.
packages="linux-image-amd64 initramfs-tools iproute2 isc-dhcp-client"

if [ -z "${MIRROR:-}" ]; then
	MIRROR=$(grep -hoE '^URIs: *http[^ ]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//')
	[ -n "$MIRROR" ] || MIRROR=$(grep -hoE '^deb +http[^ ]+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')
	[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
fi

# rolloutmesh's own images are (re)built when their inputs changed; any
# other image must exist.
case "$image" in
rolloutmesh/desktop:full) "$here/build-desktop-image.sh" --full "$image" ;;
rolloutmesh/desktop:*) "$here/build-desktop-image.sh" "$image" ;;
esac
image_id=$(docker image inspect -f '{{.Id}}' "$image")
hash=$( (echo "$image_id $suite $packages"; cat "$0" "$here"/qcow2/*) | sha256sum | cut -c1-32)
mkdir -p "$out"
if [ "${FORCE:-0}" != 1 ] && [ "$(cat "$out/desktop.stamp" 2>/dev/null)" = "$hash" ] &&
	[ -f "$out/desktop.qcow2" ] && [ -f "$out/desktop.vmlinuz" ] && [ -f "$out/desktop.initrd" ]; then
	echo ">> $out/desktop.qcow2 is up to date (inputs $hash)"
	exit 0
fi

work=$(mktemp -d /tmp/desktop-qcow2.XXXXXX)
rootfs="$work/rootfs"
cid=
cleanup() {
	[ -z "$cid" ] || docker rm -f "$cid" >/dev/null 2>&1 || true
	for m in proc sys dev; do
		if mountpoint -q "$rootfs/$m" 2>/dev/null; then
			umount "$rootfs/$m" || { echo "cannot unmount $rootfs/$m; leaving $work" >&2; return; }
		fi
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo ">> exporting $image"
mkdir -p "$rootfs"
cid=$(docker create "$image")
docker export "$cid" | tar -C "$rootfs" --numeric-owner -x
docker rm "$cid" >/dev/null
cid=

echo ">> installing $packages"
# The initramfs loads only what a QEMU virtio disk needs (MODULES=list),
# instead of every storage driver.
mkdir -p "$rootfs/etc/initramfs-tools/conf.d"
echo MODULES=list >"$rootfs/etc/initramfs-tools/conf.d/rolloutmesh"
printf '%s\n' virtio_pci virtio_blk ext4 >"$rootfs/etc/initramfs-tools/modules"
echo "deb $MIRROR $suite main" >"$rootfs/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
rm -f "$rootfs/etc/resolv.conf"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$rootfs/proc"
mount -t sysfs sysfs "$rootfs/sys"
mount --bind /dev "$rootfs/dev"
chroot "$rootfs" apt-get update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y --no-install-recommends $packages
chroot "$rootfs" apt-get clean
umount "$rootfs/dev" "$rootfs/sys" "$rootfs/proc"
rm -f "$rootfs/usr/sbin/policy-rc.d"
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/usr/share/doc/"* "$rootfs/usr/share/man/"*

kver=$(ls "$rootfs/lib/modules" | head -n1)
cp "$rootfs/boot/vmlinuz-$kver" "$work/desktop.vmlinuz"
cp "$rootfs/boot/initrd.img-$kver" "$work/desktop.initrd"
# The guest is a QEMU machine: no hardware drivers, sound, GPUs, wireless.
mods="$rootfs/lib/modules/$kver/kernel"
rm -rf "$rootfs/boot/"* "$mods/sound" "$mods/drivers/gpu" "$mods/drivers/media" \
	"$mods/drivers/net/wireless" "$mods/drivers/net/ethernet" "$mods/drivers/infiniband" \
	"$mods/drivers/staging" "$mods/drivers/scsi" "$mods/drivers/usb" "$mods/drivers/bluetooth" \
	"$mods/drivers/hid" "$mods/drivers/iio" "$mods/drivers/isdn" "$mods/drivers/mtd" "$mods/net/wireless" \
	"$mods/net/mac80211" "$mods/net/bluetooth"
chroot "$rootfs" depmod "$kver"
install -m 0755 "$here/qcow2/qemu-init" "$rootfs/sbin/qemu-init"
: >"$rootfs/etc/fstab"
# docker export leaves the files the engine bind-mounts empty.
printf '127.0.0.1\tlocalhost\n127.0.1.1\trolloutmesh-guest\n' >"$rootfs/etc/hosts"
echo rolloutmesh-guest >"$rootfs/etc/hostname"
echo 'nameserver 10.0.2.3' >"$rootfs/etc/resolv.conf"

echo ">> making the ext4 disk"
used=$(du -sm "$rootfs" | cut -f1)
# Room for what tasks write: a quarter more, at least 512 MB.
extra=$((used / 4))
[ "$extra" -ge 512 ] || extra=512
truncate -s "$((used + extra))M" "$work/desktop.raw"
mkfs.ext4 -q -F -L rootfs -d "$rootfs" "$work/desktop.raw"
qemu-img convert -f raw -O qcow2 "$work/desktop.raw" "$work/desktop.qcow2"
mv "$work/desktop.qcow2" "$out/desktop.qcow2"
mv "$work/desktop.vmlinuz" "$out/desktop.vmlinuz"
mv "$work/desktop.initrd" "$out/desktop.initrd"
echo "$hash" >"$out/desktop.stamp"
echo ">> built $out/desktop.qcow2 ($(du -h "$out/desktop.qcow2" | cut -f1), kernel $kver, inputs $hash)"
