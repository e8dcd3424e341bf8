#!/usr/bin/env bash
# Quick start: build the bookmarks example component and toolgate, start the
# component in the background, and run toolgate in the foreground with
# Caddyfile.example. Run from the repository root:
#
#   examples/quickstart.sh
#
# Stop with Ctrl-C; the component is stopped with it.
set -euo pipefail

cd "$(dirname "$0")/.."

# Binaries go to a temporary directory, removed on exit; Go's build cache
# keeps rebuilding them cheap.
bin=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-quickstart.XXXXXX")

component_pid=
toolgate_pid=
cleanup() {
	for pid in $toolgate_pid $component_pid; do
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

# The page secret signs the page tokens the component mints for toolgate.
# Without one, each run makes its own: the example's fallback secret is
# public. Both processes read it from the environment (not a flag, which
# any user could read in the process list).
if [[ -z "${TOOLGATE_PAGE_SECRET:-}" ]]; then
	TOOLGATE_PAGE_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
fi
export TOOLGATE_PAGE_SECRET

echo "building the bookmarks component and toolgate into $bin ..."
go build -o "$bin/bookmarks" ./examples/bookmarks
go build -o "$bin/toolgate" ./cmd/toolgate

"$bin/bookmarks" -addr 127.0.0.1:9001 -public http://127.0.0.1:8080/app &
component_pid=$!

echo "waiting for the component on 127.0.0.1:9001 ..."
tries=50
until curl -fsS -o /dev/null http://127.0.0.1:9001/ping 2>/dev/null; do
	if ! kill -0 "$component_pid" 2>/dev/null; then
		echo "the bookmarks component exited; is 127.0.0.1:9001 already in use?" >&2
		exit 1
	fi
	if ((--tries == 0)); then
		echo "the bookmarks component did not answer on 127.0.0.1:9001 within 5s" >&2
		exit 1
	fi
	sleep 0.1
done

cat <<'EOF'

toolgate is starting on http://127.0.0.1:8080. Open the playground, where
every tool can be run and every card seen (set "Thread id" to th_1 for the
cards that pause a conversation, and "Device" to the computerId you give
open_on_device to press its buttons):

  http://127.0.0.1:8080/toolgate/playground

In another terminal, try:

  curl -s http://127.0.0.1:8080/toolgate/tools
  curl -s http://127.0.0.1:8080/toolgate/tools/save_bookmark -H 'Content-Type: application/json' -d '{"input":{"url":"https://go.dev","title":"Go"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/show_bookmark -H 'Content-Type: application/json' -d '{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s http://127.0.0.1:8080/toolgate/tools/whoami -H 'Content-Type: application/json' -d '{"input":{},"context":{"source":"thread","threadId":"th_1"},"identity":{"user":"u_1","install":"in_1"}}'

A tool that asks the user first: clear_bookmarks, called from a conversation,
answers a card and the call pauses; resuming it with a button finishes it.
Calls are recorded in Caddy's data directory and kept a day, so use a new
callId each time (the same one returns the recorded answer):

  curl -s http://127.0.0.1:8080/toolgate/tools/clear_bookmarks -H 'Content-Type: application/json' -d '{"input":{},"callId":"clear_1","context":{"source":"thread","threadId":"th_1"},"identity":{"user":"u_1","install":"in_1"}}'
  curl -s 'http://127.0.0.1:8080/toolgate/calls/clear_1?user=u_1&install=in_1'
  curl -s http://127.0.0.1:8080/toolgate/calls/clear_1/resume -H 'Content-Type: application/json' -d '{"buttonId":"delete","identity":{"user":"u_1","install":"in_1"}}'

EOF

# Not exec: the EXIT trap must survive to stop the component. toolgate runs
# as a child the script waits for (its output still goes to this terminal),
# so a signal to the script alone is handled at once, not after toolgate
# happens to exit.
"$bin/toolgate" run --config Caddyfile.example --adapter caddyfile &
toolgate_pid=$!
wait "$toolgate_pid"
