#!/usr/bin/env bash
# The scaling harness (docs/performance.md): the cost of a call as toolgate scales
# out and as its tool list grows, measured with wrk at CONNS connections
# against the fixed loopback upstream of bench/run.sh.
#
# Instances on one Redis: 1, 2 and 3 toolgate processes, each with its own
# Caddyfile on its own port, all on one Redis ledger with the same tool,
# behind a load balancer (a separate Caddy process: reverse_proxy with
# lb_policy round_robin over 1, 2 or 3 of them), and the first instance
# alone without the balancer, which shows what the balancer costs.
#
# Declared tools: one process per count (10, 1,000, 10,000 tools in a
# generated tools.json), each with a site for the Redis ledger and one
# with it off, called on its last tool. A call's cost must not grow with
# the tool count: the table gives the ratio 10,000/10.
#
# Every row takes turns with the others, ROUNDS rounds of DURATION, as in
# bench/run.sh: req/s is the mean of the rounds, p50, p99 and CPU the
# median. On a machine with few cores the instances share them: the
# table shows what a call costs, not what more machines would serve.
#
#   bench/scale.sh                          # 2 rounds of 5 s
#   DURATION=10s ROUNDS=3 CONNS=64 bench/scale.sh
#   INSTANCES="1 2" TOOLS="10 10000" bench/scale.sh
#   BUILD_ONLY=1 bench/scale.sh             # build and check the harness (CI)
#
# Redis runs as docs/operations.md asks (AOF, appendfsync everysec;
# maxmemory-policy noeviction), as in bench/run.sh.
#
# Writes the "Scaling" section of bench/RESULTS.md (OUT), leaving the
# others. Needs wrk and redis-server. The ports are fixed (98xx on
# 127.0.0.1): run it alone, or in its own network namespace.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-32}
INSTANCES=${INSTANCES:-"1 2 3"}
TOOLS=${TOOLS:-"10 1000 10000"}
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
max=0
for n in $INSTANCES; do ((n > max)) && max=$n; done
((max <= 8)) || { echo "bench: at most 8 instances" >&2; exit 1; }

REDIS=127.0.0.1:9822
start_upstream
redis-server --port 9822 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec --maxmemory-policy noeviction --dir "$work" >"$work/redis.log" 2>&1 &
redis=$!
pids+=($redis)
wait_for "http://$UP/"

# start NAME URL runs toolgate (or the balancer) with $work/NAME.caddyfile,
# in a data folder of its own, and waits until URL answers; its pid is in
# proc[NAME]. A gateway with 10,000 tools takes a while to compile them.
declare -A proc
start() {
	local name=$1 url=$2
	mkdir -p "$work/$name"
	XDG_DATA_HOME=$work/$name XDG_CONFIG_HOME=$work/$name "$work/toolgate" run --config "$work/$name.caddyfile" --adapter caddyfile >"$work/$name.log" 2>&1 &
	proc[$name]=$!
	pids+=($!)
	for _ in $(seq 600); do
		curl -fsS -o /dev/null "$url" 2>/dev/null && return
		kill -0 "${proc[$name]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench: $name did not answer $url:" >&2
	curl -sS -i "$url" 2>&1 | head -5 >&2 || true
	cat "$work/$name.log" >&2
	exit 1
}

post=(-X POST -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}')

# Instances on one Redis: instance i on 983i (admin 984i), the balancer's
# site for n instances on 985n (admin 9849). The instances verify caller
# tokens, as they must in production: without callers, toolgate serves
# only requests straight from this machine, and refuses what a proxy
# forwards (X-Forwarded-For), trusted or not.
secret=bench-scale-caller-secret-$RANDOM$RANDOM-0123456789abcdef
token=$(caller_token "$secret")
callers="		callers {
			secret $secret
			issuer bench
			audience toolgate
		}"
for i in $(seq "$max"); do
	cat >"$work/i$i.caddyfile" <<EOF
$(globals "127.0.0.1:984$i" "$work/i$i/storage")
http://127.0.0.1:983$i {
	bind 127.0.0.1
$(tool "redis $REDIS" "http://$UP" "$callers")
}
EOF
	start "i$i" "http://127.0.0.1:983$i/.well-known/jwks.json"
