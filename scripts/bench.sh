#!/usr/bin/env bash
# make bench: every benchmark in sequence, BENCH_RUNS times (default 2), then
# the goals table of docs/benchmarks.md rewritten from the goal lines they
# printed (serverkit/benchreport's format: "goal<TAB>id<TAB>goal<TAB>figure<TAB>
# verdict<TAB>load"). Each row gives every run's figure, so the spread shows,
# and names the command, the commit and the load. Run it on a quiet machine:
# figures taken while other work shares the cores are not comparable.
#
#   BENCH_TARGETS="bench-vmmanager bench-storage" BENCH_RUNS=2 scripts/bench.sh
#
# The logs stay in .cache/bench/<target>-<run>.log; BENCH_TABLE_ONLY=1 rebuilds
# the table from them without running anything.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=${BENCH_TARGETS:-bench-desktopd bench-vmmanager bench-k8s bench-storage bench-gateway bench-mesh bench-coordinator bench-osworld-eval bench-osworld-setup}
runs=${BENCH_RUNS:-2}
doc=${BENCH_DOC:-docs/benchmarks.md}
logs=.cache/bench
mkdir -p "$logs"

commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || commit="$commit+changes"
load=$(cut -d' ' -f1-3 /proc/loadavg)
awk -v l="${load%% *}" 'BEGIN { exit !(l > 1.5) }' && \
	echo "warning: load average $load at start: the figures will not be those of a quiet machine" >&2

failed=()
[ "${BENCH_TABLE_ONLY:-}" = 1 ] && targets_to_run= || targets_to_run=$targets
for t in $targets_to_run; do
	for r in $(seq 1 "$runs"); do
		log="$logs/$t-$r.log"
		echo "=== make $t (run $r of $runs, load $(cut -d' ' -f1 /proc/loadavg))"
		if ! make --no-print-directory "$t" 2>&1 | tee "$log"; then
			failed+=("$t run $r")
		fi
	done
done

table=$(mktemp)
trap 'rm -f "$table"' EXIT
for t in $targets; do
	for r in $(seq 1 "$runs"); do
		log="$logs/$t-$r.log"
		[ -f "$log" ] || continue
		grep -a $'^goal\t' "$log" | sed "s/^/$t\t$r\t/" || true
	done
done | awk -F'\t' -v runs="$runs" -v commit="$commit" -v day="$(date -u +%F)" '
	# fields: target run "goal" id goal figure verdict load
	{
		id = $4
		if (!(id in goal)) { order[++n] = id; goal[id] = $5; target[id] = $1 }
		fig[id, $2] = $6; ver[id, $2] = $7; split($8, l, " "); ld[id, $2] = l[1]
	}
	END {
		print "| goal | figure (run 1; run 2 ...) | run | verdict |"
		print "|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			id = order[i]; figs = ""; loads = ""; met = 0; seen = 0; first = ""; same = 1
			for (r = 1; r <= runs; r++) {
				if (!((id, r) in fig)) continue
				figs = figs (seen ? "; " : "") fig[id, r]
				loads = loads (seen ? "; " : "") ld[id, r]
				if (!seen) first = ver[id, r]; else if (ver[id, r] != first) same = 0
				if (ver[id, r] == "met") met++
				seen++
			}
			v = same ? first : "met in " met " of " seen " runs"
			printf "| %s | %s | `make %s`, %s, %s, load %s | %s |\n", goal[id], figs, target[id], commit, day, loads, v
		}
	}' > "$table"

if [ "$(wc -l < "$table")" -le 2 ]; then
	echo "no goal lines were printed: $doc left as it was" >&2
else
	begin='<!-- goals:begin (make bench rewrites this table) -->'
	end='<!-- goals:end -->'
	grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || { echo "$doc has no goals markers" >&2; exit 1; }
	awk -v b="$begin" -v e="$end" -v tf="$table" '
		$0 == b { print; while ((getline l < tf) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip' "$doc" > "$doc.new" && mv "$doc.new" "$doc"
	echo "rewrote the goals table of $doc:"
	cat "$table"
fi

if [ ${#failed[@]} -gt 0 ]; then
	printf 'benchmark failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
