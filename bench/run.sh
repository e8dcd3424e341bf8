#!/usr/bin/env bash
# The load harness: toolgate beside plain Caddy reverse_proxy and the bare
# upstream, in one run, on this machine. It builds toolgate, a fixed
# loopback upstream (1 KiB JSON answers) and a loopback MCP server
# (1 KiB of text), then measures with wrk:
#   a  the upstream directly
#   h  a bare hop: httputil.ReverseProxy with a tuned transport, no Caddy
#      (bench/barehop), sent the same POST as toolgate; the limit for any
#      Go proxy on the machine
#   b  plain Caddy reverse_proxy to it, sent the same POST as toolgate
#      (the envelope is its body, which it forwards)
#   g  plain Caddy reverse_proxy sent a bare GET, for reference
#   c  toolgate, an app target, ledger off
#   u  toolgate, ledger off, the component on a unix socket
#      (component api unix//PATH; the upstream answers there too)
#   d  toolgate with the bbolt ledger, at steady state: it keeps calls for
#      1m (client_tool_timeout 30s, as the retention rule asks), so the
#      sweeper deletes old calls every minute; before the rounds d is
#      loaded alone for WARMUP so that the ledger holds a minute of calls
#      and sweeps fall inside the rounds
#   e  toolgate with the Redis ledger, on a redis-server set as
#      docs/operations.md asks an operator to: AOF on (appendonly yes,
#      appendfsync everysec) and maxmemory-policy noeviction
#   m  MCP tools/call of the same tool on c's site, the sessionless
#      revision (2026-07-28), the user named in _meta
#   n  the same on d's site (bbolt)
#   s  MCP tools/call on a session (2025-11-25) on c's site
#   i  c's site in a second toolgate process logging at Caddy's default
#      level (INFO: one line a call, to a file), as a user runs it
#   p  an MCP server directly (bench/mcpupstream: the official Go SDK,
#      one tool, echo, answering 1 KiB of text), sent v's request: a
#      sessionless (2026-07-28) tools/call
#   t  toolgate, ledger off, with that server behind it (mcp_server):
#      echo through the Tools API, the envelope as c's
#   v  MCP in, MCP out: a sessionless tools/call of echo on t's site
#   w  t on a site with d's ledger (one config, so one store: d's
#      warm-up fills it for w too)
#   x  v on w's site
# at each concurrency, and writes the "Load harness results" section of
# bench/RESULTS.md (the other sections stay) with the project's budgets,
# computed here. They take turns:
# ROUNDS rounds of DURATION each, so that drift in the machine (other load,
# clock speed) falls on all of them alike. req/s is the mean of the rounds,
# p50 and p99 their median.
#
#   bench/run.sh                      # 3 rounds of 10 s: 30 s per target
#   DURATION=5s ROUNDS=2 CONNS="32" bench/run.sh
#   WARMUP=0 bench/run.sh             # d without its warm-up (no sweep early on)
#   BUILD_ONLY=1 bench/run.sh         # build and check the harness (CI)
#   ONLY="b_reverse_proxy d_toolgate_bolt" bench/run.sh   # some runs, printed, no table
#   METRICS=off OUT=/tmp/off.md bench/run.sh   # toolgate with `metrics off`
#   LOG_LEVEL=INFO bench/run.sh       # with the per-call log line written
#
# Needs wrk and redis-server (Debian packages). The ports are fixed
# (98xx on 127.0.0.1): run it alone, or in its own network namespace.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-"1 32 256"}
WARMUP=${WARMUP:-70s}
OUT=${OUT:-bench/RESULTS.md}

. bench/lib.sh
build
if [[ -n ${BUILD_ONLY:-} ]]; then
	echo "bench: built toolgate, the upstream, the MCP upstream and the bare hop"
	exit 0
fi
for cmd in wrk redis-server; do
	command -v "$cmd" >/dev/null || { echo "bench: $cmd is not installed (apt-get install $cmd)" >&2; exit 1; }
done