done
authed=(-X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $token" -d '{"input":{"id":"b1"}}')
cat >"$work/post_authed.lua" <<EOF
wrk.method = "POST"
wrk.body = '{"input":{"id":"b1"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
EOF
{
	globals 127.0.0.1:9849 "$work/lb/storage"
	for n in $INSTANCES; do
		echo "http://127.0.0.1:985$n {"
		echo "	bind 127.0.0.1"
		echo "	reverse_proxy $(for i in $(seq "$n"); do printf '127.0.0.1:983%s ' "$i"; done){"
		echo "		lb_policy round_robin"
		echo "	}"
		echo "}"
	done
} >"$work/lb.caddyfile"
start lb "http://127.0.0.1:985${INSTANCES%% *}/.well-known/jwks.json"

# Declared tools: a manifest of N tools each, whose process serves the
# Redis ledger on 986k and ledger off on 987k (admin 988k), k the count's
# place in TOOLS.
manifest() {
	awk -v n="$1" 'BEGIN {
		printf "{\"tools\":["
		for (i = 1; i <= n; i++) {
			printf "%s{\"name\":\"tool_%05d\",\"description\":\"Get item kind %d.\",", (i > 1 ? "," : ""), i, i
			printf "\"input_schema\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},\"required\":[\"id\"],\"additionalProperties\":false},"
			printf "\"target\":{\"type\":\"app\",\"component\":\"api\",\"method\":\"GET\",\"path\":\"/kind%d/items/${input.id}\"}}", i
		}
		print "]}"
	}'
}
k=0
for n in $TOOLS; do
	k=$((k + 1))
	manifest "$n" >"$work/tools$n.json"
	for ledger in redis off; do
		port=986$k
		[[ $ledger == off ]] && port=987$k
		cat <<EOF
http://127.0.0.1:$port {
	bind 127.0.0.1
	toolgate {
		manifest $work/tools$n.json
		component api http://$UP
		ledger $([[ $ledger == off ]] && echo off || echo "redis $REDIS")
$([[ ${METRICS:-on} == off ]] && printf '\t\tmetrics off' || true)
	}
}
EOF
	done >"$work/t$n.sites"
	{
		globals "127.0.0.1:988$k" "$work/t$n/storage"
		cat "$work/t$n.sites"
	} >"$work/t$n.caddyfile"
	start "t$n" "http://127.0.0.1:986$k/tools"
done

# The rows: name, URL, and the processes whose CPU it reports.
rows=() all_i=()
declare -A URL GW
for i in $(seq "$max"); do all_i+=("${proc[i$i]}"); done
rows+=(i1_direct)
URL[i1_direct]=http://127.0.0.1:9831/tools/get_item
for n in $INSTANCES; do
	rows+=("lb_$n")
	URL[lb_$n]=http://127.0.0.1:985$n/tools/get_item
done
k=0
for n in $TOOLS; do
	k=$((k + 1))
	printf -v last 'tool_%05d' "$n"
	for ledger in off redis; do
		port=986$k
		[[ $ledger == off ]] && port=987$k
		rows+=("tools_${n}_$ledger")
		URL[tools_${n}_$ledger]=http://127.0.0.1:$port/tools/$last
		GW[tools_${n}_$ledger]=${proc[t$n]}
	done
done
for row in "${rows[@]}"; do
	if [[ $row == tools_* ]]; then check "${post[@]}" "${URL[$row]}"; else check "${authed[@]}" "${URL[$row]}"; fi
done

