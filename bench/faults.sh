#!/usr/bin/env bash
# Load with faults: toolgate with the bbolt ledger under wrk while the
# upstream fails a fraction of its answers: FAIL answers 500, HANG holds the
# request past toolgate's upstream_timeout, CUT reads it and closes the
# connection without a word (1% in all by default). Every request carries a
# call id of its own. When the load ends and the calls still in flight have
# had their upstream_timeout, bench/faultcheck reads each id's record in the
# ledger and the upstream's executions per id (its Idempotency-Key): no call
# may run twice, and none may be lost (sent and run, but not recorded, or
# still in flight). Writes its figures to bench/FAULTS.md; exits 1 when a
# call ran twice or was lost.
#
#   bench/faults.sh                        # 60 s at 32 connections
#   DURATION=10s CONNS=64 FAIL=0.02 bench/faults.sh
#   BUILD_ONLY=1 bench/faults.sh           # build and check the harness (CI)
#
# Needs wrk (Debian package). Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-60s}
CONNS=${CONNS:-32}
FAIL=${FAIL:-0.005}
HANG=${HANG:-0.003}
CUT=${CUT:-0.002}
TIMEOUT=${TIMEOUT:-1} # toolgate's upstream_timeout, in seconds
OUT=${OUT:-bench/FAULTS.md}

. bench/lib.sh
build
if [[ -n ${BUILD_ONLY:-} ]]; then
	echo "bench: built toolgate, the upstream and faultcheck"
	exit 0
fi
command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 1; }

start_upstream -fail "$FAIL" -hang "$HANG" -cut "$CUT" -hang-for "$((TIMEOUT * 10))s"
cat >"$work/Caddyfile" <<CADDY
$(globals)
http://127.0.0.1:9813 {
	bind 127.0.0.1
$(tool "bolt $work/ledger.db
			upstream_timeout ${TIMEOUT}s")
}
CADDY
start_toolgate http://127.0.0.1:9813/tools
for _ in $(seq 100); do
	curl -fsS -o /dev/null "http://$UP/_counts" 2>/dev/null && break
	sleep 0.1
done

# Each wrk thread numbers its calls: flt_<thread>_<n>. done() prints how
# many each sent and the answers by status ("200 error" for an error result).
cat >"$work/faults.lua" <<'LUA'
local threads = {}
function setup(thread)
	table.insert(threads, thread)
	thread:set("tid", #threads)
end
function init(args)
	n = 0
	answers = {}
end
function request()
	n = n + 1
	local body = string.format('{"input":{"id":"b1"},"callId":"flt_%d_%d","identity":{"user":"u_1","install":"in_1"}}', tid, n)
	return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
function response(status, headers, body)
	local key = tostring(status)
	if status == 200 and body:find('"isError":true', 1, true) then
		key = "200 error"
	end
	answers[key] = (answers[key] or 0) + 1
end
function done(summary, latency, requests)
	for _, t in ipairs(threads) do
		io.write(string.format("sent %d %d\n", t:get("tid"), t:get("n")))
		for k, v in pairs(t:get("answers")) do
			io.write(string.format("answer %s %d\n", k:gsub(" ", "_"), v))
		end
	end
end
LUA
echo "bench: wrk -c$CONNS -d$DURATION with faults: $FAIL fail, $HANG hang, $CUT cut"
wrk -t2 -c"$CONNS" -d"$DURATION" -s "$work/faults.lua" http://127.0.0.1:9813/tools/get_item >"$work/wrk.out"
cat "$work/wrk.out"
# A call sent before the end ends within upstream_timeout.
sleep $((TIMEOUT + 2))

sent=$(awk '/^sent / { printf "%sflt_%s_:%s", sep, $2, $3; sep = "," }' "$work/wrk.out")
status=0
"$work/faultcheck" -gateway http://127.0.0.1:9813 -upstream "http://$UP" -sent "$sent" >"$work/check.md" || status=$?
answers=$(awk '/^answer / { sub(/_/, " ", $2); a[$2] += $3 } END { for (k in a) printf "| answers %s | %d |\n", k, a[k] }' "$work/wrk.out" | sort)
rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$work/wrk.out")
requests=$(awk '/requests in/ { print $1 }' "$work/wrk.out")
{
	echo "# Load with faults"
	echo
	echo "Command: \`DURATION=$DURATION CONNS=$CONNS FAIL=$FAIL HANG=$HANG CUT=$CUT TIMEOUT=$TIMEOUT bench/faults.sh\` on $(date -u +%Y-%m-%d),"
	echo "$(nproc) cores, $(go version | cut -d' ' -f3): toolgate with the bbolt ledger and \`upstream_timeout ${TIMEOUT}s\`, wrk at $CONNS"
	echo "connections for $DURATION, every request with a call id of its own. The upstream answers 500 to"
	echo "$FAIL of requests, holds $HANG past the timeout, and closes the connection without an answer on $CUT."
	echo "After the load and ${TIMEOUT}s for the calls in flight, every id sent is read back from the ledger"
	echo "(\`GET /calls/{id}\`) and the upstream's executions are counted per id (its Idempotency-Key)."
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| answers received (wrk) | $requests ($rps req/s) |"
	echo "$answers"
	cat "$work/check.md"
	echo
	if ((status == 0)); then
		echo "No call ran twice, none was lost."
	else
		echo "**FAILED: a call ran twice or was lost.**"
	fi
} >"$OUT"
cat "$OUT"
exit "$status"
