# The checks CI runs (.ci/run calls `make test`). `make tools` installs
# xcaddy (go install) and, as root on Debian, redis-server and chromium. Fuzz targets run for
# FUZZTIME each; run them longer by hand: make fuzz FUZZTIME=10m
GOBIN := $(shell go env GOPATH)/bin
export PATH := $(PATH):$(GOBIN)
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with
# a bare "context deadline exceeded" when a -fuzztime duration runs out
# (go.dev/issue/75804, fixed in Go 1.27); a count sets no deadline.
FUZZTIME ?= 10000x
FUZZ := \
	./internal/refs:FuzzParse \
	./internal/refs:FuzzResolveOnePass \
	./internal/result:FuzzNormalize \
	./internal/result:FuzzParseCard \
	./internal/gateway:FuzzDecodeInput \
	./internal/gateway:FuzzCheckCard \
	./internal/gateway:FuzzAnswerJSON \
	./internal/dispatch:FuzzCompile \
	./internal/manifest:FuzzManifest \
	./internal/ledger:FuzzReadJournal \
	./internal/ledger:FuzzInputDigest \
	./internal/pagecontext:FuzzRender \
	./internal/mcp:FuzzDecodeCall \
	./internal/mcp:FuzzDecodeCallMaps \
	./internal/mcp:FuzzAppendEvent \
	./internal/dispatch:FuzzEncode \
	./internal/quota:FuzzParse \
	./internal/audit:FuzzVerify \
	./internal/connect:FuzzOpen

.PHONY: test check unit js kit notes ai-sdk react browser browser-deps mcp packages install-test bench-build faults fuzz tools build npm

test: check unit js kit notes ai-sdk react browser mcp packages install-test bench-build faults fuzz

tools:
	@command -v xcaddy >/dev/null || go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5
	@for pkg in redis-server chromium wrk; do \
		command -v $$pkg >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg; } || \
			echo "$$pkg is not installed and could not be: tests that need it will fail or skip"; \
	done

check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

# The root npm workspace (packages/*, the examples in TypeScript): the
# TypeScript kit and its compiler, which the Go tests of `manifest tools.ts`
# run for real, and the React bindings.
npm:
	npm ci --no-audit --no-fund

unit: tools npm mcp-deps
	go test -race -timeout 20m ./...

# The browser client's own rules, in Node's test runner; the card's and
# the playground's DOM tests take jsdom from the root npm workspace.
js: npm
	cd internal/web && node --test

# The notes component in TypeScript: its routes, and behind a real toolgate
# that compiles its tools.ts.
notes: npm
	npm test -w examples/notes

# The AI SDK example (examples/ai-sdk) run against a real toolgate and the
# bookmarks component (it builds both).
ai-sdk: npm
	npm test -w examples/ai-sdk

# The React bindings (Vitest in jsdom), and the lesson page the browser
# tests open, built with Vite.
react: npm
	npm test -w @toolgate/react
	npm run build -w examples/lesson

# The example pages, <toolgate-card> and the playground in headless
# Chromium (Debian's chromium, playwright-core).
browser: tools react browser-deps
	cd examples/browser && node --test

# playwright-core and the MCP client for the browser tests.
browser-deps:
	cd examples/browser && npm ci --no-audit --no-fund

# MCP with the official TypeScript SDK client.
# examples/mcp's own packages (the official TypeScript MCP SDK): its tests
# use them, and so does the Go test that puts its contacts server behind
# the gateway.
mcp-deps:
	cd examples/mcp && npm ci --no-audit --no-fund

mcp: mcp-deps
	cd examples/mcp && node --test

# The npm tarballs of @toolgate/kit and @toolgate/react, in dist/npm/.
# dist/ of each package is removed first: npm pack's prepare script builds it.
packages: npm
	rm -rf dist/npm packages/kit/dist packages/react/dist
	mkdir -p dist/npm
	npm pack -w @toolgate/kit -w @toolgate/react --pack-destination dist/npm

# The tarballs installed from outside the checkout: a fresh Vite + React app
# in a temporary folder, toolgate-tools on its tools.ts, its page in headless
# Chromium (examples/install). The Go side (xcaddy, the binary run from a
# scratch folder) is in `unit`: TestXcaddyBuild, TestBinaryOutsideCheckout.
install-test: tools packages browser-deps
	node --test examples/install/

# The TypeScript kit: the compiler, toolContext, verifyIdentity, cards, and
# the parity of Zod and the gateway on the same inputs (it builds toolgate).
kit: npm
	npm test -w @toolgate/kit

# The load harness is run by hand (bench/run.sh, bench/scale.sh); CI only
# builds it.
bench-build:
	BUILD_ONLY=1 bench/run.sh
	BUILD_ONLY=1 bench/scale.sh
	BUILD_ONLY=1 bench/faults.sh

# Load with faults, short: 5 s of wrk while 1% of upstream answers fail,
# hang or are cut; it fails when a call ran twice or was lost (counted from
# the ledger). The 60 s run is by hand: bench/faults.sh.
faults: tools
	DURATION=5s OUT=$$(mktemp) bench/faults.sh

fuzz:
	@set -e; for f in $(FUZZ); do \
		pkg=$${f%%:*}; name=$${f##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

build:
	go build -o toolgate ./cmd/toolgate
