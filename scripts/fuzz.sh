#!/usr/bin/env bash
# Runs fuzz targets, building each package's instrumented test binary once.
#
#   scripts/fuzz.sh FUZZTIME pkg:FuzzName[:count] ...
#
# FUZZTIME is the executions per target (`200000x`); a target's own count
# after a second colon wins. `go test -fuzz` links a fresh instrumented
# binary for every target it runs; here a package's targets share one
# (`go test -c -fuzz`), which saves a link of 5 to 15 s per target beyond
# the first of its package. The binary runs in the package's directory, as
# `go test` runs it, so a failing input is written to the package's
# testdata/fuzz/FuzzName, and the corpus it finds is kept where `go test
# -fuzz` keeps it (GOCACHE/fuzz/IMPORTPATH), so the two share it.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: $0 FUZZTIME pkg:FuzzName[:count] ..." >&2
	exit 2
fi
fuzztime=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cache=$(go env GOCACHE)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A built
for t in "$@"; do
	pkg=${t%%:*}
	rest=${t#*:}
	fn=${rest%%:*}
	n=$fuzztime
	case $rest in *:*) n=${rest#*:} ;; esac
	bin=$work/$(printf '%s' "$pkg" | tr '/' '_').test
	if [ -z "${built[$pkg]:-}" ]; then
		echo "build $pkg (instrumented for fuzzing)"
		(cd "$root" && go test -c -fuzz=. -o "$bin" "./$pkg")
		built[$pkg]=1
	fi
	importpath=$(cd "$root" && go list "./$pkg")
	echo "fuzz $pkg $fn ($n)"
	(cd "$root/$pkg" && "$bin" -test.run='^$' -test.fuzz="^$fn\$" -test.fuzztime="$n" \
		-test.fuzzcachedir="$cache/fuzz/$importpath")
done
