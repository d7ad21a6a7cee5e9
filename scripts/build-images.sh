#!/usr/bin/env bash
# Builds FROM-scratch images rolloutmesh/<name>:<tag> from the static binaries
# in bin/static. The Docker engine here has no registry, so nothing is pulled:
# each image holds one binary, CA certificates and an empty /tmp.
set -euo pipefail
tag=${1:?usage: build-images.sh TAG NAME...}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
certs=/etc/ssl/certs/ca-certificates.crt
for name in "$@"; do
	bin="$root/bin/static/$name"
	[ -x "$bin" ] || { echo "build-images.sh: $bin missing: run make build-static" >&2; exit 1; }
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' EXIT
	cp "$bin" "$ctx/$name"
	mkdir -p "$ctx/etc/ssl/certs" "$ctx/tmp" "$ctx/data"
	chmod 1777 "$ctx/tmp"
	if [ -f "$certs" ]; then cp "$certs" "$ctx/etc/ssl/certs/"; fi
	cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY etc /etc
COPY tmp /tmp
COPY data /data
COPY $name /$name
LABEL org.opencontainers.image.title="rolloutmesh $name" org.opencontainers.image.source="rolloutmesh"
ENTRYPOINT ["/$name"]
DOCKERFILE
	# The legacy builder warns about BuildKit on every build; show its output
	# only when the build fails.
	if ! out=$(docker build -q -t "rolloutmesh/$name:$tag" "$ctx" 2>&1); then
		echo "$out" >&2
		exit 1
	fi
	echo "built rolloutmesh/$name:$tag"
	rm -rf "$ctx"
	trap - EXIT
done
