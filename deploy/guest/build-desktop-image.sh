#!/bin/sh
# Builds the desktop guest image rolloutmesh/desktop:dev: a Debian bookworm
# root file system made with debootstrap (Xvfb, openbox, xterm, mousepad,
# ffmpeg, python3 as python, dbus, at-spi2-core, fonts, wmctrl, xdg-utils),
# the static desktopd and a small init, imported with docker import. The
# build is skipped when an image labelled with the same input hash exists.
#
#   deploy/guest/build-desktop-image.sh [image]      (run as root, from anywhere)
#
# Environment: MIRROR (default: the first Debian mirror apt uses here),
# SUITE (bookworm), FORCE=1 to rebuild anyway.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image="${1:-rolloutmesh/desktop:dev}"
suite="${SUITE:-bookworm}"
packages="xvfb,openbox,xterm,mousepad,ffmpeg,python3,python-is-python3,dbus,dbus-x11,at-spi2-core,libatk-adaptor,fonts-dejavu-core,wmctrl,x11-utils,xdg-utils,ca-certificates,procps,util-linux"

if [ -z "${MIRROR:-}" ]; then
	MIRROR=$(grep -hoE '^URIs: *http[^ ]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//')
	[ -n "$MIRROR" ] || MIRROR=$(grep -hoE '^deb +http[^ ]+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')
	[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
fi

work=$(mktemp -d /tmp/desktop-image.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

# The static binary is part of the inputs: Go builds with -trimpath are
# reproducible, so the same source gives the same hash.
echo ">> building desktopd"
(cd "$repo/guest/desktopd" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$work/desktopd" ./cmd/desktopd)

hash=$( (cat "$work/desktopd" "$here/desktop-init.sh" "$0"; echo "$suite $packages") | sha256sum | cut -c1-32)
if [ "${FORCE:-0}" != 1 ] && [ -n "$(docker images -q --filter "label=org.rolloutmesh.inputs=$hash" "$image")" ]; then
	echo ">> $image is up to date (inputs $hash)"
	exit 0
fi

rootfs="$work/rootfs"
echo ">> debootstrap $suite from $MIRROR"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$MIRROR"

install -m 0755 "$work/desktopd" "$rootfs/usr/local/bin/desktopd"
install -m 0755 "$here/desktop-init.sh" "$rootfs/sbin/desktop-init"
chroot "$rootfs" /usr/sbin/useradd --create-home --shell /bin/bash --uid 1000 user
echo 'user:password' | chroot "$rootfs" /usr/sbin/chpasswd
mkdir -p "$rootfs/home/user/Desktop"
chroot "$rootfs" chown -R user:user /home/user
# The machine id D-Bus wants, and no leftovers from the build.
chroot "$rootfs" dbus-uuidgen --ensure=/etc/machine-id || true
rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"* \
	"$rootfs/usr/share/doc/"* "$rootfs/usr/share/man/"* "$rootfs/tmp/"*

echo ">> docker import as $image"
tar -C "$rootfs" --numeric-owner -c . | docker import \
	--change 'CMD ["/sbin/desktop-init"]' \
	--change 'EXPOSE 5000' \
	--change 'ENV LANG=C.UTF-8 SCREEN_WIDTH=1920 SCREEN_HEIGHT=1080' \
	--change "LABEL org.rolloutmesh.inputs=$hash org.rolloutmesh.component=desktop-guest" \
	- "$image"
echo ">> built $image (inputs $hash)"
