#!/usr/bin/env bash
# tests/bench/stmt.sh: the check's one statement alone, as committed
# against a candidate, beside `pgbench -S` (docs/BENCHMARKS.md, "The
# check's statement: what SQL alone can take off"). No otad, no HTTP: what
# Postgres spends on the statement.
#
# For each of STMT_RUNS rounds, and each statement file in turn
# (interleaved: main 1, candidate 1, main 2, …, so both see the same
# weather):
#
#   pgbench -n -S -c 8 -j 2 -T 10 -P 1 $STMT_PGBENCH_DB               &
#   pgbench -n -M prepared -c 8 -j 2 -T 10 -P 1 -f <stmt file> $STMT_DB
#
# and prints per run: the statement's tps, pgbench -S's tps, their ratio,
# and the backend CPU per statement and per -S transaction (utime+stime of
# each pgbench's 8 backends from /proc, sampled from 1 s into the run until
# the first backend exits, divided by the transactions pgbench's per-second
# progress lines put in that window); then the medians. The load average
# is printed with every run: on a shared machine read it first.
#
# The statements:
#   main       checkViewSQL of adapters/postgres/tasks.go as committed
#              (device, active task, failed firmware ids, tags, attributes
#              subquery), read from the code by tests/bench/stmtcpu -print
#   candidate  the file STMT_CANDIDATE: a replacement for checkViewSQL, in
#              the same form (devices aliased d, no WHERE clause; `--`
#              comments are dropped, so no `--` inside a string literal);
#              without it, the committed statement again, so the two rows
#              differ only by the method's noise
# Both are run by device id, a random device of the bench fleets
# (tests/bench/seed.sql: bnu-0000000 … and bru-0000000 …, STMT_HALF each);
# the check itself looks devices up by token hash, which only changes the
# device's index lookup, the same in both (tests/bench/stmtcpu runs them
# by token hash).
#
# Run it as root on the Postgres host (it reads /proc/<backend pid>/stat),
# from a checkout with Go (for -print), on a seeded bench database (or a
# copy of one, migrated to the checkout's schema, with whatever the
# candidate needs added), e.g.
#   createdb -U postgres -h 127.0.0.1 -T ota_bench_base ota_bench_stmt
#   OTA_DATABASE_URL=postgres://postgres@127.0.0.1/ota_bench_stmt?sslmode=disable ./otad migrate up
#   STMT_CANDIDATE=candidate.sql tests/bench/stmt.sh
#
# Knobs (defaults in brackets):
#   STMT_DB [ota_bench_stmt]  STMT_PGBENCH_DB [ota_bench_pgbench_10]
#   STMT_CANDIDATE [none: the committed statement]
#   STMT_RUNS [3]  STMT_DURATION [10]  STMT_CLIENTS [8]  STMT_JOBS [2]
#   STMT_HALF [the database's bnu devices]  devices per fleet
#   STMT_PG ["-U postgres -h 127.0.0.1"]   psql/pgbench connection options
#   STMT_DIR [/tmp/ota-bench/stmt]          statement files and raw outputs
#   STMT_FILES ["main candidate"]           which statements, in this order
set -euo pipefail
{

DB=${STMT_DB:-ota_bench_stmt}
PGDB=${STMT_PGBENCH_DB:-ota_bench_pgbench_10}
RUNS=${STMT_RUNS:-3}
DURATION=${STMT_DURATION:-10}
CLIENTS=${STMT_CLIENTS:-8}
JOBS=${STMT_JOBS:-2}
read -r -a PG <<<"${STMT_PG:--U postgres -h 127.0.0.1}"
DIR=${STMT_DIR:-/tmp/ota-bench/stmt}
FILES=${STMT_FILES:-main candidate}
CANDIDATE=${STMT_CANDIDATE:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$DIR"
TICK=$(getconf CLK_TCK)
HALF=${STMT_HALF:-$(psql "${PG[@]}" -XAtc "SELECT count(*) FROM devices WHERE model = 'bnu'" "$DB")}
((HALF > 0)) || { echo "stmt.sh: no bnu devices in $DB (tests/bench/seed.sql seeds them)" >&2; exit 1; }

# The statements without their WHERE clause: main from the code, the
# candidate from its file (or main again).
main=$(cd "$root" && go run ./tests/bench/stmtcpu -print)
if [[ -n $CANDIDATE ]]; then
	candidate=$(sed 's/--.*$//' "$CANDIDATE")
	candidate=${candidate%"${candidate##*[![:space:]]}"}
	candidate=${candidate%;}
else
	candidate=$main
fi
# The device: bnu-… or bru-… by parity, then its number, as seed.sql names
# them. The same expression in both files, so it costs both the same.
pick="\\set n random(0, $((2 * HALF - 1)))"
id="(CASE WHEN :n % 2 = 0 THEN 'bnu-' ELSE 'bru-' END) || lpad((:n / 2)::text, 7, '0')"
# pgbench reads one statement per line.
flat() { tr '\n\t' '  '; }
printf '%s\n%s\n' "$pick" "$(echo "$main WHERE d.device_id = $id;" | flat)" >"$DIR/main.sql"
printf '%s\n%s\n' "$pick" "$(echo "$candidate WHERE d.device_id = $id;" | flat)" >"$DIR/candidate.sql"

pids() { psql "${PG[@]}" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$1'" postgres; }
ticks() { # utime+stime of the pids, and how many of them are still there
	local tot=0 n=0 p f
	for p in "$@"; do
		f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		f=${f##*) }
		read -r -a f <<<"$f"
		tot=$((tot + f[11] + f[12])) n=$((n + 1))
	done
	echo "$tot $n"
}
# transactions in [from, to] seconds of a run, from pgbench's progress lines
# (each the rate over the second that ends at its timestamp)
window() {
	awk -v a="$2" -v b="$3" '/^progress:/ { t = $2 + 0; lo = (t - 1 > a) ? t - 1 : a; hi = (t < b) ? t : b; if (hi > lo) n += $4 * (hi - lo) } END { printf "%.0f", n }' "$1"
}

declare -A R
run() { # run FILE ROUND
	local f=$1 r=$2 out="$DIR/$1-$2"
	local t0=$EPOCHREALTIME
	pgbench "${PG[@]}" -n -S -c "$CLIENTS" -j "$JOBS" -T "$DURATION" -P 1 "$PGDB" >"$out.S.txt" 2>&1 &
	local ps=$!
	pgbench "${PG[@]}" -n -M prepared -c "$CLIENTS" -j "$JOBS" -T "$DURATION" -P 1 -f "$DIR/$f.sql" "$DB" >"$out.V.txt" 2>&1 &
	local pv=$!
	sleep 1
	local -a va sa
	until va=($(pids "$DB")) && sa=($(pids "$PGDB")) && [ ${#va[@]} -ge "$CLIENTS" ] && [ ${#sa[@]} -ge "$CLIENTS" ]; do sleep 0.1; done
	local first="" last="" a b t
	while :; do
		read -r a na <<<"$(ticks "${va[@]}")"
		read -r b nb <<<"$(ticks "${sa[@]}")"
		t=$(echo "$EPOCHREALTIME - $t0" | bc)
		[ "$na" -lt ${#va[@]} ] || [ "$nb" -lt ${#sa[@]} ] && break
		[ -n "$first" ] || first="$t $a $b"
		last="$t $a $b"
		sleep 0.2
	done
	wait "$ps" "$pv"
	local ta a1 b1 tb a2 b2
	read -r ta a1 b1 <<<"$first"
	read -r tb a2 b2 <<<"$last"
	local vt st vn sn
	vt=$(awk '/^tps/ { print $3; exit }' "$out.V.txt")
	st=$(awk '/^tps/ { print $3; exit }' "$out.S.txt")
	vn=$(window "$out.V.txt" "$ta" "$tb")
	sn=$(window "$out.S.txt" "$ta" "$tb")
	R[$f,tps,$r]=$(printf '%.0f' "$vt")
	R[$f,S,$r]=$(printf '%.0f' "$st")
	R[$f,ratio,$r]=$(echo "scale=3; $vt / $st" | bc)
	# "-" when the window held no whole second of progress (a run too short)
	R[$f,cpu,$r]=-
	R[$f,cpuS,$r]=-
	((${vn:-0} > 0)) && R[$f,cpu,$r]=$(echo "($a2 - $a1) * 1000000 / $TICK / $vn" | bc)
	((${sn:-0} > 0)) && R[$f,cpuS,$r]=$(echo "($b2 - $b1) * 1000000 / $TICK / $sn" | bc)
	printf '%-4s run %d: %6s tps, pgbench -S %6s tps, ratio %s, backend CPU %4s µs/statement, %4s µs/-S transaction (window %.1f–%.1f s), load %s\n' \
		"$f" "$r" "${R[$f,tps,$r]}" "${R[$f,S,$r]}" "${R[$f,ratio,$r]}" "${R[$f,cpu,$r]}" "${R[$f,cpuS,$r]}" "$ta" "$tb" "$(cut -d' ' -f1 /proc/loadavg)"
}
median() { printf '%s\n' "$@" | { grep -vx -- - || true; } | sort -g | awk '{ v[NR] = $1 } END { print NR == 0 ? "-" : (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$RUNS"); do
	for f in $FILES; do run "$f" "$r"; done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| statement | tps | pgbench -S tps | ratio | backend CPU µs/statement | µs/-S transaction |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for f in $FILES; do
	row="| $f"
	for k in tps S ratio cpu cpuS; do
		vals=()
		for r in $(seq 1 "$RUNS"); do vals+=("${R[$f,$k,$r]}"); done
		row+=" | $(median "${vals[@]}") (${vals[*]})"
	done
	echo "$row |"
done

}
