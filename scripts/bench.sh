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
# The logs stay in .cache/bench/<target>-<run>.log, each headed by the commit
# and the day it ran at; BENCH_TABLE_ONLY=1 rebuilds the table from them
# without running anything. A row whose goal no log printed (a target left
# out of BENCH_TARGETS, its logs gone) is kept as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=${BENCH_TARGETS:-bench-desktopd bench-vmmanager bench-k8s bench-storage bench-gateway bench-mesh bench-coordinator bench-osworld-eval bench-osworld-setup}
runs=${BENCH_RUNS:-2}
doc=${BENCH_DOC:-docs/benchmarks.md}
logs=.cache/bench
mkdir -p "$logs"

commit=$(git rev-parse --short HEAD)
# The table this script rewrites is not a change to what is measured.
[ -z "$(git status --porcelain --untracked-files=no -- . ":(exclude)$doc")" ] || commit="$commit+changes"
load=$(cut -d' ' -f1-3 /proc/loadavg)
awk -v l="${load%% *}" 'BEGIN { exit !(l > 1.5) }' && \
	echo "warning: load average $load at start: the figures will not be those of a quiet machine" >&2

failed=()
[ "${BENCH_TABLE_ONLY:-}" = 1 ] && targets_to_run= || targets_to_run=$targets
for t in $targets_to_run; do
	for r in $(seq 1 "$runs"); do
		log="$logs/$t-$r.log"
		echo "=== make $t (run $r of $runs, load $(cut -d' ' -f1 /proc/loadavg))"
		printf 'bench-run\t%s\t%s\n' "$commit" "$(date -u +%F)" > "$log"
		if ! make --no-print-directory "$t" 2>&1 | tee -a "$log"; then
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
		# Logs written before the header line existed are labelled with
		# this run's commit and day.
		IFS=$'\t' read -r tag at day < "$log" || true
		[ "$tag" = bench-run ] || { at=$commit; day=$(date -u +%F); }
		grep -a $'^goal\t' "$log" | sed "s/^/$t\t$r\t$at\t$day\t/" || true
	done
done | awk -F'\t' -v runs="$runs" '
	# fields: target run commit day "goal" id goal figure verdict load
	{
		id = $6
		if (!(id in goal)) { order[++n] = id; goal[id] = $7; target[id] = $1 }
		fig[id, $2] = $8; ver[id, $2] = $9; split($10, l, " "); ld[id, $2] = l[1]
		at[id, $2] = $3 ", " $4
	}
	END {
		print "| goal | figure (run 1; run 2 ...) | run | verdict |"
		print "|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			id = order[i]; figs = ""; loads = ""; ats = ""; met = 0; seen = 0; first = ""; same = 1
			for (r = 1; r <= runs; r++) {
				if (!((id, r) in fig)) continue
				figs = figs (seen ? "; " : "") fig[id, r]
				loads = loads (seen ? "; " : "") ld[id, r]
				# One label when every run was at the same commit and day.
				if (!seen) ats = at[id, r]; else if (index(ats, at[id, r]) == 0) ats = ats "; " at[id, r]
				if (!seen) first = ver[id, r]; else if (ver[id, r] != first) same = 0
				if (ver[id, r] == "met") met++
				seen++
			}
			v = same ? first : "met in " met " of " seen " runs"
			printf "| %s | %s | `make %s`, %s, load %s | %s |\n", goal[id], figs, target[id], ats, loads, v
		}
	}' > "$table"

if [ "$(wc -l < "$table")" -le 2 ]; then
	echo "no goal lines were printed: $doc left as it was" >&2
else
	begin='<!-- goals:begin (make bench rewrites this table) -->'
	end='<!-- goals:end -->'
	grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || { echo "$doc has no goals markers" >&2; exit 1; }
	# The old table's rows in their order, each replaced by the new row of
	# the same goal (the first column); the new table's other rows after.
	awk -v b="$begin" -v e="$end" -v tf="$table" '
		function goalof(row,   f) { split(row, f, " \\| "); return f[1] }
		BEGIN {
			while ((getline l < tf) > 0) {
				if (l ~ /^\| goal \|/ || l ~ /^\|---/) { head = head l "\n"; continue }
				g = goalof(l); row[g] = l; order[++n] = g
			}
		}
		$0 == b { print; printf "%s", head; skip = 1; next }
		$0 == e {
			for (i = 1; i <= n; i++) if (!(order[i] in done)) print row[order[i]]
			skip = 0
		}
		skip && /^\| / && !/^\| goal \|/ && !/^\|---/ {
			g = goalof($0)
			if (g in row) { print row[g]; done[g] = 1 } else print
			next
		}
		!skip' "$doc" > "$doc.new" && mv "$doc.new" "$doc"
	echo "rewrote the goals table of $doc:"
	cat "$table"
fi

if [ ${#failed[@]} -gt 0 ]; then
	printf 'benchmark failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
