#!/bin/sh
# PID 1 of the rolloutmesh/desktop:full image. It adds what OSWorld's guest
# has running beside the desktop, then becomes the small image's init
# (/sbin/desktop-init-base), which starts desktopd and reaps orphans:
#
#   - the forward of port 9222 to Chrome's remote debugging port 1337
#     (socat, as OSWorld's guests run it): Chrome binds its debugging port
#     to 127.0.0.1 only, and the runner reaches CDP at the container's 9222;
#   - /run/user/1000/bus, the session bus address OSWorld's commands export
#     (gsettings, gnome-terminal), linked to the session bus desktopd starts.
set -eu

install -d -m 0700 -o user -g user /run/user/1000

# As "user", so nothing a task reaches through the forward runs as root.
# The tasks' own "socat tcp-listen:9222,fork tcp:localhost:1337" then
# finds the port taken and exits, which changes nothing: it is the same
# forward.
setpriv --reuid=user --regid=user --init-groups \
	socat tcp-listen:9222,fork,reuseaddr tcp:localhost:1337 </dev/null >/dev/null 2>&1 &

# desktopd makes its bus socket in a fresh /tmp/desktopd-* directory once
# Xvfb is up; link it as soon as it exists (give up after two minutes).
(
	i=0
	while [ "$i" -lt 240 ]; do
		for bus in /tmp/desktopd-*/bus; do
			if [ -S "$bus" ]; then
				ln -sfn "$bus" /run/user/1000/bus
				chown -h user:user /run/user/1000/bus
				exit 0
			fi
		done
		sleep 0.5
		i=$((i + 1))
	done
) </dev/null >/dev/null 2>&1 &

exec /sbin/desktop-init-base "$@"
