#!/usr/bin/env bash
# The load harness: toolgate beside plain Caddy reverse_proxy and the bare
# upstream, in one run, on this machine. It builds toolgate and a fixed
# loopback upstream (1 KiB JSON answers), then measures with wrk:
#   a  the upstream directly
#   b  plain Caddy reverse_proxy to it, sent the same POST as toolgate
#      (the envelope is its body, which it forwards)
#   g  plain Caddy reverse_proxy sent a bare GET, for reference
#   c  toolgate, an app target, ledger off
#   d  toolgate with the bbolt ledger
#   e  toolgate with the Redis ledger
# at each concurrency, and writes bench/RESULTS.md with the budgets of
# DESIGN.md "Performance" checked against b. The six take turns:
# ROUNDS rounds of DURATION each, so that drift in the machine (other load,
# clock speed) falls on all of them alike. req/s is the mean of the rounds,
# p50 and p99 their median.
#
#   bench/run.sh                      # 3 rounds of 10 s: 30 s per target
#   DURATION=5s ROUNDS=1 CONNS="32" bench/run.sh
#   BUILD_ONLY=1 bench/run.sh         # build and check the harness (CI)
#   METRICS=off OUT=/tmp/off.md bench/run.sh   # toolgate with `metrics off`
#   LOG_LEVEL=INFO bench/run.sh       # with the per-call log line written
#
# Needs wrk and redis-server (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-"1 32 256"}
OUT=${OUT:-bench/RESULTS.md}

. bench/lib.sh
build
if [[ -n ${BUILD_ONLY:-} ]]; then
	echo "bench: built toolgate and the upstream"
	exit 0
fi
for cmd in wrk redis-server; do
	command -v "$cmd" >/dev/null || { echo "bench: $cmd is not installed (apt-get install $cmd)" >&2; exit 1; }
done

REDIS=127.0.0.1:9802
start_upstream
redis-server --port 9802 --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)

cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9811 {
	bind 127.0.0.1
	reverse_proxy $UP
}
http://127.0.0.1:9812 {
	bind 127.0.0.1
$(tool off)
}
http://127.0.0.1:9813 {
	bind 127.0.0.1
$(tool "bolt $work/ledger.db")
}
http://127.0.0.1:9814 {
	bind 127.0.0.1
$(tool "redis $REDIS")
}
EOF
start_toolgate "http://127.0.0.1:9812/tools"
for i in $(seq 100); do
	curl -fsS -o /dev/null "http://$UP/" 2>/dev/null && break
	sleep 0.1
done

# Check each target answers what it should before loading it.
check() {
	local got
	got=$(curl -fsS "$@")
	[[ $got == *'"content":"xxx'* || $got == '{"content":"xxx'* ]] || { echo "bench: unexpected answer from $*: ${got:0:200}" >&2; exit 1; }
}
check "http://$UP/items/b1"
check "http://127.0.0.1:9811/items/b1"
check -X POST -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}' "http://127.0.0.1:9811/items/b1"
for port in 9812 9813 9814; do
	check -X POST -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}' "http://127.0.0.1:$port/tools/get_item"
done

# ms converts wrk's latency (850.00us, 1.23ms, 1.02s) to milliseconds.
ms() {
	awk -v v="$1" 'BEGIN {
		if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
		else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
		else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
		else print v }'
}

