#!/usr/bin/env bash
# tests/bench/bench.sh (make bench): the check path's throughput, measured
# from outside, repeatable (docs/BENCHMARKS.md).
#
# On a database of BENCH_DEVICES devices (two fleets of half each: "bnu",
# where nothing is offered, and "bru", where every device already holds its
# pending task of a 100 % rollout), BENCH_HISTORY finished tasks, and a
# third fleet of BENCH_CREATE_DEVICES, "bcr", offered a 100 % rollout but
# without tasks, it serves with a freshly built otad (OTA_DEVICE_RATE_LIMIT=0,
# OTA_LOG_LEVEL=error) and, for each scenario (no update, reuse, create),
# runs BENCH_RUNS times, interleaved:
#
#   wrk -t2 -c64 -d10s -s check.lua      cold checks: no device polls twice
#   pgbench -S -c 8 -j 2 -T 10           at the same time, on its own database
#                                        (create: pgbench -N, simple-update)
#
# and reports the median checks/s, the same runs' pgbench tps and their
# ratio; then, for no update and reuse, an open-loop run at half the
# median rate (the load simulator, tests/load, with -rate: Poisson
# arrivals; Debian has no wrk2) for p99. Before each create run (and after
# its warm-up) the bcr fleet's tasks are deleted and tasks vacuumed, so
# that every device's first check creates its task.
# The table goes to stdout and, as markdown, to BENCH_OUT.
#
# Then (BENCH_DELIVERY=1) webhook delivery: a subscription to
# task.succeeded pointed at Debian's nginx answering 204 on loopback, a
# backlog of BENCH_DELIVERY_BACKLOG events written as the outbox's
# fan-out writes them (one event row, one due delivery row each), and
#   drain:  the backlog delivered with nothing else running (events/s)
#   beside: for no update and reuse, BENCH_RUNS runs of the same wrk
#           (alone: pgbench beside it takes a share of the CPU that
#           varies by a third from run to run, far more than the
#           deliveries cost; BENCH_DELIVERY_PGBENCH=1 runs it too), each
#           after a fresh backlog is written: due a day later (idle:
#           nothing delivered), or due now (busy: delivered meanwhile), so
#           that both pay alike for writing it (interleaved; medians
#           compared)
#
# The seeded database is kept and reused while its row counts are right, so
# only the first run pays for seeding. Missing tools (wrk, pgbench, jq) are
# installed from Debian's packages when running as root.
#
# Every knob is an environment variable (defaults in brackets):
#   BENCH_DEVICES [1000000]   devices in all (half per fleet)
#   BENCH_HISTORY [1000000]   finished historical tasks
#   BENCH_CREATE_DEVICES [devices / 10]  devices of the creation fleet
#   BENCH_DURATION [10]       seconds per run
#   BENCH_RUNS [3]            runs per scenario (the median is reported)
#   BENCH_WARMUP [2]          seconds of wrk per scenario before the runs (0: none)
#   BENCH_THREADS [2] BENCH_CONNS [64]                 wrk -t / -c
#   BENCH_PGBENCH_CLIENTS [8] BENCH_PGBENCH_JOBS [2]   pgbench -c / -j
#   BENCH_PGBENCH_SCALE [10]  pgbench -i -s of its own database
#   BENCH_PG [postgres://postgres@127.0.0.1:5432]      the Postgres server
#   BENCH_DB [ota_bench_<devices>_<history>]           the service's database
#   BENCH_PGBENCH_DB [ota_bench_pgbench_<scale>]       pgbench's database
#   BENCH_REDIS_URL [redis://127.0.0.1:6379/0]
#   BENCH_ADDR [127.0.0.1:18480]                       where otad listens
#   BENCH_DIR [/tmp/ota-bench]   binaries, token files, logs, raw outputs
#   BENCH_OUT [$BENCH_DIR/results.md]                  the markdown summary
#   BENCH_OPEN_LOOP [1]       0 skips the open-loop runs
#   BENCH_SCENARIOS ["noupdate reuse create"]  which scenarios run, in this order
#   BENCH_OPEN_CONCURRENCY [256]  the simulator's workers in the open loop
#   BENCH_CLEANUP [0]         1 drops both databases at the end
#   BENCH_INSTALL [1]         0 never runs apt-get
#   BENCH_OTAD, BENCH_LOADSIM  use these binaries instead of building
#   BENCH_DELIVERY [1]        0 skips the webhook delivery runs
#   BENCH_DELIVERY_BACKLOG [60000]  events in each delivery backlog
#   BENCH_DELIVERY_PGBENCH [0]  1 runs pgbench beside wrk in the delivery runs
# Any OTA_* variable set by the caller (OTA_DB_MAX_CONNS, say) reaches otad,
# except the few fixed above.
set -euo pipefail
# The whole script is one group, read before it runs: editing the file
# during a run (a git checkout) cannot make bash run other lines.
{

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

DEVICES=${BENCH_DEVICES:-1000000}
HISTORY=${BENCH_HISTORY:-1000000}
DURATION=${BENCH_DURATION:-10}
RUNS=${BENCH_RUNS:-3}
WARMUP=${BENCH_WARMUP:-2}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNS:-64}
PGB_CLIENTS=${BENCH_PGBENCH_CLIENTS:-8}
PGB_JOBS=${BENCH_PGBENCH_JOBS:-2}
PGB_SCALE=${BENCH_PGBENCH_SCALE:-10}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
DB=${BENCH_DB:-ota_bench_${DEVICES}_${HISTORY}}
PGB_DB=${BENCH_PGBENCH_DB:-ota_bench_pgbench_${PGB_SCALE}}
REDIS_URL=${BENCH_REDIS_URL:-redis://127.0.0.1:6379/0}
ADDR=${BENCH_ADDR:-127.0.0.1:18480}
WORK=${BENCH_DIR:-/tmp/ota-bench}
OUT=${BENCH_OUT:-$WORK/results.md}
OPEN_LOOP=${BENCH_OPEN_LOOP:-1}
OPEN_CONC=${BENCH_OPEN_CONCURRENCY:-256}
CLEANUP=${BENCH_CLEANUP:-0}
DELIVERY=${BENCH_DELIVERY:-1}
BACKLOG=${BENCH_DELIVERY_BACKLOG:-60000}
DELIVERY_ALONE=alone
[[ ${BENCH_DELIVERY_PGBENCH:-0} != 1 ]] || DELIVERY_ALONE=
INSTALL=${BENCH_INSTALL:-1}
SECRET=ota-load-simulator # the load simulator's default token key
ADMIN_TOKEN=bench-admin-token-0123456789

[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "bench: BENCH_WARMUP must be a whole number of seconds" >&2; exit 1; }
die() { echo "bench: $*" >&2; exit 1; }
T_START=$EPOCHREALTIME
note() { echo "bench: [$(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }')] $*" >&2; }
for v in DEVICES HISTORY DURATION RUNS THREADS CONNS PGB_CLIENTS PGB_JOBS PGB_SCALE BACKLOG; do
  n=${v/PGB_/PGBENCH_}
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "BENCH_${n/#BACKLOG/DELIVERY_BACKLOG} must be a positive integer, not '${!v}'"
done
((DEVICES % 2 == 0)) || die "BENCH_DEVICES must be even (two fleets of half each)"
[[ $DB =~ ^[a-z0-9_]+$ && $PGB_DB =~ ^[a-z0-9_]+$ ]] || die "database names must be [a-z0-9_]"
HALF=$((DEVICES / 2))
CREATE=${BENCH_CREATE_DEVICES:-$((DEVICES / 10))}
[[ $CREATE =~ ^[0-9]+$ && $CREATE -gt 0 ]] || die "BENCH_CREATE_DEVICES must be a positive integer, not '$CREATE'"
FW_CREATE=00000000-0000-4000-8000-0000000000c2
DB_URL="$PG/$DB?sslmode=disable"
PGB_URL="$PG/$PGB_DB?sslmode=disable"
mkdir -p "$WORK"

# ---- tools ----------------------------------------------------------------
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v pgbench >/dev/null || need+=(postgresql-contrib) # Debian 12: pgbench ships in postgresql-15
command -v psql >/dev/null || need+=(postgresql-client)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
[[ $DELIVERY != 1 ]] || command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need+=(nginx-light)
if ((${#need[@]})); then
  if [[ $INSTALL == 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    note "installing ${need[*]} from Debian"
    apt-get install -y "${need[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${need[@]}" >/dev/null; }
  else
    die "missing tools: ${need[*]} (apt-get install -y ${need[*]})"
  fi
fi

psql_db() { psql "$1" -XAtq -v ON_ERROR_STOP=1 "${@:2}"; }
ensure_db() { # name
  if [[ -z $(psql_db "$PG/postgres?sslmode=disable" -c "SELECT 1 FROM pg_database WHERE datname = '$1'") ]]; then
    psql_db "$PG/postgres?sslmode=disable" -c "CREATE DATABASE $1" >/dev/null
  fi
}

# ---- binaries -------------------------------------------------------------
OTAD=${BENCH_OTAD:-}
LOADSIM=${BENCH_LOADSIM:-}
pkgs=()
[[ -n $OTAD ]] || pkgs+=(.)
[[ -n $LOADSIM || $OPEN_LOOP != 1 ]] || pkgs+=(./tests/load)
if ((${#pkgs[@]})); then
  # One go build for both: they link in parallel. Each binary is named
  # after its import path's last element: "ota" (the module) and "load".
  note "building ${pkgs[*]}"
  mkdir -p "$WORK/bin"
  (cd "$root" && go build -o "$WORK/bin/" "${pkgs[@]}")
  [[ -n $OTAD ]] || { mv "$WORK/bin/ota" "$WORK/otad"; OTAD=$WORK/otad; }
  [[ -n $LOADSIM || $OPEN_LOOP != 1 ]] || { mv "$WORK/bin/load" "$WORK/loadsim"; LOADSIM=$WORK/loadsim; }
fi
COMMIT="commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -z $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] || COMMIT="$COMMIT (+ uncommitted changes)"
[[ -z ${BENCH_OTAD:-} ]] || COMMIT="otad $OTAD (given; the tree is at $COMMIT)"

# ---- databases ------------------------------------------------------------
t0=$(date +%s)
ensure_db "$DB"
OTA_DATABASE_URL=$DB_URL "$OTAD" migrate up >"$WORK/migrate.log" 2>&1 || { cat "$WORK/migrate.log" >&2; die "migrating $DB failed"; }
# The creation fleet's tasks of an earlier run go first: they are not seeded.
psql_db "$DB_URL" -c "DELETE FROM tasks WHERE firmware_id = '$FW_CREATE'" >/dev/null
counts=$(psql_db "$DB_URL" -F' ' -c "SELECT
  (SELECT count(*) FROM devices WHERE model = 'bnu'), (SELECT count(*) FROM devices WHERE model = 'bru'),
  (SELECT count(*) FROM devices WHERE model = 'bcr'),
  (SELECT count(*) FROM devices),
  (SELECT count(*) FROM tasks WHERE firmware_id IN ('00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000b1')),
  (SELECT count(*) FROM tasks WHERE firmware_id = '00000000-0000-4000-8000-0000000000b2' AND status = 'pending'),
  (SELECT count(*) FROM tasks),
  (SELECT count(*) FROM rollouts WHERE id IN ('00000000-0000-4000-9000-0000000000b2', '00000000-0000-4000-9000-0000000000c2') AND status = 'active')")
want="$HALF $HALF $CREATE $((DEVICES + CREATE)) $HISTORY $HALF $((HISTORY + HALF)) 2"
if [[ $counts == "$want" ]]; then
  note "reusing $DB ($DEVICES devices and $CREATE to create for, $HISTORY historical tasks)"
  SEEDED="reused"
  # The reuse fleet's pending tasks must stay inside the rollout's
  # task_timeout (24 h), or every check would time them out and create
  # the next attempt: a database seeded a while ago is brought forward.
  stale=$(psql_db "$DB_URL" -c "WITH s AS (UPDATE tasks SET created_at = now() - interval '1 hour', updated_at = now() - interval '1 hour'
    WHERE firmware_id = '00000000-0000-4000-8000-0000000000b2' AND status = 'pending' AND updated_at < now() - interval '12 hours' RETURNING 1)
    SELECT count(*) FROM s")
  if [[ $stale != 0 ]]; then
    note "brought $stale pending tasks forward to an hour old"
    psql_db "$DB_URL" -c "VACUUM ANALYZE tasks" >/dev/null
  fi
else
  note "seeding $DB: $DEVICES devices and $CREATE to create for, $HISTORY historical tasks, $HALF active tasks (found: $counts; want: $want)"
  s=$(date +%s)
  psql_db "$DB_URL" -v half="$HALF" -v creation="$CREATE" -v history="$HISTORY" -v secret="$SECRET" -f "$here/seed.sql" >/dev/null
  SEEDED="seeded in $(($(date +%s) - s)) s"
  rm -f "$WORK/tokens-$DB-"*.txt
  note "$SEEDED"
fi
# Token files for wrk: "device_id token", shuffled (a fleet polls in no
# order), recomputed from the ids with the expression seed.sql stored.
declare -A FLEET=([bnu]=$HALF [bru]=$HALF [bcr]=$CREATE)
for m in bnu bru bcr; do
  f=$WORK/tokens-$DB-$m.txt
  if [[ ! -s $f || $(wc -l <"$f") -ne ${FLEET[$m]} ]]; then
    psql_db "$DB_URL" -c "COPY (SELECT device_id || ' sim_' || rtrim(translate(encode(hmac(device_id, '$SECRET', 'sha256'), 'base64'), '+/', '-_'), '=')
      FROM devices WHERE model = '$m' ORDER BY md5(device_id)) TO STDOUT" >"$f.tmp"
    mv "$f.tmp" "$f"
  fi
done
ensure_db "$PGB_DB"
if [[ $(psql_db "$PGB_URL" -c "SELECT count(*) FROM pgbench_accounts" 2>/dev/null || echo 0) != $((PGB_SCALE * 100000)) ]]; then
  note "initialising $PGB_DB (pgbench -i -s $PGB_SCALE)"
  pgbench -i -q -s "$PGB_SCALE" "$PGB_URL" >"$WORK/pgbench-init.log" 2>&1 || { cat "$WORK/pgbench-init.log" >&2; die "pgbench -i failed"; }
fi
SETUP_S=$(($(date +%s) - t0))
note "databases ready"

# ---- otad ---------------------------------------------------------------
OTAD_PID=
cleanup() {
  [[ ! -f $WORK/receiver/nginx.pid ]] || kill "$(cat "$WORK/receiver/nginx.pid")" 2>/dev/null || true
  if [[ -n $OTAD_PID ]] && kill -0 "$OTAD_PID" 2>/dev/null; then
    kill -TERM "$OTAD_PID" 2>/dev/null || true
    wait "$OTAD_PID" 2>/dev/null || true
  fi
  if [[ $CLEANUP == 1 ]]; then
    psql_db "$PG/postgres?sslmode=disable" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "DROP DATABASE IF EXISTS $PGB_DB WITH (FORCE)" >/dev/null 2>&1 || true
    rm -f "$WORK/tokens-$DB-"*.txt
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap 'exit 141' PIPE # a reader that went away (| head) must still get otad stopped
BASE=http://$ADDR
OTA_DATABASE_URL=$DB_URL OTA_REDIS_URL=$REDIS_URL OTA_ADMIN_TOKEN=$ADMIN_TOKEN OTA_HTTP_ADDR=$ADDR \
  OTA_DEVICE_RATE_LIMIT=0 OTA_LOG_LEVEL=${BENCH_LOG_LEVEL:-error} OTA_STORE=postgres OTA_WEBHOOK_ALLOW_PRIVATE=true \
  "$OTAD" serve --no-migrate >"$WORK/otad.log" 2>&1 &
OTAD_PID=$!
for _ in $(seq 1 150); do
  curl -fs "$BASE/healthz" >/dev/null 2>&1 && break
  kill -0 "$OTAD_PID" 2>/dev/null || { cat "$WORK/otad.log" >&2; die "otad exited"; }
  sleep 0.2
done
curl -fs "$BASE/healthz" >/dev/null || die "otad does not answer on $BASE"
note "otad serving on $BASE"

# Each fleet answers as its scenario says, before anything is measured.
probe() { # model → the check's answer
  local id tok
  read -r id tok < <(head -n1 "$WORK/tokens-$DB-$1.txt")
  curl -fsS -X POST "$BASE/api/v1/devices/$id/ota/check" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -d "{\"model\":\"$1\",\"current_version\":\"1.0.0\"}"
}
[[ $(probe bnu | jq -r .update_available) == false ]] || die "a bnu device was offered an update"
[[ $(probe bru | jq -r '.update_available and (.task.status == "pending")') == true ]] || die "a bru device has no pending task: $(probe bru)"
[[ $(probe bcr | jq -r '.update_available and (.task.status == "pending")') == true ]] || die "a bcr device was not given a task: $(probe bcr)"
# reset_creations: the creation fleet without tasks again, its dead rows
# vacuumed, so that every run creates on the same table.
reset_creations() {
  psql_db "$DB_URL" -c "DELETE FROM tasks WHERE firmware_id = '$FW_CREATE'" -c "VACUUM tasks" >/dev/null
}
reset_creations

outcomes() { # → "no_update reused created cancelled other" counters from /metrics
  curl -fs "$BASE/metrics" | awk '/^ota_checks_total\{/ {
      split($1, a, "\""); n[a[2]] += $2 }
    END { o = 0; for (k in n) if (k != "no_update" && k != "reused" && k != "created" && k != "cancelled") o += n[k]
          printf "%d %d %d %d %d\n", n["no_update"], n["reused"], n["created"], n["cancelled"], o }'
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A MODEL=([noupdate]=bnu [reuse]=bru [create]=bcr) PGB_SCRIPT=([noupdate]=-S [reuse]=-S [create]=-N)
read -r -a SCENARIOS <<<"${BENCH_SCENARIOS:-noupdate reuse create}"
OPEN_SCENARIOS=() # a poll after the first would reuse: no open loop of creations
for sc in "${SCENARIOS[@]}"; do
  [[ -n ${MODEL[$sc]:-} ]] || die "BENCH_SCENARIOS: unknown scenario '$sc' (noupdate, reuse, create)"
  [[ $sc == create ]] || OPEN_SCENARIOS+=("$sc")
done

# wrk against one fleet from a device offset, pgbench in the same window.
# otad's own cost, whatever else runs on the machine: CPU time (user +
# system, clock ticks) and write(2) calls (log lines, HTTP answers and
# Postgres queries alike) so far.
otad_usage() { echo "$(awk '{ print $14 + $15 }' "/proc/$OTAD_PID/stat") $(awk '/^syscw:/ { print $2 }' "/proc/$OTAD_PID/io")"; }
TICK=$(getconf CLK_TCK)

pair() { # scenario run offset seconds [alone] → one result line (alone: wrk without pgbench, tps 0)
  local sc=$1 run=$2 off=$3 secs=$4 alone=${5:-} w=$WORK/wrk-$1-$2.txt p=$WORK/pgbench-$1-$2.txt
  local cpu0 wr0 cpu1 wr1 pg
  read -r cpu0 wr0 <<<"$(otad_usage)"
  if [[ -n $alone ]]; then
    echo "tps = 0" >"$p"
    pg=
  else
    pgbench -n "${PGB_SCRIPT[$sc]}" -c "$PGB_CLIENTS" -j "$PGB_JOBS" -T "$secs" "$PGB_URL" >"$p" 2>&1 &
    pg=$!
  fi
  wrk -t"$THREADS" -c"$CONNS" -d"${secs}s" --latency -s "$here/check.lua" "$BASE" \
    -- "$WORK/tokens-$DB-${MODEL[$sc]}.txt" "${MODEL[$sc]}" "$off" "$THREADS" >"$w" 2>&1 || { cat "$w" >&2; die "wrk failed"; }
  [[ -z $pg ]] || wait "$pg" || { cat "$p" >&2; die "pgbench failed"; }
  read -r cpu1 wr1 <<<"$(otad_usage)"
  local rps tps non2xx repeats p99 errs reqs cpu wr
  reqs=$(awk '/ requests in / { print $1 }' "$w")
  cpu=$(awk -v d=$((cpu1 - cpu0)) -v t="$TICK" -v n="${reqs:-0}" 'BEGIN { printf "%.0f", n ? d / t * 1e6 / n : 0 }')
  wr=$(awk -v d=$((wr1 - wr0)) -v n="${reqs:-0}" 'BEGIN { printf "%.2f", n ? d / n : 0 }')
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$w")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$w")
  errs=$(awk '/Socket errors:/ { print }' "$w")
  repeats=$(awk '/^bench: repeats/ { print $3 }' "$w")
  p99=$(awk '/^ +99%/ { print $2 }' "$w")
  tps=$(awk '/^tps = / { print $3; exit }' "$p")
  [[ -n $rps && -n $tps ]] || { cat "$w" "$p" >&2; die "could not read wrk's or pgbench's output"; }
  [[ -z $non2xx ]] || { cat "$w" >&2; die "$sc run $run: $non2xx answers were not 2xx (see $WORK/otad.log)"; }
  echo "$rps $tps ${repeats:-0} ${p99:-?} $cpu $wr ${errs:+yes}"
}

note "setup took ${SETUP_S}s; load average $(loadavg)"
declare -A RPS TPS RATIO P99 REPEATS CPU WR
BEFORE=$(outcomes)
for sc in "${SCENARIOS[@]}"; do
  # Warm-up: every pooled connection prepares its statements, caches fill.
  if ((WARMUP > 0)); then
    wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP}s" -s "$here/check.lua" "$BASE" \
      -- "$WORK/tokens-$DB-${MODEL[$sc]}.txt" "${MODEL[$sc]}" "$((${FLEET[${MODEL[$sc]}]} / 2 + 7))" "$THREADS" >/dev/null 2>&1 || true
  fi
done
declare -a RUNROWS
LOAD_START=$(loadavg)
for run in $(seq 1 "$RUNS"); do
  for sc in "${SCENARIOS[@]}"; do
    [[ $sc != create ]] || reset_creations
    la=$(loadavg)
    line=$(pair "$sc" "$run" $(((run - 1) * ${FLEET[${MODEL[$sc]}]} / RUNS)) "$DURATION") || exit 1
    read -r rps tps repeats p99 cpu wr errs <<<"$line"
    ratio=$(awk -v a="$rps" -v b="$tps" 'BEGIN { printf "%.3f", a / b }')
    RPS[$sc]+="$rps "; TPS[$sc]+="$tps "; RATIO[$sc]+="$ratio "; P99[$sc]+="$p99 "; CPU[$sc]+="$cpu "; WR[$sc]+="$wr "; REPEATS[$sc]=$((${REPEATS[$sc]:-0} + repeats))
    RUNROWS+=("| $sc | $run | $la/$(loadavg) | $(printf '%.0f' "$rps") | $(printf '%.0f' "$tps") | $ratio | $p99 | $cpu | $wr | $repeats${errs:+ (socket errors)} |")
    note "$sc run $run: $(printf '%.0f' "$rps") checks/s, pgbench $(printf '%.0f' "$tps") tps, ratio $ratio, wrk p99 $p99, otad ${cpu} µs CPU and $wr writes per check, load $la/$(loadavg)"
  done
done
LOAD_END=$(loadavg)

# Outcomes: every check of a scenario answered as the scenario says.
# wrk drops the requests in flight when a run ends: otad counts those as
# cancelled (at most -c per run).
read -r nu1 ru1 cr1 ca1 ot1 <<<"$(outcomes)"
read -r nu0 ru0 cr0 ca0 ot0 <<<"$BEFORE"
OUTCOME_LINE="Checks counted by otad (ota_checks_total) over warm-up and runs: no_update +$((nu1 - nu0)), reused +$((ru1 - ru0)), created +$((cr1 - cr0)), cancelled by wrk's stop +$((ca1 - ca0)), other +$((ot1 - ot0))"
((ot1 - ot0 == 0)) || die "$OUTCOME_LINE: some checks neither no_update, reused nor created"

med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
# ---- open loop ------------------------------------------------------------
declare -A OL_RATE OL_RPS OL_P50 OL_P99 OL_MAX OL_LATE OL_OK
if [[ $OPEN_LOOP == 1 ]]; then
  for sc in "${OPEN_SCENARIOS[@]}"; do
    rate=$(awk -v r="$(med "${RPS[$sc]}")" 'BEGIN { printf "%.0f", r / 2 }')
    j=$WORK/openloop-$sc.json
    "$LOADSIM" -mode poll -seed -devices "$HALF" -model "${MODEL[$sc]}" -token-secret "$SECRET" \
      -rate "$rate" -concurrency "$OPEN_CONC" -duration "${DURATION}s" -urls "$BASE" \
      -database-url "$DB_URL" -quiet -json >"$j" 2>"$WORK/openloop-$sc.err" || true
    jq -e .calls.check >/dev/null 2>&1 <"$j" || { cat "$WORK/openloop-$sc.err" >&2; die "open loop ($sc) failed"; }
    OL_RATE[$sc]=$rate
    OL_RPS[$sc]=$(jq -r '.calls.check.rps | floor' <"$j")
    OL_P50[$sc]=$(jq -r .calls.check.p50_ms <"$j")
    OL_P99[$sc]=$(jq -r .calls.check.p99_ms <"$j")
    OL_MAX[$sc]=$(jq -r .calls.check.max_ms <"$j")
    OL_LATE[$sc]=$(jq -r .sim.dispatch_late <"$j")
    OL_OK[$sc]=$(jq -r 'if .ok and .calls.check.ok == .calls.check.count then "yes" else "NO" end' <"$j")
    note "open loop $sc at $rate/s: delivered ${OL_RPS[$sc]}/s, p99 ${OL_P99[$sc]} ms"
  done
fi

# ---- webhook delivery -------------------------------------------------------
# A receiver that costs little (nginx, 204), a subscription to it, and
# backlogs written straight into the outbox as the fan-out writes them.
declare -A IDLE_RPS BUSY_RPS IDLE_TPS BUSY_TPS BUSY_EPS
if [[ $DELIVERY == 1 ]]; then
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  RECV=${ADDR%:*}:$((${ADDR##*:} + 1))
  mkdir -p "$WORK/receiver/logs"
  cat >"$WORK/receiver/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/receiver/nginx.pid;
error_log $WORK/receiver/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/receiver/body;
  server { listen $RECV; location / { return 204; } }
}
EOF
  "$NGINX" -p "$WORK/receiver" -c "$WORK/receiver/nginx.conf" -e "$WORK/receiver/logs/error.log" || die "nginx did not start"
  psql_db "$DB_URL" -c "DELETE FROM webhook_subscriptions" -c "DELETE FROM outbox_events" >/dev/null
  SUB=$(curl -fsS -X POST "$BASE/api/v1/admin/webhooks" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d "{\"url\":\"http://$RECV/hook\",\"event_types\":[\"task.succeeded\"]}" | jq -r .id)
  [[ $SUB =~ ^[0-9a-f-]{36}$ ]] || die "could not subscribe: $SUB"
  clear_outbox() { # TRUNCATE: a DELETE checks the FK per row. It can deadlock with a claim in flight; then again.
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
      psql_db "$DB_URL" -c "TRUNCATE webhook_deliveries, outbox_events" >/dev/null 2>"$WORK/truncate.err" && return
      sleep 0.2
    done
    cat "$WORK/truncate.err" >&2
    die "could not clear the outbox"
  }
  backlog() { # [delay] → a fresh backlog of BACKLOG deliveries, due after delay (none: now)
    local due="now() + interval '${1:-0 s}'"
    clear_outbox
    psql_db "$DB_URL" -c "WITH e AS (INSERT INTO outbox_events (type, at, payload)
          SELECT 'task.succeeded', now(), jsonb_build_object('task_id', gen_random_uuid(), 'device_id', 'bench-' || i,
            'firmware_id', '$FW_CREATE', 'rollout_id', gen_random_uuid(), 'attempt', 1)
          FROM generate_series(1, $BACKLOG) i RETURNING id)
        INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at) SELECT '$SUB', id, $due FROM e" \
      -c "VACUUM ANALYZE webhook_deliveries" -c "VACUUM ANALYZE outbox_events" >/dev/null
  }
  delivered() { psql_db "$DB_URL" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'"; }
  retried() { psql_db "$DB_URL" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'failed' OR attempts > 1"; }
  # drain: the backlog alone, timed until the last delivery is made.
  backlog
  t0=$EPOCHREALTIME
  until [[ $(delivered) == "$BACKLOG" ]]; do
    ! awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 600) }' || die "the backlog did not drain in 600 s ($(delivered) of $BACKLOG)"
    [[ $(retried) == 0 ]] || die "deliveries failed or were retried (see $WORK/otad.log)"
    sleep 0.2
  done
  DRAIN_S=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  DRAIN_EPS=$(awk -v n="$BACKLOG" -v s="$DRAIN_S" 'BEGIN { printf "%.0f", n / s }')
  note "delivery alone: $BACKLOG events in $DRAIN_S s, $DRAIN_EPS events/s"
  # beside: the same pair without and with deliveries being made.
  clear_outbox
  k=0
  for run in $(seq 1 "$RUNS"); do
    for sc in "${OPEN_SCENARIOS[@]}"; do
      for mode in idle busy; do
        if [[ $mode == idle ]]; then backlog '1 day'; else backlog; fi
        # The deliveries made while the pair runs, counted from a tenth of
        # its time after its start to a tenth before its end: before the
        # load arrives the replica is idle and delivers at full speed.
        pair "$sc" "$mode-$run" $((k * ${FLEET[${MODEL[$sc]}]} / (4 * RUNS))) "$DURATION" "$DELIVERY_ALONE" >"$WORK/pair.out" &
        pair_pid=$!
        sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 10 }')"
        d0=$(delivered) t0=$EPOCHREALTIME
        sleep "$(awk -v d="$DURATION" 'BEGIN { print d * 0.8 }')"
        d1=$(delivered) t1=$EPOCHREALTIME
        wait "$pair_pid" || exit 1
        line=$(<"$WORK/pair.out")
        k=$((k + 1))
        read -r rps tps _ <<<"$line"
        if [[ $mode == idle ]]; then
          ((d1 == d0)) || die "deliveries were made during an idle run"
          IDLE_RPS[$sc]+="$rps "; IDLE_TPS[$sc]+="$tps "
        else
          ((d1 < BACKLOG)) || die "the backlog drained before the run ended: raise BENCH_DELIVERY_BACKLOG"
          [[ $(retried) == 0 ]] || die "deliveries failed or were retried (see $WORK/otad.log)"
          BUSY_RPS[$sc]+="$rps "; BUSY_TPS[$sc]+="$tps "
          BUSY_EPS[$sc]+="$(awk -v d=$((d1 - d0)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", d / (b - a) }') "
          clear_outbox
        fi
        pgb=; [[ -n $DELIVERY_ALONE ]] || pgb=", pgbench $(printf '%.0f' "$tps") tps"
        note "$sc $mode run $run: $(printf '%.0f' "$rps") checks/s$pgb, delivered $((d1 - d0))"
      done
    done
  done
fi

# ---- report -----------------------------------------------------------------
cpu=$(lscpu 2>/dev/null | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }')
{
  echo "### make bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Binary: $COMMIT; $(nproc) cores ($cpu); load average $LOAD_START at the first run, $LOAD_END after the last."
  echo "Database \`$DB\`: $DEVICES devices ($HALF per fleet), $HISTORY historical tasks, $HALF active ($SEEDED); $CREATE devices to create for."
  echo "wrk -t$THREADS -c$CONNS -d${DURATION}s (cold: each device at most once per run), beside"
  echo "\`pgbench -n -S -c $PGB_CLIENTS -j $PGB_JOBS -T $DURATION\` (scale $PGB_SCALE; create: \`-N\`, simple-update) in the same window; median of $RUNS runs."
  echo "otad: OTA_DEVICE_RATE_LIMIT=0 OTA_LOG_LEVEL=${BENCH_LOG_LEVEL:-error}${OTA_DB_MAX_CONNS:+ OTA_DB_MAX_CONNS=$OTA_DB_MAX_CONNS}."
  echo
  echo "| scenario | checks/s | pgbench tps (-S; create: -N) | checks ÷ tps | wrk p99 (closed loop) | otad CPU µs/check | otad write(2)/check | open loop: asked | delivered | p50 | **p99** | max | late dispatches | all 200 | targets met |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
  for sc in "${SCENARIOS[@]}"; do
    met=$(awk -v r="$(med "${RPS[$sc]}")" -v q="$(med "${RATIO[$sc]}")" -v p="${OL_P99[$sc]:-nan}" -v ol="${OL_RATE[$sc]:+1}" -v sc="$sc" 'BEGIN {
      if (sc == "create") { print (q >= 0.5 ? "yes" : "no: ratio"); exit }
      m = (r >= 15000 ? "" : " checks/s") (q >= 0.45 ? "" : " ratio") (ol != 1 || p + 0 <= 10 ? "" : " p99")
      print (m == "" ? "yes" : "no:" m) }')
    printf '| %s | **%.0f** | %.0f | **%s** | %s | %s | %s |' "$sc" "$(med "${RPS[$sc]}")" "$(med "${TPS[$sc]}")" \
      "$(med "${RATIO[$sc]}")" "$(tr ' ' '\n' <<<"${P99[$sc]}" | grep -v '^$' | paste -sd/ -)" "$(med "${CPU[$sc]}")" "$(med "${WR[$sc]}")"
    if [[ -n ${OL_RATE[$sc]:-} ]]; then
      printf ' %s/s | %s/s | %s ms | **%s ms** | %s ms | %s | %s | %s |\n' "${OL_RATE[$sc]}" "${OL_RPS[$sc]}" "${OL_P50[$sc]}" \
        "${OL_P99[$sc]}" "${OL_MAX[$sc]}" "${OL_LATE[$sc]}" "${OL_OK[$sc]}" "$met"
    else
      echo " — | — | — | — | — | — | — | $met |"
    fi
  done
  echo
  echo "Targets: ≥ 15,000 checks/s and ≥ 0.45 × pgbench -S tps per polling scenario, open-loop p99 ≤ 10 ms; creations ≥ 0.5 × pgbench -N tps."
  echo "$OUTCOME_LINE."
  if [[ $DELIVERY == 1 ]]; then
    echo
    echo "Webhook delivery (OTA_WEBHOOK_WORKERS=${OTA_WEBHOOK_WORKERS:-4}) to nginx answering 204 on loopback: a backlog of $BACKLOG task.succeeded events delivered alone in $DRAIN_S s, **$DRAIN_EPS events/s**."
    echo "The same $([[ -n $DELIVERY_ALONE ]] && echo "wrk alone" || echo "wrk + pgbench pair") after a fresh backlog is written, due a day later (idle) or due now and delivered meanwhile (busy), interleaved; medians of $RUNS:"
    echo
    echo "| scenario | checks/s idle | checks/s busy | busy ÷ idle | pgbench tps idle | busy | events delivered/s beside | target (≥ 0.9) |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for sc in "${OPEN_SCENARIOS[@]}"; do
      q=$(awk -v a="$(med "${BUSY_RPS[$sc]}")" -v b="$(med "${IDLE_RPS[$sc]}")" 'BEGIN { printf "%.3f", a / b }')
      tps_idle=— tps_busy=—
      [[ -n $DELIVERY_ALONE ]] || tps_idle=$(printf '%.0f' "$(med "${IDLE_TPS[$sc]}")") tps_busy=$(printf '%.0f' "$(med "${BUSY_TPS[$sc]}")")
      printf '| %s | %.0f | %.0f | **%s** | %s | %s | %s | %s |\n' "$sc" "$(med "${IDLE_RPS[$sc]}")" "$(med "${BUSY_RPS[$sc]}")" "$q" \
        "$tps_idle" "$tps_busy" "$(med "${BUSY_EPS[$sc]}")" "$(awk -v q="$q" 'BEGIN { print (q >= 0.9 ? "yes" : "no") }')"
    done
  fi
  echo
  echo "| scenario | run | load | checks/s | pgbench tps | ratio | wrk p99 | otad CPU µs/check | otad write(2)/check | devices polled twice |"
  echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${RUNROWS[@]}"
} >"$OUT"
cat "$OUT"
note "written to $OUT; raw outputs in $WORK"
exit
}
