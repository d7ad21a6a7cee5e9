#!/usr/bin/env bash
# Generates the Python gRPC stubs of the v1 API into OUT/rolloutmesh/v1.
# Uses Debian's protoc and gRPC Python plugin (apt-get install protobuf-compiler
# protobuf-compiler-grpc) so the stubs match Debian's python3-grpcio and
# python3-protobuf, which the Python client is tested with.
set -euo pipefail
out=${1:?usage: gen-python.sh OUTDIR}
for bin in protoc grpc_python_plugin; do
	if ! command -v "$bin" >/dev/null; then
		echo "gen-python.sh: needs $bin (apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
		exit 1
	fi
done
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$out/rolloutmesh/v1" && cd "$out" && pwd)
cd "$root/proto"
protoc -I . --python_out="$out" --grpc_python_out="$out" \
	--plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" rolloutmesh/v1/*.proto
touch "$out/rolloutmesh/v1/__init__.py"
