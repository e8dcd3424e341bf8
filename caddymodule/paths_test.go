package caddymodule

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestPathEnvValueAtLoad checks that an env value a path segment would
// refuse on every call is a config error, naming the tool and the
// reference but not the value, which may be secret.
func TestPathEnvValueAtLoad(t *testing.T) {
	cfg := testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	toolgate {
		component api http://127.0.0.1:1 {
			env SHARD s3cret/shard
		}
		ledger off
		tool env_item {
			description "Get from a shard."
			input_schema ` + "`" + `{"type":"object"}` + "`" + `
			target app api GET /shards/${env.SHARD}/items
		}
	}
}`
	caddytest.AssertLoadError(t, cfg, "caddyfile", `tool \"env_item\": target: app target: path \"/shards/${env.SHARD}/items\": reference ${env.SHARD}: a path segment value may not hold`)

	// The whole error, as the admin API answers it, keeps the value out.
	resp, err := http.Post("http://localhost:2999/load", "text/caddyfile", strings.NewReader(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "s3cret") {
		t.Errorf("load answered %d %s; want an error without the env value", resp.StatusCode, body)
	}
}
