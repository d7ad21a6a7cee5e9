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
	GOBIN=$bin GOWORK=off go install "github.com/versity/versitygw/cmd/versitygw@$versitygw_version" >&2
	echo "$versitygw_version" >"$bin/versitygw.version"
fi
echo "export ROLLOUTMESH_TEST_S3_SERVER=$bin/versitygw"
# kube-apiserver (k8s.io/kubernetes, with an embedded etcd) for the
# vmmanager kubernetes provider's tests: tools/kubeapiserver, its own module
# (GOWORK=off). Rebuilt only when its sources change; a cold build takes
# about 5-9 minutes on 2 cores and 3 GB of memory at link time.
kube_stamp=$(cat "$root"/tools/kubeapiserver/go.mod "$root"/tools/kubeapiserver/go.sum "$root"/tools/kubeapiserver/*.go | sha256sum | cut -c1-16)
if [ ! -x "$bin/kubeapiserver" ] || [ "$(cat "$bin/kubeapiserver.stamp" 2>/dev/null)" != "$kube_stamp" ]; then
	echo "building kube-apiserver for the kubernetes provider's tests (takes minutes)..." >&2
	(cd "$root/tools/kubeapiserver" && GOWORK=off go build -o "$bin/kubeapiserver" .) >&2
	echo "$kube_stamp" >"$bin/kubeapiserver.stamp"
fi
echo "export KUBEAPISERVER=$bin/kubeapiserver"
