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
