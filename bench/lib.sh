# Shared by bench/run.sh, bench/scale.sh and bench/soak.sh (sourced, from
# the repository root): a work folder removed on exit, the built binaries,
# the fixed upstream, toolgate's site blocks and the wrk request.

UP=127.0.0.1:9801
work=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# build builds toolgate, the upstream, the MCP upstream, the bare hop and
# faults.sh's checker into $work.
build() {
	go build -o "$work/toolgate" ./cmd/toolgate
	go build -o "$work/upstream" ./bench/upstream
	go build -o "$work/mcpupstream" ./bench/mcpupstream
	go build -o "$work/barehop" ./bench/barehop
	go build -o "$work/faultcheck" ./bench/faultcheck
}

# start_upstream runs the fixed upstream on $UP, with any flags given
# (fault mode: see bench/upstream).
start_upstream() {
	"$work/upstream" -addr "$UP" "$@" >"$work/upstream.log" 2>&1 &
	up=$!
	pids+=($up)
}

# wait_for URL waits until URL answers (a server just started).
wait_for() {
	for _ in $(seq 100); do
		curl -fsS -o /dev/null "$@" 2>/dev/null && return
		sleep 0.1
	done
	echo "bench: nothing answers $*" >&2
	exit 1
}

# globals [ADMIN [STORAGE [OPTION]]] prints the Caddyfile's global
# options: admin (for pprof and expvar) on ADMIN (default 127.0.0.1:9819),
# storage in STORAGE (default $work/storage), error logs only, and any
# further OPTION.
globals() {
	cat <<EOF
{
	admin ${1:-127.0.0.1:9819}
	storage file_system ${2:-$work/storage}
	log {
		level ${LOG_LEVEL:-ERROR}
	}
	${3:-}
}
EOF
}

# tool LEDGER [COMPONENT [LINES]] prints a toolgate block with one app
# tool on the upstream, at COMPONENT (default: http://$UP; unix//PATH for
# a socket), and LINES (more of the block, such as a callers block).
tool() {
	cat <<EOF
		toolgate {
			component api ${2:-http://$UP}
			ledger $1
${3:-}
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

# check CURL_ARGS... fails the run unless the target answers the
# upstream's tool result (through toolgate or not).
check() {
	local got
	got=$(curl -fsS "$@")
	[[ $got == *'"content":"xxx'* || $got == '{"content":"xxx'* ]] || { echo "bench: unexpected answer from $*: ${got:0:200}" >&2; exit 1; }
}

# ms converts wrk's latency (850.00us, 1.23ms, 1.02s) to milliseconds.
ms() {
	awk -v v="$1" 'BEGIN {
		if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
		else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
		else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
		else print v }'
}

# The invoke every toolgate run sends.
cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}'
wrk.headers["Content-Type"] = "application/json"
EOF

# caller_token SECRET prints an HS256 caller token for u_1 in in_1
# (issuer bench, audience toolgate, a day long), for a callers block with
# that secret.
caller_token() {
	local b64='openssl base64 -A | tr "+/" "-_" | tr -d "="' head body
	head=$(printf '{"alg":"HS256","typ":"JWT"}' | eval "$b64")
	body=$(printf '{"iss":"bench","aud":"toolgate","sub":"u_1","install":"in_1","exp":%d}' $(($(date +%s) + 86400)) | eval "$b64")
	printf '%s.%s.%s' "$head" "$body" "$(printf '%s.%s' "$head" "$body" | openssl dgst -sha256 -hmac "$1" -binary | eval "$b64")"
}

# write_section FILE HEADING puts stdin in FILE as the section that starts
# with the line HEADING: in place of the one already there (up to the next
# "# " or "## " heading), or at the end. Each script owns its section and
# leaves the others' as they are; a section's own subheadings are "### ".
write_section() {
	local file=$1 heading=$2
	cat >"$work/section.md"
	if [[ ! -s $file ]]; then
		cp "$work/section.md" "$file"
		return
	fi
	awk -v h="$heading" -v f="$work/section.md" '
		BEGIN { while ((getline l < f) > 0) buf = buf l "\n" }
		$0 == h { printf "%s", buf; skip = 1; done = 1; next }
		skip && /^##? / { skip = 0; print "" }
		!skip { print }
		END { if (!done) printf "\n%s", buf }' "$file" >"$work/results.md"
	cp "$work/results.md" "$file"
}