REDIS=127.0.0.1:9802
MCPUP=127.0.0.1:9803
SOCK=$work/upstream.sock
start_upstream -unix "$SOCK"
"$work/mcpupstream" -addr "$MCPUP" >"$work/mcpupstream.log" 2>&1 &
mup=$!
pids+=($mup)
"$work/barehop" -addr 127.0.0.1:9815 -upstream "http://$UP" >"$work/barehop.log" 2>&1 &
hop=$!
pids+=($hop)
redis-server --port 9802 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec --maxmemory-policy noeviction --dir "$work" >"$work/redis.log" 2>&1 &
rds=$!
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
$(tool "bolt $work/ledger.db {
				retention 1m
			}
			client_tool_timeout 30s")
}
http://127.0.0.1:9814 {
	bind 127.0.0.1
$(tool "redis $REDIS")
}
http://127.0.0.1:9816 {
	bind 127.0.0.1
$(tool off "unix/$SOCK")
}
http://127.0.0.1:9823 {
	bind 127.0.0.1
$(tool off "http://$UP" "			mcp_server up http://$MCPUP/mcp")
}
http://127.0.0.1:9824 {
	bind 127.0.0.1
$(tool "bolt $work/ledger.db {
				retention 1m
			}
			client_tool_timeout 30s" "http://$UP" "			mcp_server up http://$MCPUP/mcp")
}
EOF
# MCP: tools/call of get_item (of echo on the MCP upstream), sessionless
# (the revision's headers and _meta on every request) and on a session
# opened here. Each script sends the revision's headers, Mcp-Method and
# Mcp-Name with them.
mcp_headers=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
mcp_meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"},"toolgate/identity":{"user":"u_1","install":"in_1"}}'
mcp_call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},'$mcp_meta'}}'
mcp_echo='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},'$mcp_meta'}}'
# mcp_lua TOOL BODY prints a wrk script sending BODY, a sessionless
# tools/call of TOOL.
mcp_lua() {
	cat <<EOS
wrk.method = "POST"
wrk.body = '$2'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "$1"
EOS
}
mcp_lua get_item "$mcp_call" >"$work/mcp.lua"
mcp_lua echo "$mcp_echo" >"$work/mcp_echo.lua"
# The MCP upstream answers before toolgate, which lists its tools at load.
wait_for "${mcp_headers[@]}" -H 'Mcp-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' -d "$mcp_echo" "http://$MCPUP/mcp"
wait_for "http://$UP/"
wait_for --unix-socket "$SOCK" http://localhost/
wait_for http://127.0.0.1:9815/
start_toolgate "http://127.0.0.1:9812/tools"

# i: the same site as c in a toolgate of its own, logging at INFO to a file.
cat >"$work/Caddyfile.info" <<EOF
{
	admin 127.0.0.1:9820
	storage file_system $work/storage-info
	log {
		output file $work/info.log
		level INFO
	}
}
http://127.0.0.1:9818 {
	bind 127.0.0.1
$(tool off)
}
EOF
XDG_DATA_HOME=$work XDG_CONFIG_HOME=$work "$work/toolgate" run --config "$work/Caddyfile.info" --adapter caddyfile >"$work/toolgate-info.log" 2>&1 &
tgi=$!
pids+=($tgi)
wait_for http://127.0.0.1:9818/tools

# The Tools API's call of echo, the envelope as post.lua's.
cat >"$work/echo.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"input":{"text":"x"},"identity":{"user":"u_1","install":"in_1"}}'
wrk.headers["Content-Type"] = "application/json"
EOF
# The session s runs on.
session=$(curl -fsS -D - -o /dev/null "${mcp_headers[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' http://127.0.0.1:9812/mcp |
	awk -F': ' 'tolower($1) == "mcp-session-id" { sub(/\r$/, "", $2); print $2 }')
[[ -n $session ]] || { echo "bench: no MCP session" >&2; exit 1; }
curl -fsS -o /dev/null "${mcp_headers[@]}" -H "Mcp-Session-Id: $session" -H 'Mcp-Protocol-Version: 2025-11-25' \
	-d '{"jsonrpc":"2.0","method":"notifications/initialized"}' http://127.0.0.1:9812/mcp
