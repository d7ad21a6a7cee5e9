#!/bin/sh
# Builds rolloutmesh/desktopd-scratch:dev, a FROM scratch image holding only
# the static desktopd run with --display none.
#
#   deploy/guest/build-scratch-image.sh [image]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image="${1:-rolloutmesh/desktopd-scratch:dev}"
ctx=$(mktemp -d /tmp/desktopd-scratch.XXXXXX)
trap 'rm -rf "$ctx"' EXIT

(cd "$repo/guest/desktopd" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$ctx/desktopd" ./cmd/desktopd)
mkdir -m 1777 "$ctx/tmp"
cp "$here/Dockerfile.scratch" "$ctx/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx"
echo ">> built $image"
