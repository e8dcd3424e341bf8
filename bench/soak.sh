#!/usr/bin/env bash
# The soak: toolgate with the bbolt ledger under load for a long run,
# sampling its resident memory and goroutines. Memory must be flat after
# warm-up, and goroutines must not grow.
#
#   bench/soak.sh                         # 5 minutes at 64 connections
#   SOAK=60s CONNS=64 bench/soak.sh
#
# Appends its figures to bench/RESULTS.md. Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK=${SOAK:-300s}
CONNS=${CONNS:-64}
WARMUP=${WARMUP:-30}
OUT=${OUT:-bench/RESULTS.md}

. bench/lib.sh
build
start_upstream

cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9813 {
	bind 127.0.0.1
$(tool "bolt $work/ledger.db")
}
EOF
start_toolgate http://127.0.0.1:9813/tools

rss() { awk '/^VmRSS/ {print $2}' "/proc/$tg/status"; }
heap() { curl -fsS http://127.0.0.1:9819/debug/vars | grep -o '"HeapInuse":[0-9]*' | cut -d: -f2; }
goroutines() { curl -fsS "http://127.0.0.1:9819/debug/pprof/goroutine?debug=1" | awk 'NR == 1 {print $4}'; }

wrk -t2 -c"$CONNS" -d"$SOAK" -s "$work/post.lua" http://127.0.0.1:9813/tools/get_item >"$work/wrk.out" &
load=$!
samples=()
secs=${SOAK%s}
for ((t = 0; t <= secs; t += 10)); do
	samples+=("$t $(rss) $(goroutines) $(heap)")
	printf 't=%4ss rss=%s KiB goroutines=%s heap=%s B\n' ${samples[-1]}
	sleep 10
done
wait "$load"
idle_g=$(sleep 2; goroutines)

start=$(printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" '$1 >= w {print $2; exit}')
peak=$(printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" '$1 >= w && $2 > m {m = $2} END {print m}')
end=$(printf '%s\n' "${samples[@]}" | tail -1 | awk '{print $2}')
g_start=$(printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" '$1 >= w {print $3; exit}')
g_end=$(printf '%s\n' "${samples[@]}" | tail -1 | awk '{print $3}')
h_start=$(printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" '$1 >= w {print $4; exit}')
h_peak=$(printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" '$1 >= w && $4 > m {m = $4} END {print m}')
h_end=$(printf '%s\n' "${samples[@]}" | tail -1 | awk '{print $4}')
rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$work/wrk.out")

{
	echo
	echo "## Soak"
	echo
	echo "Command: \`SOAK=$SOAK CONNS=$CONNS bench/soak.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores: toolgate with the bbolt"
	echo "ledger under $CONNS connections for $SOAK ($rps req/s). Resident memory includes the"
	echo "ledger file bbolt maps: it grows with the calls kept for the retention period (24h)."
	echo
	echo "| | after ${WARMUP}s warm-up | peak | end |"
	echo "|---|---|---|---|"
	echo "| Go heap in use (MiB) | $((h_start >> 20)) | $((h_peak >> 20)) | $((h_end >> 20)) |"
	echo "| resident memory (MiB) | $((start / 1024)) | $((peak / 1024)) | $((end / 1024)) |"
	echo "| goroutines | $g_start | | $g_end (idle after the load: $idle_g) |"
} | tee -a "$OUT"
