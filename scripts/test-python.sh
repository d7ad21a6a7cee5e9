#!/usr/bin/env bash
# Starts the all-in-one mesh (`rollout up`) on the standard ports + 11000 with the
# scripted stand-in model, runs the Python client's tests with Debian's
# python3-grpcio (sync and asyncio clients, token helpers), then the example
# training loop for three iterations; then installs the client offline into a
# fresh venv with system site packages (python3-venv) and runs the example
# from it, and once more without NumPy. The
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
/usr/bin/python3 clients/python/tests/test_tokens.py
/usr/bin/python3 clients/python/tests/test_client.py
/usr/bin/python3 clients/python/tests/test_aio.py
/usr/bin/python3 examples/train_grpo.py --iterations 3 --coordinator localhost:61052 --storage localhost:61055

# The package installs offline: no index, no find-links, and a proxy that
# refuses every connection, so any download attempt fails the install.
# Debian's python3 explicitly: a `python3` earlier on PATH may not see
# python3-grpcio.
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_PROXY=http://127.0.0.1:9 PIP_NO_CACHE_DIR=1 \
	"$work/venv/bin/pip" install --no-index "$root/clients/python"
# ... and without --no-index (the plain command the README gives).
"$work/venv/bin/pip" uninstall -y rolloutmesh
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_PROXY=http://127.0.0.1:9 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT=5 PIP_RETRIES=0 \
	"$work/venv/bin/pip" install "$root/clients/python"
(cd "$work" && "$work/venv/bin/python" -c '
import sys, rolloutmesh
assert rolloutmesh.__file__.startswith(sys.prefix), rolloutmesh.__file__
from rolloutmesh import AsyncRolloutClient, RolloutClient, collate
from rolloutmesh.v1 import coordinator_pb2_grpc
print("installed", rolloutmesh.__version__, "at", rolloutmesh.__file__)')
(cd "$work" && "$work/venv/bin/python" "$root/examples/train_grpo.py" --iterations 1 --normalize-std \
	--coordinator localhost:61052 --storage localhost:61055)
# Without NumPy the helpers give nested lists.
(cd "$work" && "$work/venv/bin/python" -c '
import runpy, sys
sys.modules["numpy"] = None
sys.argv = [sys.argv[1], "--iterations", "1", "--coordinator", "localhost:61052", "--storage", "localhost:61055"]
runpy.run_path(sys.argv[0], run_name="__main__")' "$root/examples/train_grpo.py" | tee "$work/nonumpy.out")
grep -q "token tensors (lists)" "$work/nonumpy.out"
