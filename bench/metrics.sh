#!/usr/bin/env bash
# The cost of metrics under load: two toolgate sites in one Caddy, the
# same tool on the same upstream, ledger off, one with metrics on and one
# with `metrics off`. wrk loads them in turn, ROUNDS rounds of DURATION
# each, so that drift in the machine falls on both alike; the figure is
# on/off, the ratio of their mean req/s (DESIGN.md "Performance": metrics
# and logs on cost at most 3% of throughput).
#
#   bench/metrics.sh                     # 6 rounds of 5 s at 32 conns
#   LOG_LEVEL=INFO bench/metrics.sh      # both sites write the call line
#
# Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-6}
CONNS=${CONNS:-32}

. bench/lib.sh
build
command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
start_upstream
cat >"$work/Caddyfile" <<EOF
$(globals)
http://127.0.0.1:9812 {
	bind 127.0.0.1
$(tool off)
}
http://127.0.0.1:9815 {
	bind 127.0.0.1
$(METRICS=off tool off)
}
EOF
start_toolgate "http://127.0.0.1:9812/tools"

declare -A RPS
for r in $(seq "$ROUNDS"); do
	for site in on:9812 off:9815; do
		name=${site%%:*}
		out=$(wrk -t2 -c"$CONNS" -d"$DURATION" -s "$work/post.lua" "http://127.0.0.1:${site#*:}/tools/get_item")
		RPS[$name,$r]=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
		errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
		[[ -z $errs ]] || echo "bench: $name: $errs" >&2
		printf 'round %s  metrics %-3s %8s req/s\n' "$r" "$name" "${RPS[$name,$r]}"
	done
done
mean() { awk '{ s += $1; n++ } END { printf "%.0f", s / n }'; }
on=$(for r in $(seq "$ROUNDS"); do echo "${RPS[on,$r]}"; done | mean)
off=$(for r in $(seq "$ROUNDS"); do echo "${RPS[off,$r]}"; done | mean)
echo "metrics on $on req/s, off $off req/s, on/off $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')" \
	"(LOG_LEVEL=${LOG_LEVEL:-ERROR} DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS, $(nproc) cores)"
