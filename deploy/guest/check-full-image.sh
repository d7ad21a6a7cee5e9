#!/bin/sh
# Smoke test of the full desktop guest image: starts a container the way
# vmmanager's docker provider does (SCREEN_WIDTH/SCREEN_HEIGHT, a
# DESKTOPD_TOKEN, the guest ports published on 127.0.0.1 with engine-chosen
# host ports) and drives it only through desktopd's HTTP API and the
# published ports, as the runner does:
#
#   - google-chrome --remote-debugging-port=1337, then CDP's /json/version
#     on the container's 9222, a browser process named "chrome" and the
#     address bar in the accessibility tree;
#   - an .xlsx made in the guest by LibreOffice, opened with
#     libreoffice --calc, and its window in wmctrl -l;
#   - VLC, then /requests/status.xml on 8080 with the password "password"
#     (and 401 without it);
#   - /setup/open_file of a .docx and an .mp4 opening in Writer and VLC;
#   - sudo -S with "password", gsettings over /run/user/1000/bus, the python
#     modules and programs the tasks call, CJK fonts;
#   - the time zone the image was built with (its org.rolloutmesh.timezone
#     label), not UTC+0, as timedatectl, date and Python's datetime read it,
#     so that OSWorld's is_utc_0 task starts at 0;
#   - the timedatectl shim (status, set-timezone), PulseAudio's null sink as
#     the volume task reads it, /wallpaper after a gsettings set, ctrl+alt+t
#     opening a terminal, /accessibility with all those applications open
#     (under 15 s), and a PNG /screenshot.
#
#   deploy/guest/check-full-image.sh [image]    (default rolloutmesh/desktop:full)
#
# It stops at the first failure with a message and a non-zero exit, and
# always removes its container. Needs docker, curl and python3 on the host.
# KEEP_SHOT=path keeps the last screenshot.
set -eu

image="${1:-rolloutmesh/desktop:full}"
name="rolloutmesh-check-full-$$"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d /tmp/check-full-image.XXXXXX)

fail() {
	echo "FAIL: $*" >&2
	[ ! -s "$work/diag" ] || sed 's/^/    /' "$work/diag" >&2
	echo "--- last container log lines:" >&2
	docker logs --tail 30 "$name" 2>&1 | sed 's/^/    /' >&2 || true
	exit 1
}
ok() { echo "ok: $*"; }
cleanup() {
	docker rm -f "$name" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in docker curl python3; do
	command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed" >&2; exit 1; }
done
docker image inspect "$image" >/dev/null 2>&1 ||
	{ echo "FAIL: no image $image (build it: deploy/guest/build-desktop-image.sh --full $image)" >&2; exit 1; }

docker run -d --name "$name" \
	-e SCREEN_WIDTH=1920 -e SCREEN_HEIGHT=1080 -e DESKTOPD_TOKEN="$token" \
	-p 127.0.0.1::5000 -p 127.0.0.1::9222 -p 127.0.0.1::8080 \
	"$image" >/dev/null || fail "docker run $image"
port() { docker port "$name" "$1/tcp" | head -n1 | sed 's/.*://'; }
D="http://127.0.0.1:$(port 5000)"
CDP="http://127.0.0.1:$(port 9222)"
VLC="http://127.0.0.1:$(port 8080)"

# api METHOD PATH [JSON]: desktopd's answer body on stdout; fails on non-2xx.
api() {
	if [ $# -ge 3 ]; then
		curl -sS --max-time 150 -X "$1" -H "Authorization: Bearer $token" \
			-H 'Content-Type: application/json' -d "$3" -o "$work/body" -w '%{http_code}' "$D$2" >"$work/code" 2>"$work/err" || true
	else
		curl -sS --max-time 150 -X "$1" -H "Authorization: Bearer $token" \
			-o "$work/body" -w '%{http_code}' "$D$2" >"$work/code" 2>"$work/err" || true
	fi
	case "$(cat "$work/code")" in
	2??) cat "$work/body" ;;
	*) fail "$1 $2 answered $(cat "$work/code"): $(head -c 500 "$work/body" "$work/err")" ;;
	esac
}

# run SHELL-COMMAND: its stdout, through POST /execute with shell=true;
# fails when the command exits non-zero.
run() {
	body=$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "shell": True, "timeout": 100}))' "$1")
	api POST /execute "$body" >"$work/exec.json"
	python3 - "$work/exec.json" "$1" <<-'EOF' || return 1
		import json, sys
		r = json.load(open(sys.argv[1]))
		if r.get("returncode") != 0:
		    print("FAIL: %r exited %s: %s%s" % (sys.argv[2], r.get("returncode"), r.get("output", ""), r.get("error", "")), file=sys.stderr)
		    sys.exit(1)
		sys.stdout.write(r.get("output", ""))
	EOF
}