# On a session, requests in flight at once need ids of their own: each
# wrk thread counts its own, prefixed with the thread's number.
cat >"$work/mcp_session.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Protocol-Version"] = "2025-11-25"
wrk.headers["Mcp-Session-Id"] = "$session"
local threads = 0
function setup(thread)
	threads = threads + 1
	thread:set("tid", threads)
end
local n = 0
function request()
	n = n + 1
	local body = '{"jsonrpc":"2.0","id":"' .. tid .. '-' .. n .. '","method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},"_meta":{"toolgate/identity":{"user":"u_1","install":"in_1"}}}}'
	return wrk.format(nil, nil, nil, body)
end
EOF

# Check each target answers what it should before loading it.
check "http://$UP/items/b1"
check "http://127.0.0.1:9811/items/b1"
for port in 9811 9815; do
	check -X POST -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}' "http://127.0.0.1:$port/items/b1"
done
for port in 9812 9813 9814 9816 9818; do
	check -X POST -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}' "http://127.0.0.1:$port/tools/get_item"
done
for port in 9823 9824; do
	check -X POST -H 'Content-Type: application/json' -d '{"input":{"text":"x"},"identity":{"user":"u_1","install":"in_1"}}' "http://127.0.0.1:$port/tools/echo"
done
# check_mcp CURL-ARGS: an MCP answer holding the tool's text, not an error.
check_mcp() {
	local got
	got=$(curl -fsS "${mcp_headers[@]}" "$@")
	[[ $got == *'"text":"xxx'* && $got != *'"isError":true'* ]] || { echo "bench: unexpected MCP answer from $*: ${got:0:300}" >&2; exit 1; }
}
for port in 9812 9813; do
	check_mcp -H 'Mcp-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: get_item' -d "$mcp_call" "http://127.0.0.1:$port/mcp"
done
for url in "http://$MCPUP/mcp" http://127.0.0.1:9823/mcp http://127.0.0.1:9824/mcp; do
	check_mcp -H 'Mcp-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' -d "$mcp_echo" "$url"
done
check_mcp -H 'Mcp-Protocol-Version: 2025-11-25' -H "Mcp-Session-Id: $session" \
	-d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},"_meta":{"toolgate/identity":{"user":"u_1","install":"in_1"}}}}' http://127.0.0.1:9812/mcp

