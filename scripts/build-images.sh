#!/usr/bin/env bash
# Builds FROM-scratch images rolloutmesh/<name>:<tag> from the static binaries
# in bin/static. The Docker engine here has no registry, so nothing is pulled:
# each image holds one binary, CA certificates and an empty /tmp.
#
# The runner is the exception: it runs Python tasks locally, so its image is
# deploy/runner/Dockerfile on the desktop guest image rolloutmesh/desktop:<tag>
# (python3, prlimit, unshare), built first when missing (debootstrap, as
# root; a few minutes once, then reused by `make guest-image`). RUNNER_BASE
# names another base with python3 and util-linux.
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
	if [ "$name" = runner ]; then
		base=${RUNNER_BASE:-rolloutmesh/desktop:$tag}
		if [ -z "$(docker images -q "$base")" ]; then
			[ -z "${RUNNER_BASE:-}" ] || { echo "build-images.sh: runner base image $base missing" >&2; exit 1; }
			echo "build-images.sh: building $base first (the runner image's base)"
			"$root/deploy/guest/build-desktop-image.sh" "$base"
		fi
		mkdir -p "$ctx/data"
		cp "$root/deploy/runner/Dockerfile" "$ctx/Dockerfile"
		if ! out=$(docker build -q --build-arg "BASE=$base" -t "rolloutmesh/$name:$tag" "$ctx" 2>&1); then
			echo "$out" >&2
			exit 1
		fi
		echo "built rolloutmesh/$name:$tag (on $base)"
		rm -rf "$ctx"
		trap - EXIT
		continue
	fi
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
