#!/usr/bin/env bash
# Quick start: build the example components (bookmarks in Go, notes in
# TypeScript) and toolgate, start the components in the background, and run
# toolgate in the foreground with Caddyfile.example. Run from the repository
# root (Go 1.26, Node.js 22 LTS (or 20) and npm on the machine):
#
#   examples/quickstart.sh
#
# Ports come from these variables (the defaults in brackets), which
# Caddyfile.example reads too:
#
#   TOOLGATE_PORT        the site: toolgate, the pages, the playground [8080]
#   TOOLGATE_ADMIN_PORT  Caddy's admin API, on localhost [2019]
#   BOOKMARKS_PORT       the bookmarks component (Go) [9001]
#   NOTES_PORT           the notes component (TypeScript) [9002]
#   CONTACTS_PORT        the contacts MCP server (TypeScript) [9003]
#
#   TOOLGATE_PORT=8180 TOOLGATE_ADMIN_PORT=2119 examples/quickstart.sh
#
# Stop with Ctrl-C; the components are stopped with it.
set -euo pipefail

cd "$(dirname "$0")/.."

# Binaries go to a temporary directory, removed on exit; Go's build cache
# keeps rebuilding them cheap.
bin=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-quickstart.XXXXXX")

component_pid=
notes_pid=
contacts_pid=
toolgate_pid=
cleanup() {
	for pid in $toolgate_pid $contacts_pid $notes_pid $component_pid; do
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$bin"
}
trap cleanup EXIT
# A signal ends the script, and so runs the EXIT trap that stops both
# processes, whether it reached this script alone or the whole terminal.
trap 'exit 130' INT
trap 'exit 143' TERM

# A second quick start would bind the same ports beside the first (Caddy
# and Go listen with SO_REUSEPORT) and answer every few requests with a
# 503: refuse at once, naming what is there, and change nothing.
export TOOLGATE_PORT=${TOOLGATE_PORT:-8080} TOOLGATE_ADMIN_PORT=${TOOLGATE_ADMIN_PORT:-2019}
export BOOKMARKS_PORT=${BOOKMARKS_PORT:-9001} NOTES_PORT=${NOTES_PORT:-9002} CONTACTS_PORT=${CONTACTS_PORT:-9003}
site=http://127.0.0.1:$TOOLGATE_PORT
for var in TOOLGATE_PORT TOOLGATE_ADMIN_PORT BOOKMARKS_PORT NOTES_PORT CONTACTS_PORT; do
	port=${!var}
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		holder=
		if command -v ss >/dev/null; then
			holder=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -1 |
				sed 's/users:(("\([^"]*\)",pid=\([0-9]*\)/ by \1 (pid \2)/')
		fi
		echo "quickstart: port $port ($var) is already in use$holder: another quick start, or Caddy?" >&2
		echo "Stop it first (Ctrl-C in its terminal), or choose other ports: $var=<port> examples/quickstart.sh" >&2
		exit 1
	fi
done

# The page secret signs the page tokens the component mints for toolgate.
# Without one, each run makes its own: the example's fallback secret is
# public. Both processes read it from the environment (not a flag, which
# any user could read in the process list).
if [[ -z "${TOOLGATE_PAGE_SECRET:-}" ]]; then
	TOOLGATE_PAGE_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
fi
export TOOLGATE_PAGE_SECRET

# step N TEXT: says which of the steps is running.
steps=5
step() { echo "[$1/$steps] $2"; }

# build NAME PACKAGE: go build into $bin, counting the packages it compiles
# (a first build of toolgate compiles Caddy and its dependencies, some 500
# packages: a few minutes on two cores; later builds come from Go's cache
# and take seconds).
build() {
	local total done=0 line
	total=$(go list -deps "$2" | wc -l)
	while IFS= read -r line; do
		case $line in
		# go build -v names each package as it compiles it; anything
		# else is an error, said as it is.
		*" "* | *:*) echo "$line" >&2 ;;
		*)
			done=$((done + 1))
			if [[ -t 1 ]]; then
				printf '\r      %s: %d of at most %d packages compiled' "$1" "$done" "$total"
			elif ((done % 50 == 0)); then
				echo "      $1: $done of at most $total packages compiled"
			fi
			;;
		esac
	done < <(go build -v -o "$bin/$1" "$2" 2>&1)
	if [[ -t 1 ]] && ((done > 0)); then echo; fi
	[[ -x $bin/$1 ]] || { echo "quickstart: building $1 failed" >&2; exit 1; }
}

