package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/outbound"
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
			Client: outbound.NewClient(time.Second, 1<<20), Bridge: c.Bridge,
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
		{"GET", "/card.js", true},
		{"GET", "/playground", true},
		{"GET", "/playground/", false},
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

// The tests below run the API the way the Caddy module does, without
// Caddy: a gateway over real components (httptest upstreams), a bolt
// ledger in t.TempDir(), and the API served by an httptest.Server on a
// loopback port. Their configs are the Caddyfiles the module's tests used
// before, written as the structs the module maps them onto.

// parseTools reads a manifest's tools.
func parseTools(t *testing.T, doc string) []manifest.Tool {
	t.Helper()
	f, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	return f.Tools
}

// component declares a component, failing the test on a bad URL.
func component(t *testing.T, name, baseURL string, env map[string]string) *dispatch.Component {
	t.Helper()
	c, err := dispatch.NewComponent(name, baseURL, env)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gatewayOptions is the test config of the Tools API, as the Caddy
// module's testConfig declared it: a manifest of two tools and sixteen
// inline ones on component api (env API_KEY), identity issuer
// https://tools.test with a 2m ttl, a bolt ledger, upstream_timeout 300ms,
// max_response_size 1MiB and max_request_size 64KiB.
func gatewayOptions(t *testing.T, upstream string) options {
	fromManifest := parseTools(t, apitest.Manifest(upstream))
	app := func(name, description, schema, method, path string) string {
		return fmt.Sprintf(`{"name":%q,"description":%q,"input_schema":%s,"target":{"type":"app","component":"api","method":%q,"path":%q}}`,
			name, description, schema, method, path)
	}
	inline := parseTools(t, `{"tools":[
{"name":"save","description":"Save an item.","displayName":"Save item","input_schema":`+apitest.TestSchema+`,
 "target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","query":{"n":"${input.n}"},"headers":{"X-Note":"${input.note}"},"body":"${input}"}},
`+app("get_item", "Get an item.", apitest.TestSchema, "GET", "/items/${input.id}")+`,
{"name":"typed_body","description":"Typed body.","input_schema":`+apitest.TestSchema+`,
 "target":{"type":"app","component":"api","method":"PUT","path":"/items/x","body":{"tags":"${input.tags}","n":"${input.n}","label":"id=${input.id} n=${input.n}","lit":"$${input.id}","key":"${env.API_KEY}"}}},
`+app("md", "Markdown.", apitest.EmptySchema, "GET", "/md")+`,
`+app("both", "Markdown and embed.", apitest.EmptySchema, "GET", "/both")+`,
`+app("relative_embed", "Bad embed.", apitest.EmptySchema, "GET", "/relative-embed")+`,
`+app("no_content", "JSON without content.", apitest.EmptySchema, "GET", "/no-content")+`,
`+app("domain_error", "Domain error.", apitest.EmptySchema, "GET", "/domain-error")+`,
`+app("slow", "Slow.", apitest.EmptySchema, "GET", "/slow")+`,
`+app("big", "Big.", apitest.EmptySchema, "GET", "/big")+`,
`+app("cut", "Cut.", apitest.EmptySchema, "GET", "/cut")+`,
`+app("card", "Answers a card.", `{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}`, "GET", "/card/${input.kind}")+`,
`+app("slowok", "Slow but fine.", apitest.EmptySchema, "GET", "/slowok")+`,
{"name":"ext","description":"External.","input_schema":`+apitest.EmptySchema+`,"target":{"type":"url","method":"POST","url":"`+upstream+`/md"}}]}`)
	return options{
		sources: []manifest.Source{
			{Name: "manifest tools.json", Tools: fromManifest},
			{Name: "inline tools", Tools: inline},
		},
		components: map[string]*dispatch.Component{
			"api": component(t, "api", upstream, map[string]string{"API_KEY": "secret-key"}),
		},
		issuer: "https://tools.test", ttl: 2 * time.Minute,
		upstreamTimeout: 300 * time.Millisecond, maxResponseSize: 1 << 20,
		api: Config{MaxRequestSize: 64 << 10},
	}
}

// options is what a test server serves: the gateway's parts and the API's
// config. Zero values take the defaults the Caddy module would.
type options struct {
	sources    []manifest.Source
	components map[string]*dispatch.Component
	// ledger is the bolt file; "" is a new one in t.TempDir(), "off" none.
	ledger          string
	issuer          string
	ttl             time.Duration
	upstreamTimeout time.Duration
	maxResponseSize int64
	clientTimeout   time.Duration
	limits          clienttools.Limits
	// bridge, when set, is the server's bridge (one on Redis); by
	// default a new one in memory.
	bridge *clienttools.Bridge
	// observer, when set, counts the gateway's and the API's events, and
	// the bolt ledger's operations; logger gets their lines.
	observer observe.Observer
	logger   *zap.Logger
	// embedOrigins are the gateway's (as result.EmbedOrigin writes them).
	embedOrigins []string
	// api is the API's config; its Gateway, Bridge, JWKS and StateSeed
	// are filled in.
	api Config
	// listener, when set, is the one the server serves on: a test that
	// configures the server's own URL (a resource) listens first.
	listener net.Listener
	// connections, when set, makes the gateway's connections on its
	// ledger (nil with the ledger off); the tools compile against their
	// names.
	connections func(l ledger.Ledger) *connect.Manager
}

// server is the API on a loopback port; its Client sends requests to it.
type server struct {
	apitest.Client
	// URL is where the API is mounted: http://127.0.0.1:port.
	URL    string
	srv    *httptest.Server
	api    *API
	bridge *clienttools.Bridge
	ledger ledger.Ledger
	// boltFile is the bolt ledger's file; "" with the ledger off.
	boltFile string
	// client dials the server whatever a URL's host is, as caddytest's
	// does, so a test can send any Host (a rebinding name, an allowed
	// host) with a URL that names it.
	client   *http.Client
	stopOnce sync.Once
}

// startServer starts the API over a gateway built from o; it stops when
// the test ends.
func startServer(t *testing.T, o options) *server {
	t.Helper()
	s := &server{}
	key, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	issuerName := o.issuer
	if issuerName == "" {
		issuerName = "toolgate"
	}
	issuer := identity.NewIssuer(issuerName, o.ttl, key)
	switch o.ledger {
	case "off":
	case "":
		o.ledger = filepath.Join(t.TempDir(), "ledger.db")
		fallthrough
	default:
		if s.ledger, err = ledger.OpenBolt(o.ledger, ledger.BoltOptions{}); err != nil {
			t.Fatal(err)
		}
		s.boltFile = o.ledger
	}
	env := dispatch.Env{Components: o.components}
	var conns *connect.Manager
	if o.connections != nil {
		conns = o.connections(s.ledger)
		env.Connections = map[string]bool{}
		for _, name := range conns.Names() {
			env.Connections[name] = true
		}
	}
	tools, err := manifest.CompileIn(o.sources, env)
	if err != nil {
		t.Fatal(err)
	}
	s.bridge = o.bridge
	if s.bridge == nil {
		s.bridge = clienttools.NewBridge()
	}
	s.bridge = s.bridge.WithLimits(o.limits)
	gw := gateway.New(gateway.Config{
		Tools: tools, Issuer: issuer,
		Client: outbound.NewClient(o.upstreamTimeout, o.maxResponseSize),
		Ledger: observe.ObservedLedger(s.ledger, "bolt", o.observer), Bridge: s.bridge, ClientTimeout: o.clientTimeout,
		Observer: o.observer, Logger: o.logger, EmbedOrigins: o.embedOrigins,
		Connections: conns,
	})
	cfg := o.api
	cfg.Observer, cfg.Logger = o.observer, o.logger
	cfg.Gateway, cfg.Bridge, cfg.JWKS, cfg.StateSeed = gw, s.bridge, issuer.JWKS(), key.Private.Seed()
	if s.api, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(s.api)
	if o.listener != nil {
		s.srv.Listener.Close()
		s.srv.Listener = o.listener
	}
	s.srv.Start()
	s.URL = s.srv.URL
	addr := s.srv.Listener.Addr().String()
	s.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}
	s.Client = apitest.Client{HTTP: s.client, Base: s.URL}
	t.Cleanup(s.stop)
	return s
}

// stop closes the server, then the ledger, once.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.client.CloseIdleConnections()
		if s.ledger != nil {
			_ = s.ledger.Close()
		}
	})
}

// host is the URL of the server under another host name, for the Host
// header: http://name:port.
func (s *server) host(name string) string {
	_, port, _ := net.SplitHostPort(s.srv.Listener.Addr().String())
	return "http://" + net.JoinHostPort(name, port)
}

// startGateway serves gatewayOptions over a new recorder.
func startGateway(t *testing.T) (*server, *apitest.Recorder) {
	rec := apitest.NewRecorder(t)
	return startServer(t, gatewayOptions(t, rec.URL)), rec
}
