#!/usr/bin/env bash
# tests/bench/downloads.sh (make bench-downloads): hosted downloads measured
# from outside, against Debian's nginx serving the same file, in one run.
#
# It builds otad, starts it on the memory store with a filesystem artifact
# store (OTA_ARTIFACT_STORE=file://…), uploads a DL_SIZE_MB file of random
# bytes (POST /api/v1/admin/artifacts), publishes a firmware from it and
# registers a device. Then, one after the other, the same wrk run (a C
# client: DL_CONNS connections, each downloading the whole file again and
# again for DL_DURATION seconds) against
#
#   otad   GET /api/v1/devices/{id}/ota/firmwares/{fw}/artifact (the device token)
#   nginx  the same file (the object otad stored), sendfile on, from its own
#          config in DL_DIR
#
# while otad's RSS (VmRSS in /proc) is sampled every 0.5 s. It prints a
# markdown table (aggregate MiB/s of each, their ratio, otad's RSS before,
# at its peak and after) to stdout and to DL_OUT.
#
# Knobs (defaults in brackets):
#   DL_SIZE_MB [1024]     the artifact's size
#   DL_CONNS [50]         concurrent downloads (wrk -c)
#   DL_THREADS [2]        wrk -t
#   DL_DURATION [30]      seconds per run
#   DL_ADDR [127.0.0.1:18490]  otad; nginx listens on the next port
#   DL_DIR [/tmp/ota-bench-downloads]  binaries, store, logs, raw outputs
#   DL_OUT [$DL_DIR/results.md]
#   DL_OTAD               use this otad binary instead of building
# A smoke run: DL_SIZE_MB=4 DL_CONNS=4 DL_DURATION=2 tests/bench/downloads.sh
set -euo pipefail
{

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

SIZE_MB=${DL_SIZE_MB:-1024}
CONNS=${DL_CONNS:-50}
THREADS=${DL_THREADS:-2}
DURATION=${DL_DURATION:-30}
ADDR=${DL_ADDR:-127.0.0.1:18490}
WORK=${DL_DIR:-/tmp/ota-bench-downloads}
OUT=${DL_OUT:-$WORK/results.md}
host=${ADDR%:*}
port=${ADDR##*:}
NGINX_PORT=$((port + 1))
ADMIN=bench-downloads-admin-token-0123456789
MODEL=bench-dl

note() { printf '== %s\n' "$*" >&2; }
die() { printf 'downloads.sh: %s\n' "$*" >&2; exit 1; }

for tool in wrk nginx curl jq; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || die "$tool is not installed (apt-get install -y wrk nginx-light curl jq)"
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

rm -rf "$WORK/store" "$WORK/nginx"
mkdir -p "$WORK/store" "$WORK/nginx/logs"

OTAD=${DL_OTAD:-}
if [[ -z $OTAD ]]; then
  note "building otad"
  (cd "$root" && go build -o "$WORK/otad" .)
  OTAD=$WORK/otad
fi

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -f $WORK/nginx/nginx.pid ]] && kill "$(cat "$WORK/nginx/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT

note "starting otad on $ADDR (memory store, artifacts in $WORK/store)"
OTA_STORE=memory OTA_HTTP_ADDR=$ADDR OTA_ADMIN_TOKEN=$ADMIN OTA_LOG_LEVEL=error \
  OTA_DEVICE_RATE_LIMIT=0 OTA_PUBLIC_URL=http://$ADDR \
  OTA_ARTIFACT_STORE="file://$WORK/store" OTA_ARTIFACT_MAX_BYTES=$(((SIZE_MB + 1) * 1048576)) \
  "$OTAD" serve >"$WORK/otad.log" 2>&1 &
otad_pid=$!
pids+=("$otad_pid")
for _ in $(seq 100); do
  curl -fsS "http://$ADDR/healthz" >/dev/null 2>&1 && break
  kill -0 "$otad_pid" 2>/dev/null || die "otad exited: $(tail -5 "$WORK/otad.log")"
  sleep 0.1
done

api() { # method path [curl args…]: the JSON answer, failing on an error status
  local m=$1 p=$2; shift 2
  curl -fsS -X "$m" -H "Authorization: Bearer $ADMIN" "http://$ADDR/api/v1/admin$p" "$@"
}

