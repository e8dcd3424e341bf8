#!/usr/bin/env bash
# Profiles toolgate under load: the harness's upstream and one toolgate site
# (ledger off unless LEDGER says otherwise), wrk sending the harness's POST
# at CONNS connections, and meanwhile a CPU and an allocation profile taken
# from Caddy's admin endpoint. It prints the requests per second and the
# gateway's CPU µs per request, and keeps the binary and both profiles in
# OUT for `go tool pprof`:
#
#   bench/profile.sh                        # ledger off, 32 connections, 20 s
#   LEDGER="bolt /tmp/l.db" CONNS=64 bench/profile.sh
#   go tool pprof -top /tmp/toolgate-profile/toolgate /tmp/toolgate-profile/cpu.pprof
#
# It uses the harness's fixed ports: run it alone, or in a network namespace
# of its own (unshare -n sh -c 'ip link set lo up && bench/profile.sh').
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20}
CONNS=${CONNS:-32}
LEDGER=${LEDGER:-off}
OUT=${OUT:-/tmp/toolgate-profile}

. bench/lib.sh
if [[ -n ${TOOLGATE_BIN:-} ]]; then
	# A binary built already, e.g. from another commit, to compare.
	cp "$TOOLGATE_BIN" "$work/toolgate"
	go build -o "$work/upstream" ./bench/upstream
else
	build
fi
start_upstream
cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9812 {
	bind 127.0.0.1
$(tool "$LEDGER")
}
EOF
start_toolgate "http://127.0.0.1:9812/tools"
url=http://127.0.0.1:9812/tools/get_item
wrk -t2 -c"$CONNS" -d2s -s "$work/post.lua" "$url" >/dev/null

mkdir -p "$OUT"
cp "$work/toolgate" "$OUT/toolgate"
# The profiles cover the middle of the run, away from its start and end.
secs=$((DURATION - 4))
c0=$(cputicks "$tg")
wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$work/post.lua" "$url" >"$OUT/wrk.txt" &
wrkpid=$!
sleep 2
curl -fsS -o "$OUT/cpu.pprof" "http://127.0.0.1:9819/debug/pprof/profile?seconds=$secs" &
cpupid=$!
curl -fsS -o "$OUT/allocs.pprof" "http://127.0.0.1:9819/debug/pprof/allocs?seconds=$secs"
# Not a bare wait: it would wait for toolgate and the upstream too.
wait "$cpupid" "$wrkpid"
c1=$(cputicks "$tg")
n=$(awk '/requests in/ {print $1}' "$OUT/wrk.txt")
rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$OUT/wrk.txt")
p99=$(awk '$1 == "99%" {print $2}' "$OUT/wrk.txt")
us=$(awk -v d=$((c1 - c0)) -v n="$n" -v k="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
echo "profile: ledger $LEDGER, $CONNS conns: $rps req/s, p99 $p99, gateway CPU $us µs/req (profiles taken meanwhile)"
echo "profile: go tool pprof -top $OUT/toolgate $OUT/cpu.pprof"
