# The checks CI runs (.ci/run calls `make test`). `make tools` installs
# xcaddy (go install) and, as root on Debian, redis-server. Fuzz targets run for
# FUZZTIME each; run them longer by hand: make fuzz FUZZTIME=10m
GOBIN := $(shell go env GOPATH)/bin
export PATH := $(PATH):$(GOBIN)
FUZZTIME ?= 5s
FUZZ := \
	./internal/refs:FuzzParse \
	./internal/refs:FuzzResolveOnePass \
	./internal/result:FuzzNormalize

.PHONY: test check unit fuzz tools build

test: check unit fuzz

tools:
	@command -v xcaddy >/dev/null || go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } || \
		echo "redis-server is not installed: the Redis ledger tests will be skipped"

check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

unit: tools
	go test -race -timeout 20m ./...

fuzz:
	@set -e; for f in $(FUZZ); do \
		pkg=$${f%%:*}; name=$${f##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

build:
	go build -o toolgate ./cmd/toolgate
