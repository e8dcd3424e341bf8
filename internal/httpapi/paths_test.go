package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// TestPathReferenceStaysInSegment is the path segment rule (a value
// resolved into a path stays in its segment: docs/configuration.md,
// "References") end to end: each
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
	schema := jsontext.Value(`{"type":"object","properties":{"id":{}},"required":["id"]}`)
	s := startServer(t, options{
		sources: []manifest.Source{{Name: "inline tools", Tools: []manifest.Tool{
			{Name: "app_item", Description: "Get an item.", InputSchema: schema,
				Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}/view"}},
			{Name: "url_item", Description: "Get a user.", InputSchema: schema,
				Target: dispatch.Spec{Type: "url", Method: "GET", URL: upstream.URL + "/users/${input.id}.json?full=1"}},
		}}},
		components: map[string]*dispatch.Component{"api": component(t, "api", upstream.URL, nil)},
		ledger:     "off",
	})

	call := func(t *testing.T, tool string, id any) apitest.Answer {
		t.Helper()
		body, err := json.Marshal(map[string]any{"input": map[string]any{"id": id}, "identity": map[string]string{"user": "u_1", "install": "in_1"}})
		if err != nil {
			t.Fatal(err)
		}
		status, a := s.Invoke(t, tool, string(body))
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
