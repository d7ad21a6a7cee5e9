#!/usr/bin/env bash
# Starts the all-in-one mesh (`rollout up`) on the standard ports + 11000 with the
# scripted stand-in model, runs the Python client's tests with Debian's
# python3-grpcio, then the example training loop for three iterations. The
# ports (standard + 11000: gRPC 6105x, HTTP 2010x) lie outside Linux's ephemeral
# range (32768-60999), so connections made by concurrent tests cannot take them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
"$root/bin/rollout" up --port-offset 11000 --data-dir "$work/data" --num-rollouts 4 --num-vms 1 --log-level warn \
	--task-root "$root/examples/tasks" \
	--fake-script "$root/examples/fakellm/demo.jsonl" >"$work/up.log" 2>&1 &
pid=$!
cleanup() { kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 100); do
	"$root/bin/coordinator" healthcheck --addr localhost:61052 >/dev/null 2>&1 &&
		"$root/bin/runner" healthcheck --addr localhost:61053 >/dev/null 2>&1 && break
	sleep 0.2
done
"$root/bin/coordinator" healthcheck --addr localhost:61052 || { cat "$work/up.log"; exit 1; }
cd "$root"
export ROLLOUTMESH_COORDINATOR=localhost:61052 ROLLOUTMESH_STORAGE=localhost:61055
/usr/bin/python3 clients/python/tests/test_client.py
/usr/bin/python3 examples/train_grpo.py --iterations 3 --coordinator localhost:61052 --storage localhost:61055
