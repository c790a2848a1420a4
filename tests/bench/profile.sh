#!/usr/bin/env bash
# tests/bench/profile.sh: where one check's CPU goes, under make bench's
# load (docs/BENCHMARKS.md, "What stands between the check and the
# targets"). Run make bench once first: it seeds the database and writes
# the token files this script reuses.
#
#   tests/bench/profile.sh OTAD noupdate|reuse [SECONDS] [OFFSET]
#
# Starts OTAD (a built otad binary) with OTA_PPROF_ADDR on the bench
# database, warms its pool, then for SECONDS [10] runs wrk -t2 -c64 with
# check.lua from device OFFSET [0] of the fleet beside pgbench -S -c 8 -j 2,
# while taking a Go CPU profile. It prints, per check, the CPU of otad, of
# otad's pool backends in Postgres and of wrk, the Postgres transactions
# and otad's write(2) calls; per pgbench transaction, its backends' and
# its client's CPU; and each side's share of the machine. The profile goes
# to $BENCH_DIR/cpu-<scenario>.pprof (go tool pprof -top -cum OTAD FILE).
# Run as the user who can read Postgres' /proc entries (root here).
# Knobs: BENCH_DIR [/tmp/ota-bench], BENCH_DB [ota_bench_1000000_1000000],
# BENCH_PGBENCH_DB [ota_bench_pgbench_10], BENCH_PG
# [postgres://postgres@127.0.0.1:5432], PROFILE_ADDR [127.0.0.1:18491],
# PROFILE_PPROF_ADDR [127.0.0.1:16061].
set -euo pipefail
{
die() { echo "profile: $*" >&2; exit 1; }
[[ $# -ge 2 ]] || die "usage: $0 OTAD noupdate|reuse [SECONDS] [OFFSET]"
otad=$1 secs=${3:-10} off=${4:-0}
case $2 in noupdate) model=bnu ;; reuse) model=bru ;; *) die "scenario must be noupdate or reuse" ;; esac
[[ $secs =~ ^[0-9]+$ && $secs -ge 2 && $off =~ ^[0-9]+$ ]] || die "SECONDS (≥ 2) and OFFSET must be whole numbers"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=${BENCH_DIR:-/tmp/ota-bench}
DB=${BENCH_DB:-ota_bench_1000000_1000000}
PGB_DB=${BENCH_PGBENCH_DB:-ota_bench_pgbench_10}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
ADDR=${PROFILE_ADDR:-127.0.0.1:18491}
PP=${PROFILE_PPROF_ADDR:-127.0.0.1:16061}
tokens=$W/tokens-$DB-$model.txt
[[ -s $tokens ]] || die "no $tokens: run make bench first"
for t in wrk pgbench psql curl; do command -v $t >/dev/null || die "missing $t"; done
q() { psql -XAtq "$PG/postgres?sslmode=disable" -c "$1"; }