declare -A RPS P50 P99 CPU_GW CPU_UP
TICK=$(getconf CLK_TCK)
run() { # run NAME CONNS ROUND URL [wrk args...]
	local name=$1 c=$2 r=$3 url=$4
	shift 4
	local t=2
	((c < t)) && t=$c
	local out gw0 up0 gw1 up1 n
	gw0=$(cputicks "$tg")
	up0=$(cputicks "$up")
	out=$(wrk -t"$t" -c"$c" -d"$DURATION" --latency "$@" "$url")
	gw1=$(cputicks "$tg")
	up1=$(cputicks "$up")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	CPU_GW[$name,$c,$r]=$(awk -v d=$((gw1 - gw0)) -v n="$n" -v k="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	CPU_UP[$name,$c,$r]=$(awk -v d=$((up1 - up0)) -v n="$n" -v k="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	RPS[$name,$c,$r]=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
	P50[$name,$c,$r]=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
	P99[$name,$c,$r]=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	[[ -z $errs ]] || echo "bench: $name c=$c: $errs" >&2
	printf '%-22s c=%-4s round %s %9s req/s  p50 %8s ms  p99 %8s ms  CPU µs/req gateway %4s upstream %4s\n' "$name" "$c" "$r" "${RPS[$name,$c,$r]}" "${P50[$name,$c,$r]}" "${P99[$name,$c,$r]}" "${CPU_GW[$name,$c,$r]}" "${CPU_UP[$name,$c,$r]}"
}

NAMES="a_upstream b_reverse_proxy g_reverse_proxy_get c_toolgate_off d_toolgate_bolt e_toolgate_redis"
for c in $CONNS; do
	for r in $(seq "$ROUNDS"); do
		run a_upstream "$c" "$r" "http://$UP/items/b1"
		run b_reverse_proxy "$c" "$r" "http://127.0.0.1:9811/items/b1" -s "$work/post.lua"
		run g_reverse_proxy_get "$c" "$r" "http://127.0.0.1:9811/items/b1"
		run c_toolgate_off "$c" "$r" "http://127.0.0.1:9812/tools/get_item" -s "$work/post.lua"
		run d_toolgate_bolt "$c" "$r" "http://127.0.0.1:9813/tools/get_item" -s "$work/post.lua"
		run e_toolgate_redis "$c" "$r" "http://127.0.0.1:9814/tools/get_item" -s "$work/post.lua"
	done
done

# rounds ARRAY NAME CONNS prints the rounds' values of one run, one a line.
rounds() {
	local -n arr=$1
	for r in $(seq "$ROUNDS"); do echo "${arr[$2,$3,$r]}"; done
}
mean() { awk '{ s += $1; n++ } END { printf "%.0f", s / n }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for c in $CONNS; do
	for n in $NAMES; do
		RPS[$n,$c]=$(rounds RPS "$n" "$c" | mean)
		P50[$n,$c]=$(rounds P50 "$n" "$c" | median)
		P99[$n,$c]=$(rounds P99 "$n" "$c" | median)
		CPU_GW[$n,$c]=$(rounds CPU_GW "$n" "$c" | median)
		CPU_UP[$n,$c]=$(rounds CPU_UP "$n" "$c" | median)
	done
done

# budget TEXT X Y G COND prints a row of the budgets table: COND is an awk
# condition on x (toolgate) and y (the reverse_proxy it is held against),
# checked against b (Y) and, for reference, g (G).
budget() {
	local ok okg
	ok=$(awk -v x="$2" -v y="$3" "BEGIN { print ($5) ? \"yes\" : \"no\" }")
	okg=$(awk -v x="$2" -v y="$4" "BEGIN { print ($5) ? \"yes\" : \"no\" }")
	echo "| $1 | $2 | $3 | $ok | $4: $okg |"
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0) printf "%.2f", x / y; else print "n/a" }'; }

{
	echo "# Load harness results"
	echo
	echo "Command: \`METRICS=${METRICS:-on} LOG_LEVEL=${LOG_LEVEL:-ERROR} DURATION=$DURATION ROUNDS=$ROUNDS CONNS=\"$CONNS\" bench/run.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores,"
	echo "$(go version | cut -d' ' -f3), wrk on the same machine (loopback), 1 KiB JSON answers. The runs take"
	echo "turns, $ROUNDS rounds of $DURATION each: req/s is the mean of the rounds, p50 and p99 the median."
	echo
	echo "| run | conns | req/s | p50 ms | p99 ms | CPU µs/req, gateway | CPU µs/req, upstream |"
	echo "|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		for n in $NAMES; do
			echo "| $n | $c | ${RPS[$n,$c]} | ${P50[$n,$c]} | ${P99[$n,$c]} | ${CPU_GW[$n,$c]} | ${CPU_UP[$n,$c]} |"
		done
	done
	echo
	echo "CPU µs/req is the CPU time (user and system) a process used during the run over the"
	echo "requests served, median of the rounds: \"gateway\" is the one Caddy process that serves b to g."
	echo
	echo "Throughput ratios (b = plain Caddy reverse_proxy sent the same POST, g = sent a bare GET,"
	echo "a = the upstream directly):"
	echo
	echo "| conns | c/b | d/b | e/b | c/g | c/a |"
	echo "|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(ratio "${RPS[c_toolgate_off,$c]}" "${RPS[b_reverse_proxy,$c]}") | $(ratio "${RPS[d_toolgate_bolt,$c]}" "${RPS[b_reverse_proxy,$c]}") | $(ratio "${RPS[e_toolgate_redis,$c]}" "${RPS[b_reverse_proxy,$c]}") | $(ratio "${RPS[c_toolgate_off,$c]}" "${RPS[g_reverse_proxy_get,$c]}") | $(ratio "${RPS[c_toolgate_off,$c]}" "${RPS[a_upstream,$c]}") |"
	done
	if [[ " $CONNS " == *" 1 "* && " $CONNS " == *" 32 "* ]]; then
		echo
		echo "Budgets (DESIGN.md \"Performance\"), against b:"
		echo
		echo "| budget | toolgate | reverse_proxy (b) | met | against g |"
		echo "|---|---|---|---|---|"
		budget "throughput, ledger off, 32 conns: c/b ≥ 1.0" "${RPS[c_toolgate_off,32]}" "${RPS[b_reverse_proxy,32]}" "${RPS[g_reverse_proxy_get,32]}" 'x >= y'
		budget "throughput, bbolt, 32 conns: d/b ≥ 0.7" "${RPS[d_toolgate_bolt,32]}" "${RPS[b_reverse_proxy,32]}" "${RPS[g_reverse_proxy_get,32]}" 'x >= 0.7 * y'
		budget "p50 ms, ledger off, 1 conn: c ≤ b" "${P50[c_toolgate_off,1]}" "${P50[b_reverse_proxy,1]}" "${P50[g_reverse_proxy_get,1]}" 'x <= y'
		budget "p99 ms, ledger off, 32 conns: c ≤ b + 1 ms" "${P99[c_toolgate_off,32]}" "${P99[b_reverse_proxy,32]}" "${P99[g_reverse_proxy_get,32]}" 'x <= y + 1'
	fi
} >"$OUT"
echo
cat "$OUT"