# until_ok SECONDS WHAT CMD...: retries CMD every second until it succeeds.
until_ok() {
	limit=$1 what=$2
	shift 2
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -lt "$limit" ] || fail "$what (gave up after ${limit}s)"
		sleep 1
	done
}

healthy() { curl -sf --max-time 5 -H "Authorization: Bearer $token" "$D/healthz"; }
until_ok 120 "desktopd /healthz never became ready" healthy
ok "desktopd ready at $D"

# --- Chrome over CDP -------------------------------------------------------
api POST /setup/launch '{"command": ["google-chrome", "--remote-debugging-port=1337"], "shell": false}' >/dev/null
cdp() { curl -sf --max-time 5 "$CDP/json/version" >"$work/version.json" && grep -q '"Browser"' "$work/version.json"; }
until_ok 90 "no CDP answer at $CDP/json/version (container port 9222)" cdp
ok "CDP at $CDP: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Browser"])' "$work/version.json")"
run 'pgrep -x chrome' >/dev/null || fail "no process named chrome: the tasks' pkill chrome would miss it"
ok "the browser process is named chrome"
run 'test -f ~/.config/google-chrome/Local\ State || sleep 3; test -d ~/.config/google-chrome/Default' >/dev/null ||
	fail "the profile is not in ~/.config/google-chrome, where OSWorld's getters read it"
ok "profile in ~/.config/google-chrome"
# OSWorld reads the active URL from the address bar in the accessibility
# tree; Chromium builds its tree only when AT-SPI says accessibility is on.
a11y() {
	curl -sf --max-time 60 -H "Authorization: Bearer $token" "$D/accessibility" >"$work/a11y.json" &&
		python3 - "$work/a11y.json" <<-'EOF'
			import json, sys
			at = json.load(open(sys.argv[1]))["AT"]
			sys.exit(0 if '<application name="Chromium"' in at and 'name="Address and search bar"' in at else 1)
		EOF
}
until_ok 60 "Chromium's address bar is not in /accessibility" a11y
ok "Chromium's address bar in the accessibility tree"

# --- LibreOffice Calc ------------------------------------------------------
run 'printf "name,qty\nalpha,1\nbeta,2\n" >~/check_sheet.csv && cd ~ && libreoffice --headless --convert-to xlsx --outdir ~ ~/check_sheet.csv && test -s ~/check_sheet.xlsx' >/dev/null ||
	fail "LibreOffice could not make an .xlsx"
ok "LibreOffice made ~/check_sheet.xlsx"
api POST /setup/launch '{"command": ["libreoffice", "--calc", "/home/user/check_sheet.xlsx"], "shell": false}' >/dev/null
calc() { run 'wmctrl -l' >"$work/diag" && grep -q 'check_sheet.xlsx - LibreOffice Calc' "$work/diag"; }
until_ok 90 "no window 'check_sheet.xlsx - LibreOffice Calc' in wmctrl -l" calc
rm -f "$work/diag"
ok "Calc window: $(run 'wmctrl -l' | grep 'LibreOffice Calc' | head -n1 | cut -d' ' -f5-)"

# ctrl+s saves the xlsx as it is, with no "Keep current format?" question:
# 130 published postconfigs send ctrl+s alone.
run 'md5sum ~/check_sheet.xlsx' >"$work/before"
api POST /setup/activate_window '{"window_name": "check_sheet.xlsx - LibreOffice Calc", "strict": true}' >/dev/null || true
api POST /execute '{"command": ["python", "-c", "import pyautogui; pyautogui.typewrite(\"9\"); pyautogui.press(\"enter\"); pyautogui.hotkey(\"ctrl\", \"s\")"], "shell": false}' >/dev/null
saved() { run 'md5sum ~/check_sheet.xlsx' | cmp -s - "$work/before" && return 1; return 0; }
until_ok 30 "ctrl+s did not save ~/check_sheet.xlsx (a format question?)" saved
ok "ctrl+s saved the .xlsx without a format question"

# --- Thunderbird under OSWorld's window class --------------------------------
api POST /setup/launch '{"command": ["/usr/bin/thunderbird"], "shell": false}' >/dev/null
tb() { run 'wmctrl -lx' >"$work/diag" && grep -q ' Mail\.thunderbird ' "$work/diag"; }
until_ok 90 "no window of class Mail.thunderbird in wmctrl -lx" tb
ok "Thunderbird window class Mail.thunderbird"