OTA_DATABASE_URL="$PG/$DB?sslmode=disable" OTA_REDIS_URL=${OTA_REDIS_URL:-redis://127.0.0.1:6379/0} \
  OTA_ADMIN_TOKEN=bench-admin-token-0123456789 OTA_HTTP_ADDR=$ADDR OTA_PPROF_ADDR=$PP \
  OTA_DEVICE_RATE_LIMIT=0 OTA_LOG_LEVEL=error OTA_STORE=postgres \
  "$otad" serve --no-migrate >"$W/profile-otad.log" 2>&1 &
OP=$!
trap 'kill $OP 2>/dev/null || true; wait $OP 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "http://$ADDR/healthz" >/dev/null && break; sleep 0.1; done
curl -fs "http://$ADDR/healthz" >/dev/null || { cat "$W/profile-otad.log" >&2; die "otad does not answer"; }
# Warm-up elsewhere in the fleet: the pool opens its connections.
wrk -t2 -c64 -d2s -s "$here/check.lua" "http://$ADDR" -- "$tokens" $model $((off + 250000)) 2 >/dev/null 2>&1 || true

pids=$(q "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = '$DB' AND backend_type = 'client backend'")
pm=$(head -1 "$(q 'SHOW data_directory')/postmaster.pid")
ticks() { local s=0 p; for p in "$@"; do [[ -r /proc/$p/stat ]] && s=$((s + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo $s; }
exited() { awk '{ print $16 + $17 }' "/proc/$pm/stat"; } # backends that exited (pgbench's)
xacts() { q "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$DB'"; }
writes() { awk '/^syscw:/ { print $2 }' "/proc/$OP/io"; }
o0=$(ticks $OP) p0=$(ticks $pids) x0=$(xacts) e0=$(exited) w0=$(writes)
curl -fs -o "$W/cpu-$2.pprof" "http://$PP/debug/pprof/profile?seconds=$((secs - 1))" &
CP=$!
/usr/bin/time -f "%U %S" -o "$W/profile-pgbench.time" pgbench -n -S -c 8 -j 2 -T "$secs" "$PG/$PGB_DB?sslmode=disable" >"$W/profile-pgbench.txt" 2>&1 &
PB=$!
/usr/bin/time -f "%U %S" -o "$W/profile-wrk.time" wrk -t2 -c64 -d"${secs}s" -s "$here/check.lua" "http://$ADDR" \
  -- "$tokens" $model "$off" 2 >"$W/profile-wrk.txt" 2>&1
wait $PB
sleep 1 # the postmaster adds an exited backend's CPU to its own only once it reaped it
o1=$(ticks $OP) p1=$(ticks $pids) x1=$(xacts) e1=$(exited) w1=$(writes)
wait $CP || die "no profile from $PP"
n=$(awk '/ requests in / { print $1 }' "$W/profile-wrk.txt")
rps=$(awk '/^Requests\/sec:/ { print $2 }' "$W/profile-wrk.txt")
tps=$(awk '/^tps = / { print $3; exit }' "$W/profile-pgbench.txt")
ptx=$(awk '/number of transactions actually processed/ { print $NF }' "$W/profile-pgbench.txt")
read -r wu ws <"$W/profile-wrk.time"
read -r bu bs <"$W/profile-pgbench.time"
awk -v sc="$2" -v n="$n" -v rps="$rps" -v tps="$tps" -v ptx="$ptx" -v hz="$(getconf CLK_TCK)" -v secs="$secs" \
  -v od=$((o1 - o0)) -v pd=$((p1 - p0)) -v xd=$((x1 - x0)) -v ed=$((e1 - e0)) -v wd=$((w1 - w0)) \
  -v wc="$(awk -v a="$wu" -v b="$ws" 'BEGIN { print a + b }')" -v bc="$(awk -v a="$bu" -v b="$bs" 'BEGIN { print a + b }')" \
  -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
  us = 1e6 / hz
  printf "%s: %d checks (%.0f/s) beside pgbench %.0f tps: ratio %.3f (load %s)\n", sc, n, rps, tps, rps / tps, la
  printf "  per check: otad %.0f µs CPU, its Postgres backends %.0f µs, wrk %.0f µs; %.2f Postgres transactions, %.2f otad write(2)\n",
    od * us / n, pd * us / n, wc * 1e6 / n, xd / n, wd / n
  printf "  per pgbench transaction: backends %.0f µs (exited backends: an upper bound), pgbench %.0f µs\n", ed * us / ptx, bc * 1e6 / ptx
  printf "  shares of the machine (%% of one core): otad %.0f, its backends %.0f, wrk %.0f | pgbench backends %.0f, pgbench %.0f\n",
    od * us / secs / 1e4, pd * us / secs / 1e4, wc / secs * 100, ed * us / secs / 1e4, bc / secs * 100
}'
echo "  profile: go tool pprof -top -cum $otad $W/cpu-$2.pprof"
exit
}
