#!/bin/sh
# Builds the desktop guest image rolloutmesh/desktop:dev: a Debian bookworm
# root file system made with debootstrap (Xvfb, openbox, xterm, mousepad,
# ffmpeg, python3 as python, dbus, at-spi2-core, fonts, wmctrl, xdg-utils),
# the static desktopd and a small init, imported with docker import. The
# build is skipped when an image labelled with the same input hash exists.
#
#   deploy/guest/build-desktop-image.sh [image]          (run as root, from anywhere)
#   deploy/guest/build-desktop-image.sh --full [image]
#
# --full builds rolloutmesh/desktop:full, the same base plus what OSWorld's
# tasks drive (deploy/guest/full/packages: Chromium as google-chrome,
# LibreOffice, GIMP, VLC with its HTTP interface, Thunderbird, nautilus,
# fonts, sudo, python modules, gsettings) and deploy/guest/full/desktop-init.sh
# as PID 1 in front of the small image's init.
#
# Environment: MIRROR (default: the first Debian mirror apt uses here),
# SECURITY_MIRROR (the security archive, for --full: Chromium's updates come
# from there), SUITE (bookworm), FORCE=1 to rebuild anyway, and for --full
# VSCODE_DEB=/path/to/code.deb to install VS Code (not in Debian) from a
# local .deb, and GUEST_TZ, the guest's time zone (default Asia/Hong_Kong;
# it must not be UTC+0, see below), recorded in the image's label
# org.rolloutmesh.timezone.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
full=0
if [ "${1:-}" = --full ]; then
	full=1
	shift
fi
if [ "$full" = 1 ]; then
	image="${1:-rolloutmesh/desktop:full}"
else
	image="${1:-rolloutmesh/desktop:dev}"
fi
suite="${SUITE:-bookworm}"
# The last six are for the runner image built on this one
# (deploy/runner/Dockerfile): the tools its OSWorld metrics run (PDF text
# and images, OCR, JPEG pixels as Pillow decodes them, Ogg audio as
# libsndfile decodes it).
packages="xvfb,openbox,xterm,mousepad,ffmpeg,python3,python-is-python3,dbus,dbus-x11,at-spi2-core,libatk-adaptor,fonts-dejavu-core,wmctrl,x11-utils,xdg-utils,ca-certificates,procps,util-linux,poppler-utils,mupdf-tools,tesseract-ocr,tesseract-ocr-eng,libjpeg-turbo-progs,sndfile-programs"