step 1 "building the bookmarks component (Go) into $bin ..."
build bookmarks ./examples/bookmarks
step 2 "building toolgate (Caddy with the module; the first build takes a few minutes) ..."
build toolgate ./cmd/toolgate

# The notes component and the compiler toolgate runs for
# `manifest examples/notes/tools.ts` come from the npm workspace at the
# repository root: installed (npm ci) when missing or older than
# package-lock.json, then built from TypeScript.
if [[ ! -x node_modules/.bin/toolgate-tools || package-lock.json -nt node_modules/.package-lock.json ]]; then
	step 3 "installing the npm workspace (npm ci) ..."
	npm ci --no-audit --no-fund
else
	step 3 "the npm workspace is installed"
fi
# The contacts MCP server's own packages (the official TypeScript MCP SDK).
if [[ ! -d examples/mcp/node_modules/@modelcontextprotocol/sdk || examples/mcp/package-lock.json -nt examples/mcp/node_modules/.package-lock.json ]]; then
	(cd examples/mcp && npm ci --no-audit --no-fund)
fi
step 4 "building the notes component (TypeScript) and the lesson page (React) ..."
npm run --silent build -w @toolgate/kit -w examples/notes
npm run --silent build -w examples/lesson

# wait_for NAME PID ADDR: until the component answers GET /ping on ADDR.
wait_for() {
	echo "waiting for the $1 component on $3 ..."
	local tries=50
	until curl -fsS -o /dev/null "http://$3/ping" 2>/dev/null; do
		if ! kill -0 "$2" 2>/dev/null; then
			echo "the $1 component exited; is $3 already in use?" >&2
			exit 1
		fi
		if ((--tries == 0)); then
			echo "the $1 component did not answer on $3 within 5s" >&2
			exit 1
		fi
		sleep 0.1
	done
}

