#!/usr/bin/env bash
# Starts each service binary with its defaults (in a scratch working directory,
# so default data dirs land there), checks that grpcurl lists its service,
# health and reflection, that /metrics has gRPC server metrics and that the
# healthcheck subcommand passes, then sends SIGTERM and expects exit 0 within
# the drain time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
grpcurl=$root/.bin/grpcurl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A grpc=([vmmanager]=50051 [coordinator]=50052 [runner]=50053 [modelgateway]=50054 [storage]=50055)
declare -A http=([vmmanager]=9101 [coordinator]=9102 [runner]=9103 [modelgateway]=9104 [storage]=9105)
declare -A svc=([vmmanager]=VMManager [coordinator]=Coordinator [runner]=Runner [modelgateway]=ModelGateway [storage]=Storage)

fail=0
for name in vmmanager coordinator runner modelgateway storage; do
	port=${grpc[$name]}
	mkdir -p "$work/$name"
	(cd "$work/$name" && exec "$bin/$name" --log-level warn) >"$work/$name.log" 2>&1 &
	pid=$!
	ok=""
	for _ in $(seq 1 100); do
		if "$bin/$name" healthcheck >/dev/null 2>&1; then ok=1; break; fi
		sleep 0.1
	done
	if [ -z "$ok" ]; then
		echo "FAIL $name: not healthy on :$port"; cat "$work/$name.log"; kill -9 $pid 2>/dev/null || true; fail=1
		# Say who holds the port, if anyone: a listener, or a connection
		# that was given it as its ephemeral local port.
		ss -tanp "( sport = :$port or sport = :${http[$name]} )" || true
		continue
	fi
	list=$("$grpcurl" -plaintext "localhost:$port" list)
	for want in "rolloutmesh.v1.${svc[$name]}" grpc.health.v1.Health grpc.reflection.v1.ServerReflection; do
		grep -qx "$want" <<<"$list" || { echo "FAIL $name: grpcurl list lacks $want"; fail=1; }
	done
	"$grpcurl" -plaintext "localhost:$port" describe "rolloutmesh.v1.${svc[$name]}" >/dev/null || { echo "FAIL $name: describe"; fail=1; }
	# Read the whole body first: grep -q would close the pipe early and,
	# under pipefail, fail a check that matched.
	metrics=$(curl -fsS "localhost:${http[$name]}/metrics")
	grep -q '^grpc_server_started_total' <<<"$metrics" || { echo "FAIL $name: /metrics lacks gRPC server metrics"; fail=1; }
	if [ "$name" = storage ]; then
		# storage serves the trajectory viewer on its HTTP address.
		page=$(curl -fsS "localhost:${http[$name]}/ui/")
		grep -q 'Rollouts' <<<"$page" || { echo "FAIL storage: /ui/ is not the viewer"; fail=1; }
	fi
	start=$SECONDS
	kill -TERM $pid
	if wait $pid; then
		echo "ok   $name: grpc :$port, http :${http[$name]}, SIGTERM → exit 0 in $((SECONDS - start))s"
	else
		echo "FAIL $name: exit $? after SIGTERM"; cat "$work/$name.log"; fail=1
	fi
done
exit $fail
