package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

// BenchmarkInvoke is one call of an app tool through Invoke, without the
// HTTP front end: input decoded and validated, the request built with a
// signed identity token, sent on loopback to a 1 KiB answer, normalized.
// The ledger is off, as in caddymodule's BenchmarkInvoke.
func BenchmarkInvoke(b *testing.B) {
	body := `{"content":"` + strings.Repeat("x", 1024-len(`{"content":""}`)) + `"}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(up.Close)
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	tools := []manifest.Tool{{
		Name: "get_item", Description: "Get an item.",
		InputSchema: []byte(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
		Target:      dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}"},
	}}
	set, err := manifest.Compile([]manifest.Source{{Name: "bench", Tools: tools}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		b.Fatal(err)
	}
	key, _ := identity.GenerateKey()
	gw := New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20)})
	b.Cleanup(func() { _ = gw.Close() })
	call := Call{Tool: "get_item", Input: []byte(`{"id":"b1"}`), Identity: Identity{User: "u_1", Install: "in_1"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		a, err := gw.Invoke(ctx, call)
		if err != nil || a.IsError {
			b.Fatalf("Invoke = %+v, %v", a, err)
		}
	}
}