# --- VLC's HTTP interface --------------------------------------------------
api POST /setup/launch '{"command": "VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show", "shell": true}' >/dev/null
vlc() { curl -sf --max-time 5 -u :password "$VLC/requests/status.xml" >"$work/status.xml" && grep -q '<state>' "$work/status.xml"; }
until_ok 60 "no status.xml at $VLC with the password \"password\"" vlc
ok "VLC status.xml: state $(sed -n 's:.*<state>\(.*\)</state>.*:\1:p' "$work/status.xml")"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$VLC/requests/status.xml")
[ "$code" = 401 ] || fail "status.xml without the password answered $code, want 401"
ok "status.xml without the password is 401"

# --- /setup/open_file: xdg-open picks the application by file type ----------
run 'cd ~ && printf "hello\n" >check_doc.txt && libreoffice --headless --convert-to docx check_doc.txt && ffmpeg -loglevel error -f lavfi -i testsrc=d=2 -pix_fmt yuv420p check_clip.mp4' >/dev/null ||
	fail "could not make the .docx and .mp4 to open"
for pair in "check_doc.docx:libreoffice-writer" "check_clip.mp4:vlc.vlc"; do
	file=${pair%%:*} class=${pair#*:}
	api POST /setup/open_file "{\"path\": \"/home/user/$file\", \"timeout\": 90}" >/dev/null
	run 'wmctrl -lx' >"$work/diag"
	grep "$file" "$work/diag" | grep -q "$class" || fail "open_file $file: no $class window shows it"
	ok "open_file $file: $(grep "$file" "$work/diag" | head -n1 | awk '{print $3}')"
done
rm -f "$work/diag"

# --- the rest the tasks' commands rely on ----------------------------------
[ "$(run 'echo password | sudo -S -p "" id -u')" = 0 ] || fail "sudo -S with the password does not give root"
ok "sudo -S with password"
got=$(run "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'
gsettings set org.gnome.desktop.session idle-delay 123 && dconf read /org/gnome/desktop/session/idle-delay")
# 123 is not the default (300): reading it back in another process shows
# dconf stored it, not GSettings' in-memory fallback.
[ "$got" = "uint32 123" ] || fail "gsettings over /run/user/1000/bus stored '$got', want 'uint32 123'"
ok "gsettings over /run/user/1000/bus"
run 'gsettings get org.gnome.shell favorite-apps && gsettings get org.gnome.settings-daemon.plugins.power idle-dim && test -d ~/Documents && test -d ~/Music' >/dev/null ||
	fail "the GNOME schemas or the XDG user directories the os tasks use are missing"
ok "GNOME schemas, XDG user directories"
run 'python -c "import Xlib, tkinter, PIL, numpy, pyperclip, lxml"' >/dev/null || fail "python modules missing"
ok "python modules"
for prog in gimp thunderbird nautilus gnome-terminal socat xdotool wmctrl curl zip unzip jq git xsel pip gsettings gio; do
	run "command -v $prog" >/dev/null || fail "$prog is not installed"
done
ok "programs on PATH"
run 'fc-list | grep -q Carlito && fc-list | grep -q "Liberation Sans" && fc-list | grep -q "Noto Sans"' >/dev/null || fail "fonts missing"
ok "fonts"

run 'fc-list :lang=zh-cn | grep -q . && fc-list :lang=ko | grep -q . && fc-list :lang=ja | grep -q .' >/dev/null ||
	fail "no font for Chinese, Korean or Japanese text"
ok "CJK fonts: $(run 'fc-list :lang=zh-cn family | head -n1')"

# --- the time zone, and timedatectl (a shim: no systemd in a container) ------
# The guest starts in the zone the image was built with (GUEST_TZ, recorded
# in its label), never UTC+0: OSWorld's is_utc_0 task ("set my time zone to
# UTC+0") reads line 4 of "timedatectl status" and scores 1 when it ends in
# "+0000)", so a guest in UTC would pass it before the agent acts.
zone=$(docker image inspect -f '{{ index .Config.Labels "org.rolloutmesh.timezone" }}' "$image")
case "$zone" in
"" | "<no value>") fail "$image has no org.rolloutmesh.timezone label: it was built before the guest had a time zone; rebuild it (make guest-image-full)" ;;
esac
line4() { run 'timedatectl status' | sed -n 4p; }
l=$(line4)
case "$l" in *"Time zone: $zone ("*) ;; *) fail "timedatectl status line 4 is '$l', want the image's zone $zone" ;; esac
case "$l" in *"+0000)") fail "timedatectl status line 4 is '$l': OSWorld's is_utc_0 task would score 1 before the agent acts" ;; esac
offset=$(run 'date +%z')
[ "$offset" != "+0000" ] && [ "${l%"$offset)"}" != "$l" ] || fail "date +%z in the guest is '$offset', line 4 is '$l'"
py_offset=$(run 'python3 -c "from datetime import datetime; print(datetime.now().astimezone().strftime(\"%z\"))"')
[ "$py_offset" = "$offset" ] || fail "Python's local offset is '$py_offset', date's '$offset' (rule_relativeTime reads Python's)"
ok "time zone $zone ($offset), not UTC+0: is_utc_0 starts at 0"
run 'echo password | sudo -S -p "" timedatectl set-timezone Asia/Tokyo' >/dev/null || fail "sudo timedatectl set-timezone failed"
case "$(line4)" in *"Time zone: Asia/Tokyo (JST, +0900)") ;; *) fail "after set-timezone Asia/Tokyo, line 4 is '$(line4)'" ;; esac
if run 'timedatectl set-timezone UTC' >/dev/null 2>&1; then fail "set-timezone without root succeeded"; fi
run 'echo password | sudo -S -p "" timedatectl set-timezone Etc/UTC' >/dev/null || fail "sudo timedatectl set-timezone Etc/UTC failed"
case "$(line4)" in *"Time zone: Etc/UTC (UTC, +0000)") ;; *) fail "after set-timezone Etc/UTC (the agent's fix), line 4 is '$(line4)', which is_utc_0 does not pass" ;; esac
run "echo password | sudo -S -p '' timedatectl set-timezone $zone && date +%z" | grep -qx -- "$offset" || fail "could not set the time zone back to $zone"
ok "timedatectl status, set-timezone (root only); after set-timezone Etc/UTC line 4 ends in +0000)"

