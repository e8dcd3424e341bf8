#!/usr/bin/env bash
# The soak: toolgate with the bbolt ledger under load for a long run, once
# sweeping and once with nothing to sweep, sampling its resident memory and
# goroutines. Sweeping must cost little (its throughput at least 0.9 of the
# run without), memory must be flat after warm-up, and goroutines must not
# grow.
#
# The ledger keeps every call for its retention, and bbolt's bookkeeping
# (its freelist's page map) and mapped pages grow with the file: memory
# can only be flat once the oldest calls are swept as fast as new ones
# come. So the sweeping run keeps calls for RETENTION (1m) and counts from
# WARMUP, when the ledger has reached that steady size (a call is kept
# for the retention from its deadline's partition: about 1m30s here). The
# no-sweep run keeps them for 24h, so none is old enough to go: its file
# only grows, and gives the bytes each call takes on disk. A retention
# must cover the longest a call may stay in flight, so the soak's client
# tool timeout is 30s (30s + 15s under 1m); it calls no client tool.
#
#   bench/soak.sh                                    # 5 minutes each at 64 connections
#   SOAK=60s CONNS=64 WARMUP=30 bench/soak.sh
#
# Writes its section of bench/RESULTS.md ("## Soak"). Needs wrk.
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

# rss prints resident memory in KiB: the process's own (anonymous: heap,
# stacks, runtime) and the ledger file's pages that bbolt maps.
rss() { awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a, f}' "/proc/$tg/status"; }
heap() { curl -fsS http://127.0.0.1:9819/debug/vars | grep -o '"HeapInuse":[0-9]*' | cut -d: -f2; }
goroutines() { curl -fsS "http://127.0.0.1:9819/debug/pprof/goroutine?debug=1" | awk 'NR == 1 {print $4}'; }

# run NAME RETENTION runs the soak against a fresh ledger kept for
# RETENTION, and leaves its figures in $work/NAME.*.
run() {
	local name=$1 retention=$2
	cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9813 {
	bind 127.0.0.1
$(tool "bolt $work/$name.db {
				retention $retention
			}
			client_tool_timeout 30s")
}
EOF
	start_toolgate http://127.0.0.1:9813/tools
	local cpu0
	cpu0=$(cputicks "$tg")
	wrk -t2 -c"$CONNS" -d"$SOAK" -s "$work/post.lua" http://127.0.0.1:9813/tools/get_item >"$work/$name.wrk" &
	local load=$!
	local secs=${SOAK%s}
	: >"$work/$name.samples"
	for ((t = 0; t <= secs; t += 10)); do
		local s
		s="$t $(rss) $(goroutines) $(heap)"
		echo "$s" >>"$work/$name.samples"
		printf '%s t=%4ss anon=%s KiB file=%s KiB goroutines=%s heap=%s B\n' "$name" $s
		sleep 10
	done
	wait "$load"
	echo $(($(cputicks "$tg") - cpu0)) >"$work/$name.cpu"
	sleep 2
	goroutines >"$work/$name.idle"
	stat -c %s "$work/$name.db" >"$work/$name.size"
	kill "$tg"
	wait "$tg" 2>/dev/null || true
}

run sweeping "$RETENTION"
run nosweep 24h

# sampled NAME COLUMN first|peak|end prints a sampled column after the warm-up.
sampled() {
	awk -v w="$WARMUP" -v c="$2" -v s="$3" '
		$1 >= w && first == "" { first = $c }
		$1 >= w && $c > peak { peak = $c }
		{ last = $c }
		END { print (s == "first") ? first : (s == "peak") ? peak : last }' "$work/$1.samples"
}
rps() { awk '/^Requests\/sec/ {printf "%.0f", $2}' "$work/$1.wrk"; }
requests() { awk '/requests in/ {print $1}' "$work/$1.wrk"; }
# cpu NAME prints the gateway's CPU time per request in µs.
cpu() { awk -v t="$(cat "$work/$1.cpu")" -v hz="$(getconf CLK_TCK)" -v n="$(requests "$1")" 'BEGIN {printf "%.0f", t / hz * 1e6 / n}'; }
mib() { echo $(($1 >> 20)); }
kib2mib() { echo $(($1 / 1024)); }
row() { # row LABEL NAME COLUMN UNIT(B|KiB)
	local f p e
	f=$(sampled "$2" "$3" first) p=$(sampled "$2" "$3" peak) e=$(sampled "$2" "$3" end)
	if [[ $4 == B ]]; then f=$(mib "$f") p=$(mib "$p") e=$(mib "$e"); else f=$(kib2mib "$f") p=$(kib2mib "$p") e=$(kib2mib "$e"); fi
	echo "$f / $p / $e"
}
ratio=$(awk -v a="$(rps sweeping)" -v b="$(rps nosweep)" 'BEGIN {printf "%.2f", a / b}')
ok=$(awk -v r="$ratio" 'BEGIN {print (r >= 0.9) ? "meets" : "misses"}')
# Flat: the anonymous memory's peak after the warm-up within a quarter of
# what it was at the warm-up.
flat=$(awk -v f="$(sampled sweeping 2 first)" -v p="$(sampled sweeping 2 peak)" 'BEGIN {print (p <= f * 1.25) ? "flat" : "not flat"}')
per_call=$(awk -v s="$(cat "$work/nosweep.size")" -v n="$(requests nosweep)" 'BEGIN {printf "%.0f", s / n}')

{
	echo "## Soak"
	echo
	echo "Command: \`SOAK=$SOAK CONNS=$CONNS WARMUP=$WARMUP RETENTION=$RETENTION bench/soak.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores:"
	echo "toolgate with the bbolt ledger under $CONNS connections for $SOAK, twice, each on a fresh file: calls"
	echo "kept for $RETENTION (swept as they age out), then for 24h (nothing to sweep), sampled every 10 s."
	echo "Sweeping throughput / no-sweep throughput: **$ratio** ($ok the 0.9 target); anonymous memory"
	echo "of the sweeping run after the ${WARMUP}s warm-up: $flat. Anonymous memory is the process's own; the"
	echo "mapped file's pages are the ledger's calls, which the kernel reclaims like any file cache."
	echo "Memory rows: after the warm-up / peak / end."
	echo
	echo "| | sweeping ($RETENTION) | no sweep (24h) |"
	echo "|---|---|---|"
	echo "| calls/s | $(rps sweeping) | $(rps nosweep) |"
	echo "| gateway CPU per call (µs) | $(cpu sweeping) | $(cpu nosweep) |"
	echo "| Go heap in use (MiB) | $(row HeapInuse sweeping 5 B) | $(row HeapInuse nosweep 5 B) |"
	echo "| resident, anonymous (MiB) | $(row anon sweeping 2 KiB) | $(row anon nosweep 2 KiB) |"
	echo "| resident, ledger file mapped (MiB) | $(row file sweeping 3 KiB) | $(row file nosweep 3 KiB) |"
	echo "| goroutines | $(sampled sweeping 4 first) / $(sampled sweeping 4 peak) / $(sampled sweeping 4 end) (idle: $(cat "$work/sweeping.idle")) | $(sampled nosweep 4 first) / $(sampled nosweep 4 peak) / $(sampled nosweep 4 end) (idle: $(cat "$work/nosweep.idle")) |"
	echo "| ledger file at the end (MiB) | $(mib "$(cat "$work/sweeping.size")") | $(mib "$(cat "$work/nosweep.size")") ($per_call bytes per call) |"
} >"$work/soak.md"
cat "$work/soak.md"
write_section "$OUT" "## Soak" <"$work/soak.md"
