# Shared by bench/run.sh and bench/soak.sh (sourced, from the repository
# root): a work folder removed on exit, the built binaries, the fixed
# upstream, toolgate's site blocks and the wrk request.

UP=127.0.0.1:9801
work=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# build builds toolgate, the upstream and faults.sh's checker into $work.
build() {
	go build -o "$work/toolgate" ./cmd/toolgate
	go build -o "$work/upstream" ./bench/upstream
	go build -o "$work/faultcheck" ./bench/faultcheck
}

# start_upstream runs the fixed upstream on $UP, with any flags given
# (fault mode: see bench/upstream).
start_upstream() {
	"$work/upstream" -addr "$UP" "$@" >"$work/upstream.log" 2>&1 &
	up=$!
	pids+=($up)
}

# globals prints the Caddyfile's global options: admin (for pprof and
# expvar) on 127.0.0.1:9819, storage in $work, error logs only.
globals() {
	cat <<EOF
{
	admin 127.0.0.1:9819
	storage file_system $work/storage
	log {
		level ${LOG_LEVEL:-ERROR}
	}
}
EOF
}

# tool LEDGER prints a toolgate block with one app tool on the upstream.
tool() {
	cat <<EOF
		toolgate {
			component api http://$UP
			ledger $1
$([[ ${METRICS:-on} == off ]] && printf '\t\t\tmetrics off' || true)
			tool get_item {
				description "Get an item."
				input_schema \`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}\`
				target app api GET /items/\${input.id}
			}
		}
EOF
}

# start_toolgate runs toolgate with $work/Caddyfile and waits until the URL
# answers; its pid is in $tg.
start_toolgate() {
	XDG_DATA_HOME=$work XDG_CONFIG_HOME=$work "$work/toolgate" run --config "$work/Caddyfile" --adapter caddyfile >"$work/toolgate.log" 2>&1 &
	tg=$!
	pids+=($tg)
	for _ in $(seq 100); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return
		sleep 0.1
	done
	echo "bench: toolgate did not answer $1:" >&2
	cat "$work/toolgate.log" >&2
	exit 1
}

# cputicks PID prints the CPU time the process has used, user and system,
# in clock ticks (getconf CLK_TCK a second).
cputicks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# The invoke every toolgate run sends.
cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}'
wrk.headers["Content-Type"] = "application/json"
EOF