declare -A RPS P50 P99 CPU_GW CPU_UP CPU_RD
TICK=$(getconf CLK_TCK)
run() { # run NAME CONNS ROUND GATEWAY_PID UPSTREAM_PID URL [wrk args...]
	local name=$1 c=$2 r=$3 gw=$4 upp=$5 url=$6
	shift 6
	[[ -z ${ONLY:-} || " $ONLY " == *" $name "* ]] || return 0
	local t=2
	((c < t)) && t=$c
	local out gw0 up0 rd0 gw1 up1 rd1 n
	gw0=$(cputicks "$gw")
	up0=$(cputicks "$upp")
	rd0=$(cputicks "$rds")
	out=$(wrk -t"$t" -c"$c" -d"$DURATION" --latency "$@" "$url")
	gw1=$(cputicks "$gw")
	up1=$(cputicks "$upp")
	rd1=$(cputicks "$rds")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	CPU_GW[$name,$c,$r]=$(awk -v d=$((gw1 - gw0)) -v n="$n" -v k="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	CPU_UP[$name,$c,$r]=$(awk -v d=$((up1 - up0)) -v n="$n" -v k="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	CPU_RD[$name,$c,$r]=$(awk -v d=$((rd1 - rd0)) -v n="$n" -v k="$TICK" 'BEGIN { printf "%.0f", d * 1e6 / k / n }')
	RPS[$name,$c,$r]=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
	P50[$name,$c,$r]=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
	P99[$name,$c,$r]=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	# A row with failed requests measures something else: stop.
	[[ -z $errs ]] || { echo "bench: $name c=$c: $errs" >&2; exit 1; }
	printf '%-22s c=%-4s round %s %9s req/s  p50 %8s ms  p99 %8s ms  CPU µs/req gateway %4s upstream %4s\n' "$name" "$c" "$r" "${RPS[$name,$c,$r]}" "${P50[$name,$c,$r]}" "${P99[$name,$c,$r]}" "${CPU_GW[$name,$c,$r]}" "${CPU_UP[$name,$c,$r]}"
}

# d's warm-up: a minute of calls in its ledger, so that from the rounds
# on the sweeper deletes about as many calls as d records.
if [[ $WARMUP != 0 && $WARMUP != 0s ]]; then
	echo "bench: d_toolgate_bolt warm-up, 32 connections for $WARMUP"
	wrk -t2 -c32 -d"$WARMUP" -s "$work/post.lua" http://127.0.0.1:9813/tools/get_item >/dev/null
fi

NAMES="a_upstream p_mcp_upstream h_bare_hop b_reverse_proxy g_reverse_proxy_get c_toolgate_off u_toolgate_unix d_toolgate_bolt e_toolgate_redis m_mcp_off n_mcp_bolt s_mcp_session_off i_toolgate_info t_upstream_off v_upstream_mcp_off w_upstream_bolt x_upstream_mcp_bolt"
for c in $CONNS; do
	for r in $(seq "$ROUNDS"); do
		run a_upstream "$c" "$r" "$tg" "$up" "http://$UP/items/b1"
		run p_mcp_upstream "$c" "$r" "$tg" "$mup" "http://$MCPUP/mcp" -s "$work/mcp_echo.lua"
		run h_bare_hop "$c" "$r" "$hop" "$up" "http://127.0.0.1:9815/items/b1" -s "$work/post.lua"
		run b_reverse_proxy "$c" "$r" "$tg" "$up" "http://127.0.0.1:9811/items/b1" -s "$work/post.lua"
		run g_reverse_proxy_get "$c" "$r" "$tg" "$up" "http://127.0.0.1:9811/items/b1"
		run c_toolgate_off "$c" "$r" "$tg" "$up" "http://127.0.0.1:9812/tools/get_item" -s "$work/post.lua"
		run u_toolgate_unix "$c" "$r" "$tg" "$up" "http://127.0.0.1:9816/tools/get_item" -s "$work/post.lua"
		run d_toolgate_bolt "$c" "$r" "$tg" "$up" "http://127.0.0.1:9813/tools/get_item" -s "$work/post.lua"
		run e_toolgate_redis "$c" "$r" "$tg" "$up" "http://127.0.0.1:9814/tools/get_item" -s "$work/post.lua"
		run m_mcp_off "$c" "$r" "$tg" "$up" "http://127.0.0.1:9812/mcp" -s "$work/mcp.lua"
		run n_mcp_bolt "$c" "$r" "$tg" "$up" "http://127.0.0.1:9813/mcp" -s "$work/mcp.lua"
		run s_mcp_session_off "$c" "$r" "$tg" "$up" "http://127.0.0.1:9812/mcp" -s "$work/mcp_session.lua"
		run i_toolgate_info "$c" "$r" "$tgi" "$up" "http://127.0.0.1:9818/tools/get_item" -s "$work/post.lua"
		run t_upstream_off "$c" "$r" "$tg" "$mup" "http://127.0.0.1:9823/tools/echo" -s "$work/echo.lua"
		run v_upstream_mcp_off "$c" "$r" "$tg" "$mup" "http://127.0.0.1:9823/mcp" -s "$work/mcp_echo.lua"
		run w_upstream_bolt "$c" "$r" "$tg" "$mup" "http://127.0.0.1:9824/tools/echo" -s "$work/echo.lua"
		run x_upstream_mcp_bolt "$c" "$r" "$tg" "$mup" "http://127.0.0.1:9824/mcp" -s "$work/mcp_echo.lua"
	done
done

# Some runs only: their lines above are the figures.
[[ -z ${ONLY:-} ]] || exit 0

# rounds ARRAY NAME CONNS prints the rounds' values of one run, one a line.
rounds() {
	local -n arr=$1
	for r in $(seq "$ROUNDS"); do echo "${arr[$2,$3,$r]}"; done
}
mean() { awk '{ s += $1; n++ } END { printf "%.0f", s / n }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
whole() { awk '{ printf "%.0f", $1 }'; }
for c in $CONNS; do
	for n in $NAMES; do
		RPS[$n,$c]=$(rounds RPS "$n" "$c" | mean)
		P50[$n,$c]=$(rounds P50 "$n" "$c" | median)
		P99[$n,$c]=$(rounds P99 "$n" "$c" | median)
		CPU_GW[$n,$c]=$(rounds CPU_GW "$n" "$c" | median | whole)
		CPU_UP[$n,$c]=$(rounds CPU_UP "$n" "$c" | median | whole)
		CPU_RD[$n,$c]=$(rounds CPU_RD "$n" "$c" | median | whole)
	done
done

# budget TEXT X Y REF COND prints a row of the budgets table: COND is an
# awk condition on x (toolgate) and y (what it is held against, REF).
budget() {
	local ok
	ok=$(awk -v x="$2" -v y="$3" "BEGIN { print ($5) ? \"yes\" : \"no\" }")
	echo "| $1 | $2 | $4: $3 | $ok |"
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0) printf "%.2f", x / y; else print "n/a" }'; }
# r X Y prints the ratio of two runs' req/s at $c; rc that of their
# gateway CPU µs/req.
r() { ratio "${RPS[$1,$c]}" "${RPS[$2,$c]}"; }
rc() { ratio "${CPU_GW[$1,$c]}" "${CPU_GW[$2,$c]}"; }
# added P50|P99 X Y prints what run X's latency adds to run Y's at $c, in ms.
added() {
	local -n arr=$1
	awk -v x="${arr[$2,$c]}" -v y="${arr[$3,$c]}" 'BEGIN { printf "%.3f", x - y }'
}

{
	echo "# Load harness results"
	echo
	echo "Command: \`METRICS=${METRICS:-on} LOG_LEVEL=${LOG_LEVEL:-ERROR} DURATION=$DURATION ROUNDS=$ROUNDS CONNS=\"$CONNS\" WARMUP=$WARMUP bench/run.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores,"
	echo "$(go version | cut -d' ' -f3), wrk on the same machine (loopback), 1 KiB JSON answers. The runs take"
	echo "turns, $ROUNDS rounds of $DURATION each: req/s is the mean of the rounds, p50 and p99 the median."
	if [[ $WARMUP != 0 && $WARMUP != 0s ]]; then
		echo "d keeps calls for 1m and was loaded alone for $WARMUP before the rounds, so its sweeper"
		echo "(every minute) deletes old calls during them: bbolt at steady state."
	else
		echo "d keeps calls for 1m but had no warm-up: its ledger held under a minute of calls at first,"
		echo "and a run this short may see no sweep: not bbolt's steady state."
	fi
	echo
	echo "| run | conns | req/s | p50 ms | p99 ms | CPU µs/req, gateway | CPU µs/req, upstream | CPU µs/req, Redis |"
	echo "|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		for n in $NAMES; do
			echo "| $n | $c | ${RPS[$n,$c]} | ${P50[$n,$c]} | ${P99[$n,$c]} | ${CPU_GW[$n,$c]} | ${CPU_UP[$n,$c]} | ${CPU_RD[$n,$c]} |"
		done
	done
	echo
	echo "CPU µs/req is the CPU time (user and system) a process used during the run over the"
	echo "requests served, median of the rounds: \"gateway\" is the bare hop's process for h, and"
	echo "the one Caddy process that serves b to u and t to x for the others (a and p count it too:"
	echo "it is idle); \"upstream\" is bench/upstream, or for p to x the MCP upstream"
	echo "(bench/mcpupstream); \"Redis\" is redis-server, which only e uses (the others show it idle)."
	echo
	echo "Throughput ratios (h = the bare hop, b = plain Caddy reverse_proxy sent the same POST,"
	echo "g = sent a bare GET, a = the upstream directly; u = c with the component on a unix socket):"
	echo
	echo "| conns | c/h | c/b | d/b | e/b | u/h | u/c | c/g | c/a | h/b |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(r c_toolgate_off h_bare_hop) | $(r c_toolgate_off b_reverse_proxy) | $(r d_toolgate_bolt b_reverse_proxy) | $(r e_toolgate_redis b_reverse_proxy) | $(r u_toolgate_unix h_bare_hop) | $(r u_toolgate_unix c_toolgate_off) | $(r c_toolgate_off g_reverse_proxy_get) | $(r c_toolgate_off a_upstream) | $(r h_bare_hop b_reverse_proxy) |"
	done
	echo
	echo "The gateway's CPU µs/req in the same ratios (lower is cheaper; on a machine shared with"
	echo "other load these move less than req/s, which the other processes' share of the cores sets):"
	echo
	echo "| conns | c/h | c/b | d/b | e/b | u/h | u/c | c/g | h/b |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(rc c_toolgate_off h_bare_hop) | $(rc c_toolgate_off b_reverse_proxy) | $(rc d_toolgate_bolt b_reverse_proxy) | $(rc e_toolgate_redis b_reverse_proxy) | $(rc u_toolgate_unix h_bare_hop) | $(rc u_toolgate_unix c_toolgate_off) | $(rc c_toolgate_off g_reverse_proxy_get) | $(rc h_bare_hop b_reverse_proxy) |"
	done
	echo
	echo "MCP and logging (m = MCP sessionless tools/call on c's site, n = on d's, s = on a session"
	echo "on c's site; i = c's site in a toolgate logging at INFO, Caddy's default); throughput,"
	echo "then the gateway's CPU µs/req, in the same ratios:"
	echo
	echo "| conns | m/c | n/d | s/c | i/b | m/c CPU | n/d CPU | s/c CPU | i/b CPU |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(r m_mcp_off c_toolgate_off) | $(r n_mcp_bolt d_toolgate_bolt) | $(r s_mcp_session_off c_toolgate_off) | $(r i_toolgate_info b_reverse_proxy) | $(rc m_mcp_off c_toolgate_off) | $(rc n_mcp_bolt d_toolgate_bolt) | $(rc s_mcp_session_off c_toolgate_off) | $(rc i_toolgate_info b_reverse_proxy) |"
	done
	echo
	echo "An MCP upstream (p = an MCP server on the official Go SDK called directly, a sessionless"
	echo "tools/call of its echo tool, 1 KiB of text; t = toolgate with it behind (mcp_server), ledger"
	echo "off, through the Tools API; v = a sessionless tools/call on t's site, MCP in and out; w, x ="
	echo "t, v on a site sharing d's bbolt ledger): what toolgate adds to calling p, in ms:"
	echo
	echo "| conns | p50 t−p | p50 v−p | p50 w−p | p50 x−p | p99 t−p | p99 v−p | p99 w−p | p99 x−p |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(added P50 t_upstream_off p_mcp_upstream) | $(added P50 v_upstream_mcp_off p_mcp_upstream) | $(added P50 w_upstream_bolt p_mcp_upstream) | $(added P50 x_upstream_mcp_bolt p_mcp_upstream) | $(added P99 t_upstream_off p_mcp_upstream) | $(added P99 v_upstream_mcp_off p_mcp_upstream) | $(added P99 w_upstream_bolt p_mcp_upstream) | $(added P99 x_upstream_mcp_bolt p_mcp_upstream) |"
	done
	echo
	echo "and in throughput against plain Caddy reverse_proxy (b) and p, then the gateway's CPU"
	echo "µs/req against the same call of an app tool (c, m, d, n):"
	echo
	echo "| conns | t/b | v/b | w/b | x/b | t/p | v/p | t/c CPU | v/m CPU | w/d CPU | x/n CPU |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for c in $CONNS; do
		echo "| $c | $(r t_upstream_off b_reverse_proxy) | $(r v_upstream_mcp_off b_reverse_proxy) | $(r w_upstream_bolt b_reverse_proxy) | $(r x_upstream_mcp_bolt b_reverse_proxy) | $(r t_upstream_off p_mcp_upstream) | $(r v_upstream_mcp_off p_mcp_upstream) | $(rc t_upstream_off c_toolgate_off) | $(rc v_upstream_mcp_off m_mcp_off) | $(rc w_upstream_bolt d_toolgate_bolt) | $(rc x_upstream_mcp_bolt n_mcp_bolt) |"
	done
	if [[ " $CONNS " == *" 32 "* || " $CONNS " == *" 1 "* ]]; then
		echo
		echo "Budgets (the project's, see docs/performance.md), computed by the script:"
		echo
		echo "| budget | toolgate | held against | met |"
		echo "|---|---|---|---|"
	fi
	if [[ " $CONNS " == *" 32 "* ]]; then
		budget "throughput, ledger off, 32 conns: c ≥ 1.0 × h" "${RPS[c_toolgate_off,32]}" "${RPS[h_bare_hop,32]}" h 'x >= y'
		budget "throughput, bbolt at steady state, 32 conns: d ≥ 0.85 × b" "${RPS[d_toolgate_bolt,32]}" "${RPS[b_reverse_proxy,32]}" b 'x >= 0.85 * y'
		budget "throughput, Redis, 32 conns: e ≥ 0.8 × b" "${RPS[e_toolgate_redis,32]}" "${RPS[b_reverse_proxy,32]}" b 'x >= 0.8 * y'
		budget "p99 ms, ledger off, 32 conns: c ≤ b" "${P99[c_toolgate_off,32]}" "${P99[b_reverse_proxy,32]}" b 'x <= y'
		budget "throughput, MCP sessionless, 32 conns: m ≥ 0.8 × c" "${RPS[m_mcp_off,32]}" "${RPS[c_toolgate_off,32]}" c 'x >= 0.8 * y'
		budget "gateway CPU µs/req, MCP sessionless, 32 conns: m ≤ 1.25 × c" "${CPU_GW[m_mcp_off,32]}" "${CPU_GW[c_toolgate_off,32]}" c 'x <= 1.25 * y'
		budget "throughput, MCP session, 32 conns: s ≥ 0.8 × c" "${RPS[s_mcp_session_off,32]}" "${RPS[c_toolgate_off,32]}" c 'x >= 0.8 * y'
		budget "gateway CPU µs/req, MCP session, 32 conns: s ≤ 1.25 × c" "${CPU_GW[s_mcp_session_off,32]}" "${CPU_GW[c_toolgate_off,32]}" c 'x <= 1.25 * y'
		budget "throughput, MCP with bbolt, 32 conns: n ≥ 0.8 × d" "${RPS[n_mcp_bolt,32]}" "${RPS[d_toolgate_bolt,32]}" d 'x >= 0.8 * y'
		budget "throughput, INFO logging, 32 conns: i ≥ 1.0 × b" "${RPS[i_toolgate_info,32]}" "${RPS[b_reverse_proxy,32]}" b 'x >= y'
	fi
	if [[ " $CONNS " == *" 1 "* ]]; then
		budget "p50 ms, ledger off, 1 conn: c ≤ b" "${P50[c_toolgate_off,1]}" "${P50[b_reverse_proxy,1]}" b 'x <= y'
		budget "p50 ms, MCP sessionless, 1 conn: m ≤ c + 0.3" "${P50[m_mcp_off,1]}" "${P50[c_toolgate_off,1]}" c 'x <= y + 0.3'
		budget "p50 ms, MCP upstream, Tools API, 1 conn: t ≤ p + 0.5" "${P50[t_upstream_off,1]}" "${P50[p_mcp_upstream,1]}" p 'x <= y + 0.5'
		budget "p50 ms, MCP upstream, MCP in and out, 1 conn: v ≤ p + 0.5" "${P50[v_upstream_mcp_off,1]}" "${P50[p_mcp_upstream,1]}" p 'x <= y + 0.5'
	fi
} | write_section "$OUT" "# Load harness results"
echo
cat "$OUT"
