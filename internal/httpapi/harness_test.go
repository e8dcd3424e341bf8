package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
)

// newTestAPI returns an API over a gateway with one app tool, save, on a
// component that nothing listens on, and no ledger; c's Gateway and Bridge
// are filled in when unset.
func newTestAPI(t *testing.T, c Config) *API {
	t.Helper()
	if c.Gateway == nil {
		comp, err := dispatch.NewComponent("api", "http://127.0.0.1:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{{
			Name: "save", Description: "Save.", InputSchema: []byte(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/save"},
		}}}}, map[string]*dispatch.Component{"api": comp})
		if err != nil {
			t.Fatal(err)
		}
		key, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if c.Bridge == nil {
			c.Bridge = clienttools.NewBridge()
		}
		c.Gateway = gateway.New(gateway.Config{
			Tools: tools, Issuer: identity.NewIssuer("toolgate", time.Minute, key),
			Client: dispatch.NewClient(time.Second, 1<<20), Bridge: c.Bridge,
		})
	}
	api, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// TestLoopbackOnly checks the sidecar default without a network: a runtime
// call from a non-loopback peer is refused before anything else happens.
func TestLoopbackOnly(t *testing.T) {
	api := newTestAPI(t, Config{})
	for _, c := range []struct {
		method, path, remote string
		status               int
	}{
		{"GET", "/tools", "10.1.2.3:5555", 403},
		{"POST", "/tools/save", "192.0.2.1:5555", 403},
		{"POST", "/tools/save", "[2001:db8::1]:5555", 403},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.RemoteAddr = c.remote
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if w.Code != c.status || !strings.Contains(w.Body.String(), `"code":"forbidden"`) {
			t.Errorf("%s %s from %s: %d %s", c.method, c.path, c.remote, w.Code, w.Body)
		}
	}
}

// The API serves its own paths and leaves every other to the next
// handler, paths ServeMux would redirect included.
func TestServeOwnsOnlyItsPaths(t *testing.T) {
	api := newTestAPI(t, Config{})
	for _, c := range []struct {
		method, path string
		owned        bool
	}{
		{"GET", "/tools", true},
		{"POST", "/tools/save", true},
		{"DELETE", "/tools/save", true}, // its path: 405
		{"POST", "/tools/", true},       // an empty name: unknown tool
		{"GET", "/calls/c1", true},
		{"POST", "/calls/c1/resume", true},
		{"GET", "/calls/a/b", true}, // no such call
		{"GET", "/client/calls", true},
		{"GET", "/client/nope", true},
		{"POST", "/mcp", true},
		{"GET", "/.well-known/jwks.json", true},
		{"GET", "/client.js", true},
		{"GET", "/", false},
		{"GET", "/toolsx", false},
		{"GET", "/calls", false},  // ServeMux would redirect to /calls/
		{"GET", "/client", false}, // and to /client/
		{"GET", "/mcp/", false},   // not /mcp
		{"POST", "/tools/../mcp", false},
		{"GET", "/tools/./x", false},
		{"GET", "//tools", false},
		{"GET", "/app/page", false},
	} {
		r := httptest.NewRequest(c.method, "http://127.0.0.1"+c.path, nil)
		r.RemoteAddr = "127.0.0.1:5000"
		w := httptest.NewRecorder()
		if got := api.Serve(w, r); got != c.owned {
			t.Errorf("%s %s: owned %v, want %v", c.method, c.path, got, c.owned)
		}
		if !c.owned && (w.Code != 200 || w.Body.Len() != 0 || len(w.Header()) != 0) {
			t.Errorf("%s %s: not owned, yet %d %q was written", c.method, c.path, w.Code, w.Body)
		}
		if c.owned && w.Code == http.StatusMovedPermanently {
			t.Errorf("%s %s: redirected", c.method, c.path)
		}
	}
}
