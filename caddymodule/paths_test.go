package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// pathsConfig serves two tools whose path holds an input reference: an
// app path and a url's path.
func pathsConfig(t *testing.T, upstream string) string {
	schema := "`" + `{"type":"object","properties":{"id":{}},"required":["id"]}` + "`"
	return testGlobals(dataDir(t)) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[1]s
			ledger off
			tool app_item {
				description "Get an item."
				input_schema %[2]s
				target app api GET /items/${input.id}/view
			}
			tool url_item {
				description "Get a user."
				input_schema %[2]s
				target url GET %[1]s/users/${input.id}.json?full=1
			}
		}
	}
}
`, upstream, schema)
}

// TestPathReferenceStaysInSegment is issue 12 rule 4 end to end: each
// value a server could read as a separator or a dot segment ends the call
// as an error result that names the rule and the reference, and the
// upstream sees no request at all.
func TestPathReferenceStaysInSegment(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "reached "+r.URL.EscapedPath())
	}))
	t.Cleanup(upstream.Close)
	tc := caddytest.NewTester(t)
	tc.InitServer(pathsConfig(t, upstream.URL), "caddyfile")

	call := func(t *testing.T, tool string, id any) answer {
		t.Helper()
		body, err := json.Marshal(map[string]any{"input": map[string]any{"id": id}, "identity": map[string]string{"user": "u_1", "install": "in_1"}})
		if err != nil {
			t.Fatal(err)
		}
		status, a := invoke(t, tc, tool, string(body))
		if status != http.StatusOK || a.Status != "done" {
			t.Fatalf("%s: answer %d %+v", tool, status, a)
		}
		return a
	}

	// The upstream is reachable: a plain value goes through, so the zero
	// counts below mean refused, not lost.
	for _, tool := range []string{"app_item", "url_item"} {
		if a := call(t, tool, "a..b c"); a.IsError || !strings.Contains(a.Content, "reached /") {
			t.Fatalf("%s with a plain id: %+v", tool, a)
		}
	}
	if hits.Load() != 2 {
		t.Fatalf("upstream saw %d requests for two plain calls", hits.Load())
	}
	hits.Store(0)

	hostile := []any{
		"", " ", ".", "..", "...", "..;x",
		"/", "../admin", "a/b", `\`, `..\..\x`,
		"a\x00b", "a\nb", "\r\n", "\x7f",
		"%2f", "%2F", "%5c", "%5C", "%2e", "%2E", "%2e%2e", "%2E%2e", ".%2e", "%2E.",
		"%00", "%0a", "%252f", "%252E%252e", "%u002f", "%c0%af",
		"\uff0f", "\u2025",
		map[string]any{"a": "b/c"}, []any{"x", "../y"},
	}
	for _, tool := range []string{"app_item", "url_item"} {
		for _, v := range hostile {
			t.Run(fmt.Sprintf("%s/%q", tool, v), func(t *testing.T) {
				a := call(t, tool, v)
				if !a.IsError {
					t.Fatalf("not an error result: %+v", a)
				}
				for _, want := range []string{"reference ${input.id}", "a path reference must stay in its segment"} {
					if !strings.Contains(a.Content, want) {
						t.Errorf("content %q does not say %q", a.Content, want)
					}
				}
			})
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("upstream saw %d requests for refused values, want 0", n)
	}

}

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
