#!/usr/bin/env bash
# The soak: toolgate with the bbolt ledger under load for a long run,
# sampling its resident memory and goroutines. Memory must be flat after
# warm-up, and goroutines must not grow.
#
# The ledger keeps every call for its retention, and bbolt's bookkeeping
# (its freelist's page map) and mapped pages grow with the file: memory
# can only be flat once the oldest calls are swept as fast as new ones
# come. So the soak keeps calls for RETENTION (1m: the sweeper then runs
# every minute) and counts from WARMUP, when the ledger has reached that
# steady size; RETENTION=24h shows the growth instead. A retention must
# cover the longest a call may stay in flight, so the soak's client tool
# timeout is 30s (30s + 15s under 1m); it calls no client tool.
#
#   bench/soak.sh                         # 5 minutes at 64 connections
#   SOAK=60s CONNS=64 WARMUP=30 bench/soak.sh
#
# Appends its figures to bench/RESULTS.md. Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK=${SOAK:-300s}
CONNS=${CONNS:-64}
WARMUP=${WARMUP:-150}
RETENTION=${RETENTION:-1m}
OUT=${OUT:-bench/RESULTS.md}

. bench/lib.sh
build
start_upstream

cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9813 {
	bind 127.0.0.1
$(tool "bolt $work/ledger.db {
				retention $RETENTION
			}
			client_tool_timeout 30s")
}
EOF
start_toolgate http://127.0.0.1:9813/tools

# rss prints resident memory in KiB: the process's own (anonymous: heap,
# stacks, runtime) and the ledger file's pages that bbolt maps.
rss() { awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a, f}' "/proc/$tg/status"; }
heap() { curl -fsS http://127.0.0.1:9819/debug/vars | grep -o '"HeapInuse":[0-9]*' | cut -d: -f2; }
goroutines() { curl -fsS "http://127.0.0.1:9819/debug/pprof/goroutine?debug=1" | awk 'NR == 1 {print $4}'; }

wrk -t2 -c"$CONNS" -d"$SOAK" -s "$work/post.lua" http://127.0.0.1:9813/tools/get_item >"$work/wrk.out" &
load=$!
samples=()
secs=${SOAK%s}
for ((t = 0; t <= secs; t += 10)); do
	samples+=("$t $(rss) $(goroutines) $(heap)")
	printf 't=%4ss anon=%s KiB file=%s KiB goroutines=%s heap=%s B\n' ${samples[-1]}
	sleep 10
done
wait "$load"
idle_g=$(sleep 2; goroutines)
stat_size() { stat -c %s "$work/ledger.db"; }

# sampled COLUMN first|peak|end prints a sampled column after the warm-up.
sampled() {
	printf '%s\n' "${samples[@]}" | awk -v w="$WARMUP" -v c="$1" -v s="$2" '
		$1 >= w && first == "" { first = $c }
		$1 >= w && $c > peak { peak = $c }
		{ last = $c }
		END { print (s == "first") ? first : (s == "peak") ? peak : last }'
}
rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$work/wrk.out")

{
	echo
	echo "## Soak"
	echo
	echo "Command: \`SOAK=$SOAK CONNS=$CONNS WARMUP=$WARMUP RETENTION=$RETENTION bench/soak.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores:"
	echo "toolgate with the bbolt ledger, calls kept for $RETENTION, under $CONNS connections for $SOAK"
	echo "($rps req/s), sampled every 10 s. Anonymous memory is the process's own; the mapped file's"
	echo "pages are the ledger's calls, which the kernel reclaims like any file cache."
	echo
	echo "| | after ${WARMUP}s warm-up | peak | end |"
	echo "|---|---|---|---|"
	echo "| Go heap in use (MiB) | $(($(sampled 5 first) >> 20)) | $(($(sampled 5 peak) >> 20)) | $(($(sampled 5 end) >> 20)) |"
	echo "| resident, anonymous (MiB) | $(($(sampled 2 first) / 1024)) | $(($(sampled 2 peak) / 1024)) | $(($(sampled 2 end) / 1024)) |"
	echo "| resident, ledger file mapped (MiB) | $(($(sampled 3 first) / 1024)) | $(($(sampled 3 peak) / 1024)) | $(($(sampled 3 end) / 1024)) |"
	echo "| goroutines | $(sampled 4 first) | $(sampled 4 peak) | $(sampled 4 end) (idle after the load: $idle_g) |"
	echo "| ledger file (MiB) | | | $(($(stat_size) >> 20)) |"
} | tee -a "$OUT"
