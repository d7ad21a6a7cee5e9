#!/bin/sh
# PID 1 of the rolloutmesh/desktop image. desktopd --xvfb starts and owns
# the display (Xvfb), the window manager (openbox) and a session D-Bus
# whose activation starts the AT-SPI accessibility bus; this script only
# prepares the system, runs desktopd as the unprivileged user "user",
# forwards SIGTERM/SIGINT to it and reaps orphaned processes, which is
# what PID 1 must do.
set -eu

W="${SCREEN_WIDTH:-1920}"
H="${SCREEN_HEIGHT:-1080}"
mkdir -p /tmp/.X11-unix /tmp/.ICE-unix
chmod 1777 /tmp /tmp/.X11-unix /tmp/.ICE-unix

setpriv --reuid=user --regid=user --init-groups \
	env -i HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash LANG=C.UTF-8 \
	PATH=/usr/local/bin:/usr/bin:/bin DESKTOPD_TOKEN="${DESKTOPD_TOKEN:-}" \
	/usr/local/bin/desktopd --xvfb --display :0 --screen "${W}x${H}" \
	--addr "${DESKTOPD_ADDR:-:5000}" --home /home/user "$@" &
child=$!

trap 'kill -TERM "$child" 2>/dev/null' TERM INT
# wait returns early when a trapped signal arrives; loop until desktopd
# is gone. Waiting also reaps any orphan re-parented to PID 1.
status=0
while kill -0 "$child" 2>/dev/null; do
	wait "$child" && status=0 || status=$?
done
exit "$status"
