#!/usr/bin/env bash
# Installs the Debian packages rolloutmesh builds, tests and demos with.
# Safe to run again; does nothing when everything is present.
set -euo pipefail
pkgs=(
	# a real X display for desktopd and the process VM provider
	xvfb openbox xterm x11-utils wmctrl xdotool dbus dbus-x11 at-spi2-core mousepad fonts-dejavu-core
	# GTK dialogs for the accessibility tests; gsettings and dconf for the
	# wallpaper desktopd reads as OSWorld's server does
	zenity libglib2.0-bin dconf-gsettings-backend dconf-service gsettings-desktop-schemas
	# screen recording and its check
	ffmpeg
	# PostgreSQL for the storage and coordinator index tests
	postgresql
	# nginx as the baseline proxy in the gateway benchmark
	nginx
	# Python client tests and stub generation
	python3 python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc
	# the Python client installed offline into a venv, with and without NumPy
	python3-venv python3-pip python3-numpy
	# the well-known types (google/protobuf/*.proto) protoc imports; only
	# recommended by protobuf-compiler, so --no-install-recommends skips them
	libprotobuf-dev
	# the real applications OSWorld's metrics and getters are tested against:
	# LibreOffice makes the xlsx/docx/pptx/pdf files, tesseract reads text in
	# images, Chromium answers the DevTools protocol, VLC its HTTP interface
	libreoffice-core-nogui libreoffice-calc-nogui libreoffice-writer-nogui libreoffice-impress-nogui
	tesseract-ocr tesseract-ocr-eng chromium vlc-bin vlc-plugin-base poppler-utils
	# PDF text as PyMuPDF extracts it (mutool) and JPEG pixels as PIL
	# decodes them (djpeg, libjpeg-turbo): the metrics use them when present;
	# PyMuPDF, PIL and SciPy (imagehash's DCT) are the tests' oracle for the PDF metrics,
	# mutagen for the MP3 tags, odfpy for .odt, Python's csv module for
	# check_csv, PyYAML for check_json's YAML
	mupdf-tools libjpeg-turbo-progs python3-fitz python3-pil python3-scipy python3-mutagen python3-odf python3-yaml
	# Ogg Vorbis and Opus decoded by libsndfile, as librosa's soundfile
	# decodes them (compare_audios)
	sndfile-programs
	# the desktop guest image, and its QEMU disk image (mkfs.ext4 -d,
	# qemu-img) booted by the qemu provider under software emulation
	debootstrap e2fsprogs qemu-system-x86 qemu-utils
	# the qemu provider's bridge networking test: a DHCP server on a test bridge
	dnsmasq-base
	# instructions per request in the gateway benchmark
	valgrind
	# the compose deployment
	docker-compose
	ca-certificates curl git make
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "all ${#pkgs[@]} packages present"
	exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