step 5 "starting the components, then toolgate ..."
jwks=$site/toolgate/.well-known/jwks.json
"$bin/bookmarks" -addr "127.0.0.1:$BOOKMARKS_PORT" -public "$site/app" -jwks "$jwks" -toolgate "$site/toolgate" &
component_pid=$!
node examples/notes/dist/src/main.js --addr "127.0.0.1:$NOTES_PORT" --jwks "$jwks" &
notes_pid=$!
# The contacts MCP server (examples/mcp), which toolgate puts behind
# itself (mcp_server contacts in Caddyfile.example): it verifies the
# identity tokens toolgate sends it against toolgate's JWKS.
TOOLGATE_JWKS_URL=$jwks TOOLGATE_AUDIENCE=contacts node examples/mcp/contacts-server.mjs --http "$CONTACTS_PORT" &
contacts_pid=$!
wait_for bookmarks "$component_pid" "127.0.0.1:$BOOKMARKS_PORT"
wait_for notes "$notes_pid" "127.0.0.1:$NOTES_PORT"
echo "waiting for the contacts MCP server on 127.0.0.1:$CONTACTS_PORT ..."
for ((tries = 50; ; tries--)); do
	# Any HTTP answer will do: the server is up.
	[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$CONTACTS_PORT/mcp" 2>/dev/null) != 000 ]] && break
	if ! kill -0 "$contacts_pid" 2>/dev/null || ((tries == 0)); then
		echo "the contacts MCP server did not start on 127.0.0.1:$CONTACTS_PORT" >&2
		exit 1
	fi
	sleep 0.1
done

sed -e "s|http://127.0.0.1:8080|$site|g" -e "s|127.0.0.1:9002|127.0.0.1:$NOTES_PORT|g" <<'EOF'

toolgate is starting on http://127.0.0.1:8080. Open the playground, where
every tool can be run and every card seen (set "Thread id" to th_1 for the
cards that pause a conversation, and "Device" to the computerId you give
open_on_device to press its buttons):

  http://127.0.0.1:8080/toolgate/playground

Each example page has its own thread and answers only its own client
tools. The bookmarks page (read_draft, a plain page):

  http://127.0.0.1:8080/app/page?thread=th_1

The React lesson page (examples/lesson; read_playback_progress, from a hook):

  http://127.0.0.1:8080/lesson/?thread=th_lesson

In another terminal, try:

  curl -s http://127.0.0.1:8080/toolgate/tools
  curl -s http://127.0.0.1:8080/toolgate/tools/save_bookmark -H 'Content-Type: application/json' -d '{"input":{"url":"https://go.dev","title":"Go"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/show_bookmark -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/whoami -H 'Content-Type: application/json' -d '{"input":{},"context":{"source":"thread","threadId":"th_1"},"identity":{"user":"u_1","install":"in_1"}}'

A tool that acts on the user's own account at another service: demo_account,
run in the playground with a thread id, answers "Connect Demo account"; its
button opens the example's demo sign-in page, and once you allow it the call
goes on by itself (docs/connections.md).

A tool that asks the user first: clear_bookmarks, called from a conversation,
answers a card and the call pauses; resuming it with a button finishes it.
Calls are recorded in Caddy's data directory and kept a day, so use a new
callId each time (the same one returns the recorded answer):

  curl -s http://127.0.0.1:8080/toolgate/tools/clear_bookmarks -H 'Content-Type: application/json' -d '{"input":{},"callId":"clear_1","context":{"source":"thread","threadId":"th_1"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s 'http://127.0.0.1:8080/toolgate/calls/clear_1?user=u_1&install=in_1'
  curl -s http://127.0.0.1:8080/toolgate/calls/clear_1/resume -H 'Content-Type: application/json' -d '{"buttonId":"delete","identity":{"user":"u_1","install":"in_1"}}'

The notes tools come from examples/notes/tools.ts, which toolgate compiles
when it loads, and run on the TypeScript component on 127.0.0.1:9002:

  curl -s http://127.0.0.1:8080/toolgate/tools/add_note -H 'Content-Type: application/json' -d '{"input":{"text":"Buy milk","tags":["home"]},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/export_notes -H 'Content-Type: application/json' -d '{"input":{},"identity":{"user":"u_1","install":"in_1"}}'

The crm_ tools are those of an MCP server (examples/mcp/contacts-server.mjs,
the official TypeScript SDK) that toolgate puts behind itself; crm_whoami says
who toolgate told it the user is, in a token it verified:

  curl -s http://127.0.0.1:8080/toolgate/tools/crm_search_contacts -H 'Content-Type: application/json' -d '{"input":{"query":"ada"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/crm_whoami -H 'Content-Type: application/json' -d '{"input":{},"identity":{"user":"u_1","install":"in_1"}}'

EOF
# The reload line names the ports this run changed: the reload command
# adapts Caddyfile.example again, in the other terminal.
ports=
for var in TOOLGATE_PORT TOOLGATE_ADMIN_PORT BOOKMARKS_PORT NOTES_PORT CONTACTS_PORT; do
	[[ ${!var} != "$(sed -n "s/.*{\$$var:\([0-9]*\)}.*/\1/p" Caddyfile.example | head -1)" ]] && ports+="$var=${!var} "
done
cat <<EOF
After editing Caddyfile.example, load it into the running toolgate. The page
secret is read from toolgate's own environment when the config loads, so it
stays the same (never put the secret itself in the Caddyfile):

  ${ports}go run ./cmd/toolgate reload --config Caddyfile.example --adapter caddyfile

EOF

# Not exec: the EXIT trap must survive to stop the components. toolgate runs
# as a child the script waits for (its output still goes to this terminal),
# so a signal to the script alone is handled at once, not after toolgate
# happens to exit.
"$bin/toolgate" run --config Caddyfile.example --adapter caddyfile &
toolgate_pid=$!
wait "$toolgate_pid"
