#!/usr/bin/env bash
# Starts Debian's PostgreSQL cluster and creates the test role and database.
# Prints `export ROLLOUTMESH_TEST_POSTGRES_DSN=...` for eval. Idempotent.
set -euo pipefail
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^$ver main$"; then
	pg_createcluster "$ver" main >/dev/null
fi
pg_ctlcluster "$ver" main start >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
	pg_isready -q -h 127.0.0.1 && break
	sleep 0.2
done
pg_isready -q -h 127.0.0.1 || { echo "postgresql did not start" >&2; exit 1; }
psql() { su postgres -c "psql -qAt -v ON_ERROR_STOP=1 -c \"$1\"" >/dev/null; }
su postgres -c "psql -qAt -c \"SELECT 1 FROM pg_roles WHERE rolname='rolloutmesh'\"" | grep -q 1 ||
	psql "CREATE ROLE rolloutmesh LOGIN PASSWORD 'rolloutmesh' CREATEDB"
su postgres -c "psql -qAt -c \"SELECT 1 FROM pg_database WHERE datname='rolloutmesh_test'\"" | grep -q 1 ||
	psql "CREATE DATABASE rolloutmesh_test OWNER rolloutmesh"
# initdb and pg_ctl (tests that run a server of their own) live here.
echo "export PATH=\"\$PATH:/usr/lib/postgresql/$ver/bin\""
echo "export ROLLOUTMESH_TEST_POSTGRES_DSN='postgres://rolloutmesh:rolloutmesh@127.0.0.1:5432/rolloutmesh_test?sslmode=disable'"
