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

# The token reaches desktopd in a file only "user" can read, never on a
# command line: setpriv's and env's arguments are visible in ps for the
# moment before they exec. printf is a shell builtin, so the token is on
# no command line here either.
token_file=
if [ -n "${DESKTOPD_TOKEN:-}" ]; then
	token_file=/run/desktopd/token
	install -d -m 0700 -o user -g user /run/desktopd
	(umask 077 && printf '%s' "$DESKTOPD_TOKEN" >"$token_file")
	chown user:user "$token_file"
fi
unset DESKTOPD_TOKEN

setpriv --reuid=user --regid=user --init-groups \
	env -i HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash LANG=C.UTF-8 \
	PATH=/usr/local/bin:/usr/bin:/bin \
	/usr/local/bin/desktopd --xvfb --display :0 --screen "${W}x${H}" \
	--addr "${DESKTOPD_ADDR:-:5000}" --home /home/user \
	${token_file:+--token-file "$token_file"} "$@" &
child=$!

trap 'kill -TERM "$child" 2>/dev/null' TERM INT
# wait returns early when a trapped signal arrives; loop until desktopd
# is gone. Waiting also reaps any orphan re-parented to PID 1.
status=0
while kill -0 "$child" 2>/dev/null; do
	wait "$child" && status=0 || status=$?
done
exit "$status"
