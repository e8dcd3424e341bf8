package caddymodule

import (
	"context"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
)

// pooled finds the store in the pool whose bolt file is path: its
// references and its bridge (nil when there is none).
func pooled(t *testing.T, path string) (int, *clienttools.Bridge) {
	t.Helper()
	var key string
	var bridge *clienttools.Bridge
	// The key is the ledger config as JSON, which names the whole path
	// (quoted): a part of it, such as the temporary folder's "001", is
	// also in other tests' keys.
	quoted, _ := json.Marshal(path)
	stores.Range(func(k, v any) bool {
		if strings.Contains(k.(string), string(quoted)) {
			key, bridge = k.(string), v.(openStore).bridge
			return false
		}
		return true
	})
	if key == "" {
		return 0, nil
	}
	n, _ := stores.References(key)
	return n, bridge
}

// provisionedPages is a handler with one tool, a key, a bolt ledger at path
// and pages limited to maxPending calls, provisioned in a context of its
// own (as one config load is).
func provisionedPages(t *testing.T, path string, maxPending int, mcp *MCP) (*Handler, error) {
	t.Helper()
	h, ctx := provisionedPagesHandler(t, path, maxPending, mcp)
	return h, h.provision(ctx, zap.NewNop())
}

// provisionedPagesHandler is provisionedPages' handler and context, not
// provisioned yet.
func provisionedPagesHandler(t *testing.T, path string, maxPending int, mcp *MCP) (*Handler, caddy.Context) {
	t.Helper()
	h := &Handler{
		Identity: &Identity{KeyFile: writeKey(t)},
		Tools: []manifest.Tool{{
			Name: "ping", Description: "d", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: "http://127.0.0.1:1/ping"},
		}},
		Ledger: &Ledger{Path: path},
		Pages:  &Pages{Tokens: Tokens{Secret: apitest.PageSecret}, MaxPending: maxPending},
		MCP:    mcp,
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return h, ctx
}

// TestProvisionAllOrNothing loads a config that fails after its store is
// open beside one that serves: the failed one leaves no reference in the
// pool (its own bolt file is free again at once) and changes nothing the
// serving one uses — its store, its bridge, its page limits.
func TestProvisionAllOrNothing(t *testing.T) {
	goodPath := filepath.Join(t.TempDir(), "ledger.db")
	good, err := provisionedPages(t, goodPath, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Cleanup()
	n, bridge := pooled(t, goodPath)
	if n != 1 || bridge == nil {
		t.Fatalf("the serving config's store: %d references", n)
	}
	before := bridge.Limits()

	// httpapi.New refuses a negative session limit: the last step, after
	// the store is taken from the pool.
	bad := &MCP{MaxSessions: -1}
	check := func(t *testing.T, path string) {
		t.Helper()
		if path != goodPath {
			if n, _ := pooled(t, path); n != 0 {
				t.Errorf("the failed config's own store has %d references", n)
			}
			l, err := ledger.OpenBolt(path, ledger.BoltOptions{LockTimeout: 1})
			if err != nil {
				t.Fatalf("the failed config's bolt file is still held: %v", err)
			}
			_ = l.Close()
		}
		if n, b := pooled(t, goodPath); n != 1 || b != bridge {
			t.Errorf("the serving config's store: %d references, bridge %p (was %p); want 1, the same", n, b, bridge)
		}
		if got := bridge.Limits(); got != before {
			t.Errorf("the shared bridge's limits changed: %+v, were %+v", got, before)
		}
	}
	for _, c := range []struct{ name, path string }{
		{"same ledger", goodPath},
		{"a ledger of its own", filepath.Join(t.TempDir(), "ledger.db")},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := provisionedPages(t, c.path, 1, bad)
			if err == nil || !strings.Contains(err.Error(), "max_sessions") {
				t.Fatalf("provision = %v; want the session limit refused", err)
			}
			check(t, c.path)
			// Caddy cleans up a module whose Provision failed: that gives
			// back nothing more.
			if err := h.Cleanup(); err != nil {
				t.Fatal(err)
			}
			check(t, c.path)
		})
	}

	// The serving config still serves, on its own limits.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/tools", nil)
	r.RemoteAddr, r.Host = "127.0.0.1:4321", "localhost"
	if !good.api.Serve(w, r) || w.Code != 200 || !strings.Contains(w.Body.String(), "ping") {
		t.Errorf("the serving config after the failed load: %d %s", w.Code, w.Body)
	}
	if got := good.pages.Limits().Pending; got != 5 {
		t.Errorf("the serving config's max_pending is %d, want 5", got)
	}

	// Cleaned up, the serving config gives its store back: the file is free.
	if err := good.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if n, _ := pooled(t, goodPath); n != 0 {
		t.Errorf("after Cleanup the store has %d references", n)
	}
	l, err := ledger.OpenBolt(goodPath, ledger.BoltOptions{LockTimeout: 1})
	if err != nil {
		t.Fatalf("after Cleanup the bolt file is still held: %v", err)
	}
	_ = l.Close()
}