# measure ROW ROUND loads a row for DURATION and keeps req/s, latencies and
# the CPU µs/req of each process that serves it.
declare -A RPS P50 P99 CPU
measure() {
	local row=$1 r=$2 out n p
	local -A t0
	local watch=("$up" "$redis" "${proc[lb]}" "${all_i[@]}")
	[[ -n ${GW[$row]:-} ]] && watch+=("${GW[$row]}")
	for p in "${watch[@]}"; do t0[$p]=$(cputicks "$p"); done
	local script=$work/post_authed.lua
	[[ $row == tools_* ]] && script=$work/post.lua
	out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$script" "${URL[$row]}")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	for p in "${watch[@]}"; do
		CPU[$row,$p,$r]=$(awk -v d=$(($(cputicks "$p") - t0[$p])) -v n="$n" -v k="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	done
	RPS[$row,$r]=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
	P50[$row,$r]=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
	P99[$row,$r]=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	[[ -z $errs ]] || echo "bench: $row: $errs" >&2
	printf '%-18s round %s %9s req/s  p50 %8s ms  p99 %8s ms\n' "$row" "$r" "${RPS[$row,$r]}" "${P50[$row,$r]}" "${P99[$row,$r]}"
}
for r in $(seq "$ROUNDS"); do
	for row in "${rows[@]}"; do measure "$row" "$r"; done
done

# Summaries over the rounds: req/s their mean, the rest their median.
mean() { awk '{ s += $1; n++ } END { printf "%.0f", s / n }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
over() { # over ARRAY KEY prints the rounds' values of ARRAY[KEY,round]
	local -n arr=$1
	for r in $(seq "$ROUNDS"); do echo "${arr[$2,$r]}"; done
}
rps() { over RPS "$1" | mean; }
p50() { over P50 "$1" | median; }
p99() { over P99 "$1" | median; }
cpu() { over CPU "$1,$2" | median | awk '{ printf "%.0f", $1 }'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0) printf "%.2f", x / y; else print "n/a" }'; }

{
	echo "## Scaling"
	echo
	echo "Command: \`METRICS=${METRICS:-on} DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS INSTANCES=\"$INSTANCES\" TOOLS=\"$TOOLS\" bench/scale.sh\` on"
	echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(go version | cut -d' ' -f3), wrk at $CONNS connections on the same machine"
	echo "(loopback), 1 KiB JSON answers. The rows take turns, $ROUNDS rounds of $DURATION each: req/s is"
	echo "the mean of the rounds, the rest the median. CPU µs/req is a process's CPU time (user and"
	echo "system) over the requests served. Every process shares the machine's $(nproc) cores with the"
	echo "others and with wrk: more instances here add no capacity, so the tables show what a call"
	echo "costs, not what more machines would serve."
	echo
	echo "### Instances on one Redis"
	echo
	echo "Separate toolgate processes, each its own Caddyfile and port, one Redis ledger, the same"
	echo "tool; lb_N is a Caddy load balancer (a separate process, reverse_proxy, round_robin) in"
	echo "front of N of them, i1_direct the first instance without it."
	echo
	printf '| run | req/s | p50 ms | p99 ms | CPU µs/req, balancer | CPU µs/req, instance 1/2/… | instances, sum | Redis | upstream |\n'
	echo "|---|---|---|---|---|---|---|---|---|"
	for row in i1_direct $(for n in $INSTANCES; do echo "lb_$n"; done); do
		each=() sum=0
		for p in "${all_i[@]}"; do
			v=$(cpu "$row" "$p")
			each+=("$v")
			sum=$((sum + v))
		done
		echo "| $row | $(rps "$row") | $(p50 "$row") | $(p99 "$row") | $(cpu "$row" "${proc[lb]}") | $(IFS=/; echo "${each[*]}") | $sum | $(cpu "$row" "$redis") | $(cpu "$row" "$up") |"
	done
	echo
	echo "### Declared tools"
	echo
	echo "One toolgate process per count, its tools in a generated tools.json (the same schema, a"
	echo "path of their own), called on the last one; its sites have the Redis ledger and none."
	echo
	echo "| run | tools | ledger | req/s | p50 ms | p99 ms | CPU µs/req, toolgate | Redis |"
	echo "|---|---|---|---|---|---|---|---|"
	for ledger in off redis; do
		for n in $TOOLS; do
			row=tools_${n}_$ledger
			echo "| $row | $n | $ledger | $(rps "$row") | $(p50 "$row") | $(p99 "$row") | $(cpu "$row" "${GW[$row]}") | $(cpu "$row" "$redis") |"
		done
	done
	first=${TOOLS%% *} last=${TOOLS##* }
	if [[ $first != "$last" ]]; then
		echo
		echo "Flat in the tool count, $last tools over $first:"
		echo
		echo "| ledger | req/s | CPU µs/req, toolgate |"
		echo "|---|---|---|"
		for ledger in off redis; do
			a=tools_${first}_$ledger b=tools_${last}_$ledger
			echo "| $ledger | $(ratio "$(rps "$b")" "$(rps "$a")") | $(ratio "$(cpu "$b" "${GW[$b]}")" "$(cpu "$a" "${GW[$a]}")") |"
		done
	fi
} | write_section "$OUT" "## Scaling"
echo
awk '/^## Scaling$/ { p = 1; print; next } p && /^##? / { exit } p' "$OUT"