if [ -z "${MIRROR:-}" ]; then
	MIRROR=$(grep -hoE '^URIs: *http[^ ]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//')
	[ -n "$MIRROR" ] || MIRROR=$(grep -hoE '^deb +http[^ ]+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')
	[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
fi

full_packages=
if [ "$full" = 1 ]; then
	full_packages=$(sed -e 's/#.*//' "$here/full/packages" | tr -s ' \t\n' ' ' | sed -e 's/^ //' -e 's/ $//')
	if [ -z "${SECURITY_MIRROR:-}" ]; then
		SECURITY_MIRROR=$(grep -hoE '^URIs: *http[^ ]+/debian-security/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//')
		[ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR=http://deb.debian.org/debian-security
	fi
	if [ -n "${VSCODE_DEB:-}" ] && [ ! -f "$VSCODE_DEB" ]; then
		echo "VSCODE_DEB=$VSCODE_DEB: no such file" >&2
		exit 1
	fi
	# The full guest starts in a time zone other than UTC+0, as OSWorld's
	# VM does: its is_utc_0 task ("set my time zone to UTC+0") reads line 4
	# of "timedatectl status", and a guest already at +0000 scores 1 before
	# the agent acts. Hong Kong is +0800 all year (no daylight saving), so
	# the offset the tasks see does not move with the season.
	guest_tz="${GUEST_TZ:-Asia/Hong_Kong}"
	case "$guest_tz" in
	"" | /* | *..* | .* | *" "*) echo "GUEST_TZ=$guest_tz: want a zone name such as Asia/Hong_Kong" >&2; exit 1 ;;
	esac
fi

work=$(mktemp -d /tmp/desktop-image.XXXXXX)
rootfs="$work/rootfs"
cleanup() {
	# apt's chroot needs /proc; never delete through a mount still in place.
	if mountpoint -q "$rootfs/proc" 2>/dev/null; then
		umount "$rootfs/proc" || { echo "cannot unmount $rootfs/proc; leaving $work" >&2; return; }
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# A signal would otherwise end the shell without the EXIT trap, leaving
# /proc mounted in the root file system.
trap 'exit 130' INT TERM

# The static binary is part of the inputs: Go builds with -trimpath are
# reproducible, so the same source gives the same hash.
echo ">> building desktopd"
(cd "$repo/guest/desktopd" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$work/desktopd" ./cmd/desktopd)

base_hash=$( (cat "$work/desktopd" "$here/desktop-init.sh" "$0"; echo "$suite $packages") | sha256sum | cut -c1-32)
if [ "$full" = 1 ]; then
	hash=$( (cat "$work/desktopd" "$here/desktop-init.sh" "$0" "$here"/full/*; echo "$suite $packages $full_packages $guest_tz"
		[ -z "${VSCODE_DEB:-}" ] || sha256sum <"$VSCODE_DEB") | sha256sum | cut -c1-32)
else
	hash=$base_hash
fi
if [ "${FORCE:-0}" != 1 ] && [ -n "$(docker images -q --filter "label=org.rolloutmesh.inputs=$hash" "$image")" ]; then
	echo ">> $image is up to date (inputs $hash)"
	exit 0
fi

# install_full turns the small root file system into the full one.
install_full() {
	echo ">> installing the full desktop: $full_packages"
	cat >"$rootfs/etc/apt/sources.list" <<-EOF
		deb $MIRROR $suite main
		deb $MIRROR $suite-updates main
		deb $SECURITY_MIRROR $suite-security main
	EOF
	# No documentation, manuals or translations in the image (the desktop
	# runs in C.UTF-8); dpkg skips them as it unpacks.
	cat >"$rootfs/etc/dpkg/dpkg.cfg.d/rolloutmesh-nodoc" <<-EOF
		path-exclude=/usr/share/doc/*
		path-exclude=/usr/share/man/*
		path-exclude=/usr/share/info/*
		path-exclude=/usr/share/help/*
		path-exclude=/usr/share/locale/*
		path-exclude=/usr/share/gnome/help/*
		path-exclude=/usr/share/omf/*
	EOF
	# Packages' maintainer scripts must not start services in the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
	chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
	mount -t proc proc "$rootfs/proc"
	chroot "$rootfs" apt-get update
	# The base came from the release; take its security updates too.
	DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get upgrade -y
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y --no-install-recommends $full_packages
	if [ -n "${VSCODE_DEB:-}" ]; then
		cp "$VSCODE_DEB" "$rootfs/tmp/code.deb"
		DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y --no-install-recommends /tmp/code.deb
		rm -f "$rootfs/tmp/code.deb"
		# Electron needs the same sandbox fallback as Chromium.
		install -m 0755 "$here/full/code" "$rootfs/usr/local/bin/code"
	fi
	chroot "$rootfs" apt-get clean
	umount "$rootfs/proc"
	# Translations debootstrap unpacked before the dpkg excludes were in
	# place (locale.alias is glibc's, not a translation).
	find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
	rm -f "$rootfs/usr/sbin/policy-rc.d"

	# Chromium as google-chrome (see full/google-chrome), also under the
	# path and desktop file name of Google's package, which tasks copy.
	ln "$rootfs/usr/lib/chromium/chromium" "$rootfs/usr/lib/chromium/chrome"
	install -m 0755 "$here/full/google-chrome" "$rootfs/usr/local/bin/google-chrome"
	ln -s /usr/local/bin/google-chrome "$rootfs/usr/bin/google-chrome-stable"
	install -m 0644 "$here/full/google-chrome.desktop" "$rootfs/usr/share/applications/google-chrome.desktop"
	chroot "$rootfs" update-desktop-database -q /usr/share/applications || true
	# Thunderbird under the window class OSWorld's tasks activate
	# (Mail.thunderbird, strict, by class); Debian's build says
	# Mail.thunderbird-default. Tasks start /usr/bin/thunderbird.
	chroot "$rootfs" dpkg-divert --quiet --local --rename --add /usr/bin/thunderbird
	install -m 0755 "$here/full/thunderbird" "$rootfs/usr/bin/thunderbird"
	# Not through /usr/lib/libreoffice/share/registry: that is an absolute
	# link, which outside the chroot leads to the build host's /etc.
	lo_version=$(chroot "$rootfs" dpkg-query -W -f '${Version}' libreoffice-core | sed -E 's/^[0-9]+://; s/^([0-9]+\.[0-9]+).*/\1/')
	sed "s/@VERSION@/$lo_version/" "$here/full/libreoffice.xcd" >"$rootfs/etc/libreoffice/registry/rolloutmesh.xcd"
	chmod 0644 "$rootfs/etc/libreoffice/registry/rolloutmesh.xcd"
	# The home of OSWorld's Ubuntu user: tasks open nautilus on ~/Music and
	# save into ~/Documents or ~/Downloads without creating them.
	for d in Documents Downloads Music Pictures Public Templates Videos; do
		install -d "$rootfs/home/user/$d"
	done
	install -d "$rootfs/home/user/.config/vlc"
	install -m 0644 "$here/full/user-dirs.dirs" "$rootfs/home/user/.config/user-dirs.dirs"
	install -m 0644 "$here/full/vlcrc" "$rootfs/home/user/.config/vlc/vlcrc"
	install -d "$rootfs/etc/gtk-2.0"
	install -m 0644 "$here/full/gtkrc" "$rootfs/etc/gtk-2.0/gtkrc"
	install -m 0644 "$here/full/90_rolloutmesh.gschema.override" "$rootfs/usr/share/glib-2.0/schemas/"
	# No systemd in a container, so no timedated: a timedatectl shim that
	# reads and sets /etc/localtime (see full/timedatectl; the is_utc_0
	# task reads "timedatectl status").
	install -m 0755 "$here/full/timedatectl" "$rootfs/usr/local/bin/timedatectl"
	# The zone, as timedated and tzdata keep it: /etc/localtime a link into
	# /usr/share/zoneinfo (what the shim, libc, Chromium and Python read)
	# and its name in /etc/timezone.
	[ -f "$rootfs/usr/share/zoneinfo/$guest_tz" ] || { echo "GUEST_TZ=$guest_tz: not a zone tzdata knows" >&2; exit 1; }
	ln -sfn "/usr/share/zoneinfo/$guest_tz" "$rootfs/etc/localtime"
	echo "$guest_tz" >"$rootfs/etc/timezone"
	offset=$(chroot "$rootfs" env -u TZ date +%z)
	if [ "$offset" = +0000 ]; then
		echo "GUEST_TZ=$guest_tz is UTC+0 now: OSWorld's is_utc_0 task would score 1 before the agent acts" >&2
		exit 1
	fi
	# ctrl+alt+t opens a terminal, as on OSWorld's Ubuntu: 8 published
	# tasks press it in their config and then activate "Terminal".
	sed -i 's|^<keyboard>$|<keyboard>\n  <keybind key="C-A-t"><action name="Execute"><command>gnome-terminal</command></action></keybind>|' \
		"$rootfs/etc/xdg/openbox/rc.xml"
	grep -q 'key="C-A-t"' "$rootfs/etc/xdg/openbox/rc.xml" || { echo "openbox rc.xml: the ctrl+alt+t binding did not go in" >&2; exit 1; }
	# PulseAudio without a sound card: a null sink at 40 %, so that the
	# volume task ("turn up to the max volume") has something to do.
	install -d "$rootfs/etc/pulse/default.pa.d"
	install -m 0644 "$here/full/rolloutmesh.pa" "$rootfs/etc/pulse/default.pa.d/rolloutmesh.pa"
	# The daemon stays once started (it would exit after 20 idle seconds and
	# start again at 40 %, losing the agent's volume).
	sed -i 's/^; *exit-idle-time = .*/exit-idle-time = -1/' "$rootfs/etc/pulse/daemon.conf"
	grep -q '^exit-idle-time = -1' "$rootfs/etc/pulse/daemon.conf" || { echo "pulse daemon.conf: exit-idle-time not set" >&2; exit 1; }
	chroot "$rootfs" glib-compile-schemas /usr/share/glib-2.0/schemas
	# sudo -S with the password "password", OSWorld's {CLIENT_PASSWORD}.
	chroot "$rootfs" /usr/sbin/usermod -aG sudo user
	# OSWorld's Ubuntu lets "pip install" write to the system Python; the
	# tasks' "pip install X" fail on Debian's marker otherwise.
	rm -f "$rootfs"/usr/lib/python3.*/EXTERNALLY-MANAGED
	mv "$rootfs/sbin/desktop-init" "$rootfs/sbin/desktop-init-base"
	install -m 0755 "$here/full/desktop-init.sh" "$rootfs/sbin/desktop-init"
}

# The full image is the small one plus install_full: when the small image
# of the same inputs exists (make guest-image-full builds it first), the
# full one starts from its file system instead of a debootstrap of its own,
# a few minutes of CPU that CI's first half shares with the Go builds.
base_id=
if [ "$full" = 1 ]; then
	base_id=$(docker images -q --filter "label=org.rolloutmesh.inputs=$base_hash" --filter label=org.rolloutmesh.component=desktop-guest | head -n1)
fi
if [ -n "$base_id" ]; then
	echo ">> starting from the small image $base_id (inputs $base_hash)"
	mkdir "$rootfs"
	cid=$(docker create "$base_id")
	docker export "$cid" | tar -C "$rootfs" --numeric-owner -x
	docker rm "$cid" >/dev/null
	# A container's export is the image plus docker's own files: its
	# marker (removed here), an empty /etc/hosts and a plain /dev/console
	# (the small image has a character device there), both of which docker
	# and Kubernetes mount over when the guest runs. The chroot's apt needs
	# the host's resolver and name, as debootstrap copies them.
	rm -f "$rootfs/.dockerenv"
	cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
	if [ -e /etc/hostname ]; then cp /etc/hostname "$rootfs/etc/hostname"; fi
else
	echo ">> debootstrap $suite from $MIRROR"
	debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$MIRROR"

	install -m 0755 "$work/desktopd" "$rootfs/usr/local/bin/desktopd"
	install -m 0755 "$here/desktop-init.sh" "$rootfs/sbin/desktop-init"
	chroot "$rootfs" /usr/sbin/useradd --create-home --shell /bin/bash --uid 1000 user
	echo 'user:password' | chroot "$rootfs" /usr/sbin/chpasswd
	mkdir -p "$rootfs/home/user/Desktop"
fi
if [ "$full" = 1 ]; then
	install_full
fi
chroot "$rootfs" chown -R user:user /home/user
# The machine id D-Bus wants, and no leftovers from the build.
chroot "$rootfs" dbus-uuidgen --ensure=/etc/machine-id || true
rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"* \
	"$rootfs/usr/share/doc/"* "$rootfs/usr/share/man/"* "$rootfs/tmp/"*

echo ">> docker import as $image"
expose='EXPOSE 5000'
labels="org.rolloutmesh.inputs=$hash org.rolloutmesh.component=desktop-guest"
if [ "$full" = 1 ]; then
	# The CDP forward and VLC's HTTP interface (see full/desktop-init.sh).
	expose='EXPOSE 5000 8080 9222'
	# check-full-image.sh reads the zone the guest must start in.
	labels="$labels org.rolloutmesh.timezone=$guest_tz"
fi
tar -C "$rootfs" --numeric-owner -c . | docker import \
	--change 'CMD ["/sbin/desktop-init"]' \
	--change "$expose" \
	--change 'ENV LANG=C.UTF-8 SCREEN_WIDTH=1920 SCREEN_HEIGHT=1080' \
	--change "LABEL $labels" \
	- "$image"
echo ">> built $image (inputs $hash)"