# --- PulseAudio, as the volume task's evaluator reads it ---------------------
vol() {
	run "pulseaudio --start
pactl list sinks | grep '^[[:space:]]Volume:' | head -n 1 | awk '{print \$5}' | sed 's/%//g'"
}
v=$(vol)
[ "$v" = 40 ] || fail "the sink's volume is '$v', want 40 at start"
run 'pactl set-sink-volume @DEFAULT_SINK@ 100%' >/dev/null || fail "pactl set-sink-volume failed"
v=$(vol)
[ "$v" = 100 ] || fail "after set-sink-volume 100%, the evaluator reads '$v'"
ok "PulseAudio null sink: 40 % at start, the evaluator reads 100 after pactl"

# --- the wallpaper as OSWorld's getter reads it back --------------------------
run 'python3 -c "from PIL import Image; Image.new(\"RGB\", (64, 48), (200, 30, 30)).save(\"/home/user/Pictures/red.png\")"' >/dev/null ||
	fail "could not make a PNG"
run "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'
gsettings set org.gnome.desktop.background picture-uri file:///home/user/Pictures/red.png" >/dev/null
api POST /wallpaper >"$work/wall.png"
want=$(run 'md5sum </home/user/Pictures/red.png' | cut -d' ' -f1)
[ "$(md5sum <"$work/wall.png" | cut -d' ' -f1)" = "$want" ] || fail "/wallpaper is not the file gsettings names"
ok "/wallpaper follows gsettings picture-uri"

# --- ctrl+alt+t opens a terminal, as on OSWorld's Ubuntu ---------------------
api POST /execute '{"command": ["python", "-c", "import pyautogui; pyautogui.hotkey(\"ctrl\", \"alt\", \"t\")"], "shell": false}' >/dev/null
term() { run 'wmctrl -lx' >"$work/diag" && grep -qi 'gnome-terminal' "$work/diag"; }
until_ok 30 "ctrl+alt+t opened no gnome-terminal window" term
rm -f "$work/diag"
ok "ctrl+alt+t opens gnome-terminal"

# --- the accessibility tree with every application above open ----------------
start=$(date +%s%N)
curl -sf --max-time 60 -H "Authorization: Bearer $token" "$D/accessibility" >"$work/a11y.json" || fail "/accessibility failed"
ms=$((($(date +%s%N) - start) / 1000000))
python3 - "$work/a11y.json" "$ms" <<-'EOF' || fail "/accessibility with the applications open took ${ms} ms"
	import json, sys
	import xml.etree.ElementTree as ET
	root = ET.fromstring(json.load(open(sys.argv[1]))["AT"])
	apps = sorted(set(a.get("name") or "?" for a in root))
	n = sum(1 for _ in root.iter())
	print("ok: /accessibility in %s ms: %d elements, %d applications (%s), truncated=%s" % (
	    sys.argv[2], n, len(apps), ", ".join(apps), root.get("truncated", "false")))
	sys.exit(0 if int(sys.argv[2]) < 15000 else 1)
EOF

api GET /screenshot >"$work/shot.png"
[ "$(head -c 8 "$work/shot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "/screenshot is not a PNG"
[ -z "${KEEP_SHOT:-}" ] || cp "$work/shot.png" "$KEEP_SHOT"
ok "screenshot ($(wc -c <"$work/shot.png") bytes)"
echo "PASS: $image"
