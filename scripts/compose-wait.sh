#!/usr/bin/env bash
# Waits until every container of the compose project is healthy (docker-compose
# 1.29 has no `up --wait`). Fails after TIMEOUT seconds (default 120) and shows
# the unhealthy containers' logs.
set -euo pipefail
file=${1:?usage: compose-wait.sh COMPOSE_FILE [TIMEOUT]}
timeout=${2:-120}
compose=${COMPOSE:-docker-compose}
deadline=$((SECONDS + timeout))
while :; do
	ids=$($compose -f "$file" ps -q)
	pending=""
	for id in $ids; do
		st=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
		case $st in healthy|running) ;; *) pending="$pending $id:$st" ;; esac
	done
	if [ -n "$ids" ] && [ -z "$pending" ]; then
		$compose -f "$file" ps
		exit 0
	fi
	if [ $SECONDS -ge $deadline ]; then
		echo "compose-wait: not healthy after ${timeout}s:$pending" >&2
		for p in $pending; do docker logs --tail 30 "${p%%:*}" >&2 || true; done
		exit 1
	fi
	sleep 1
done
