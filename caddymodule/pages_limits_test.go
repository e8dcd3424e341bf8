package caddymodule

import (
	"fmt"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/toolgate/toolgate/internal/apitest"
)

func TestPagesLimitsLoadErrors(t *testing.T) {
	for _, c := range []struct{ name, sub, want string }{
		{"zero", "max_pending 0", "bad max_pending 0: want a positive integer"},
		{"negative", "max_pending_per_thread -1", "bad max_pending_per_thread -1: want a positive integer"},
		{"not a number", "max_streams_per_token many", "bad max_streams_per_token many: want a positive integer"},
		{"no value", "max_pending", "wrong argument count"},
		{"per user zero", "max_pending_per_user 0", "bad max_pending_per_user 0: want a positive integer"},
		{"per thread streams", "max_streams_per_thread -2", "bad max_streams_per_thread -2: want a positive integer"},
		{"streams", "max_streams x", "bad max_streams x: want a positive integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	toolgate {
		pages {
			secret ` + apitest.PageSecret + `
			` + c.sub + `
		}
	}
}`
			caddytest.AssertLoadError(t, cfg, "caddyfile", c.want)
		})
	}
	t.Run("negative in JSON", func(t *testing.T) {
		cfg := fmt.Sprintf(`{"admin":{"listen":"localhost:2999"},"storage":{"module":"file_system","root":%q},
"apps":{"http":{"grace_period":1,"servers":{"s":{"listen":["127.0.0.1:9080"],"routes":[{"handle":[
{"handler":"toolgate","pages":{"secret":%q,"max_pending":-1}}]}]}}}}}`, dataDir(t), apitest.PageSecret)
		caddytest.AssertLoadError(t, cfg, "json", "pages: max_pending must not be negative")
	})
	t.Run("negative max_streams in JSON", func(t *testing.T) {
		cfg := fmt.Sprintf(`{"admin":{"listen":"localhost:2999"},"storage":{"module":"file_system","root":%q},
"apps":{"http":{"grace_period":1,"servers":{"s":{"listen":["127.0.0.1:9080"],"routes":[{"handle":[
{"handler":"toolgate","pages":{"secret":%q,"max_streams":-1}}]}]}}}}}`, dataDir(t), apitest.PageSecret)
		caddytest.AssertLoadError(t, cfg, "json", "pages: max_streams must not be negative")
	})
}
