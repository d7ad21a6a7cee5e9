#!/usr/bin/env bash
# Builds the third-party servers the tests run for real, at pinned versions,
# into .bin, and prints the environment variables that point tests at them.
# Usage: eval "$(scripts/build-test-servers.sh)"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.bin
mkdir -p "$bin"
# versitygw: a real S3-compatible server (posix backend) for storage's S3 tests.
versitygw_version=v1.8.0
if [ ! -x "$bin/versitygw" ] || [ "$(cat "$bin/versitygw.version" 2>/dev/null)" != "$versitygw_version" ]; then
	GOBIN=$bin GOWORK=off go install "github.com/versity/versitygw/cmd/versitygw@$versitygw_version" >&2 ||
		{ echo "build-test-servers: installing versitygw $versitygw_version failed: go's error is above" >&2; exit 1; }
	echo "$versitygw_version" >"$bin/versitygw.version"
fi
echo "export ROLLOUTMESH_TEST_S3_SERVER=$bin/versitygw"
# kube-apiserver (k8s.io/kubernetes, with an embedded etcd) for the
# vmmanager kubernetes provider's tests: tools/kubeapiserver, its own module
# (GOWORK=off). Rebuilt only when its sources or these flags change (the
# stamp). A cold build compiles ~1,930 packages besides the standard library
# (which `make tools` has compiled by then) and the compiles are nearly all
# of it: the link is ~12 s. Measured on the 2-core machine (commit 90a5e55,
# modules downloaded, the standard library in the cache): 13.8 min of CPU
# with these flags, 18.2 without them (the CI run of 9887768: 56 min of
# wall time at load averages 11-31), so about 7-8 minutes on 2 idle cores
# instead of 10. -dwarf=false makes the compiler skip debug information (20 %
# less compile CPU, measured twice on a 387-package subset: 153 -> 123 s and
# 141 -> 113 s), -s -w the linker (peak memory 3.0 -> 2.0 GB); stack traces
# keep file and line. -N -l (no optimisation, no inlining) took the cold
# build from 469 to 385 s of wall time and 902 to 744 s of CPU on session
# 28's 2-core machine (one build each, the standard library cached); the
# kubernetes provider's tests ran 29-30 s against either binary. Not for the
# standard library, whose compiled packages the other builds share. Not
# -race; -p stays the number of cores.
kube_flags=("-gcflags=all=-dwarf=false -N -l" -gcflags=std= "-ldflags=-s -w")
kube_stamp=$(cat "$root"/tools/kubeapiserver/go.mod "$root"/tools/kubeapiserver/go.sum "$root"/tools/kubeapiserver/*.go <(echo "${kube_flags[*]}") | sha256sum | cut -c1-16)
if [ ! -x "$bin/kubeapiserver" ] || [ "$(cat "$bin/kubeapiserver.stamp" 2>/dev/null)" != "$kube_stamp" ]; then
	echo "building kube-apiserver for the kubernetes provider's tests (6-8 minutes on 2 idle cores when nothing is cached)..." >&2
	if ! (cd "$root/tools/kubeapiserver" && GOWORK=off go build "${kube_flags[@]}" -o "$bin/kubeapiserver" .) >&2; then
		echo "build-test-servers: building kube-apiserver (tools/kubeapiserver) failed: go's error is above" >&2
		exit 1
	fi
	echo "$kube_stamp" >"$bin/kubeapiserver.stamp"
fi
echo "export KUBEAPISERVER=$bin/kubeapiserver"