note "uploading a $SIZE_MB MiB artifact"
head -c $((SIZE_MB * 1048576)) /dev/urandom >"$WORK/image.bin"
art=$(api POST "/artifacts?filename=image.bin" -H 'Content-Type: application/octet-stream' -T "$WORK/image.bin")
art_id=$(jq -r .id <<<"$art")
sha=$(jq -r .sha256 <<<"$art")
[[ -n $art_id && $art_id != null ]] || die "upload answered $art"
fw_id=$(api POST /firmwares -H 'Content-Type: application/json' \
  -d "{\"model\":\"$MODEL\",\"version\":\"1.0.0\",\"artifact_id\":\"$art_id\"}" | jq -r .id)
token=$(api POST /devices -H 'Content-Type: application/json' \
  -d "{\"device_id\":\"bench-dl-1\",\"model\":\"$MODEL\",\"current_version\":\"0.1.0\"}" | jq -r .token)
url="http://$ADDR/api/v1/devices/bench-dl-1/ota/firmwares/$fw_id/artifact"
got=$(curl -fsS -H "Authorization: Bearer $token" "$url" | sha256sum | cut -d' ' -f1)
[[ $got == "$sha" ]] || die "otad served other bytes: sha256 $got, want $sha"

# nginx serves the very object otad stored.
obj=$(find "$WORK/store" -type f -size +$((SIZE_MB * 1024 - 1))k | head -1)
[[ -n $obj ]] || die "no stored object of $SIZE_MB MiB under $WORK/store"
ln -sf "$obj" "$WORK/nginx/image.bin"
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes auto;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  server {
    listen $host:$NGINX_PORT;
    root $WORK/nginx;
    location / { }
  }
}
EOF
note "starting nginx on $host:$NGINX_PORT"
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/logs/error.log"
got=$(curl -fsS "http://$host:$NGINX_PORT/image.bin" | sha256sum | cut -d' ' -f1)
[[ $got == "$sha" ]] || die "nginx served other bytes"

rss() { awk '/^VmRSS/ {print int($2/1024)}' "/proc/$otad_pid/status"; }

# bytes/s of one wrk run, from wrk's "Transfer/sec" (in B, KB, MB or GB).
mibps() {
  awk '/^Transfer\/sec/ {
    v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v)
    f = (u == "GB") ? 1024 : (u == "MB") ? 1 : (u == "KB") ? 1/1024 : 1/1048576
    printf "%.1f", v * f }' "$1"
}

run() { # name url [header]
  local name=$1 u=$2; shift 2
  note "wrk -t$THREADS -c$CONNS -d${DURATION}s: $name"
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 600s "$@" "$u" >"$WORK/wrk-$name.txt" 2>&1 || die "wrk failed: $(cat "$WORK/wrk-$name.txt")"
  ! grep -q 'Non-2xx' "$WORK/wrk-$name.txt" || die "$name answered errors: $(cat "$WORK/wrk-$name.txt")"
}

rss_before=$(rss)
peak=$rss_before
( while kill -0 "$otad_pid" 2>/dev/null; do rss; sleep 0.5; done >"$WORK/rss.txt" ) &
pids+=("$!")
run otad "$url" -H "Authorization: Bearer $token"
rss_after=$(rss)
peak=$(sort -n "$WORK/rss.txt" | tail -1)
run nginx "http://$host:$NGINX_PORT/image.bin"

otad_rate=$(mibps "$WORK/wrk-otad.txt")
nginx_rate=$(mibps "$WORK/wrk-nginx.txt")
ratio=$(awk -v a="$otad_rate" -v b="$nginx_rate" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
commit=$(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)

{
  echo "### Hosted downloads: $CONNS concurrent downloads of a $SIZE_MB MiB artifact, ${DURATION}s each ($commit, $(date -u +%F))"
  echo
  echo "| server | aggregate MiB/s | vs nginx | RSS MiB (before / peak / after) |"
  echo "| --- | ---: | ---: | --- |"
  echo "| otad (filesystem store, proxied) | $otad_rate | $ratio× | $rss_before / $peak / $rss_after |"
  echo "| nginx $("$NGINX" -v 2>&1 | sed 's/.*\///') (sendfile) | $nginx_rate | 1.00× | – |"
  echo
  echo "wrk -t$THREADS -c$CONNS --timeout 600s; raw outputs in $WORK."
} | tee "$OUT"
exit 0
}
