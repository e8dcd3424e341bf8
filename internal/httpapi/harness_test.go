package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
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

// The tests below run the API the way the Caddy module does, without
// Caddy: a gateway over real components (httptest upstreams), a bolt
// ledger in t.TempDir(), and the API served by an httptest.Server on a
// loopback port. Their configs are the Caddyfiles the module's tests used
// before, written as the structs the module maps them onto.

// recorded is what the upstream saw of one request.
type recorded struct {
	Method string
	Path   string // escaped
	Query  string
	Header http.Header
	Body   []byte
}

// recorder is a loopback upstream that records each request, counts them,
// and answers by path.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	last map[string]recorded
	seen int
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{last: map[string]recorded{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"ok","extra":"dropped"}`)
	})
	mux.HandleFunc("/api/bookmark", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":7,"title":"Go","url":"https://go.dev","tags":["lang"]}`)
	})
	mux.HandleFunc("/card/", func(w http.ResponseWriter, r *http.Request) {
		cards := map[string]string{
			"plain": `{"type":"action_required","title":"Send the email?","description":"To ada@example.com","elements":[
				{"type":"button","id":"approve","label":"Send","variant":"primary","input":{"content":"approved","markdown":"**approved**"}},
				{"type":"button","id":"reject","label":"Don't send","input":{"reason":"no","n":1}},
				{"type":"button","id":"run","label":"Run","input":{"id":"z9"},"target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"}}]}`,
			"device":    `{"type":"action_required","title":"Scan","assignee":{"computerId":"pc-7"},"elements":[{"type":"button","id":"scan","label":"Scan","input":{"content":"scanned"}}]}`,
			"dup":       `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A"},{"type":"button","id":"a","label":"B"}]}`,
			"badtarget": `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","target":{"type":"app","component":"nowhere","method":"GET","path":"/"}}]}`,
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, cards[strings.TrimPrefix(r.URL.Path, "/card/")])
	})
	mux.HandleFunc("/slowok", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"slow ok"}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "plain <b>text</b>")
	})
	mux.HandleFunc("/md", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"saved","markdown":"**saved**"}`)
	})
	mux.HandleFunc("/both", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","markdown":"m","embedUrl":"https://app.example/card/1"}`)
	})
	mux.HandleFunc("/relative-embed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","embedUrl":"/card/1"}`)
	})
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result":42}`)
	})
	mux.HandleFunc("/domain-error", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"not_found","error":"no bookmark b9"}`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for i := 0; i < 80; i++ { // 5 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly part")
		buf.Flush()
		conn.Close()
	})
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		key := r.URL.Path
		if strings.HasPrefix(key, "/items/") {
			key = "/items/"
		}
		if strings.HasPrefix(key, "/card/") {
			key = "/card/"
		}
		rec.last[key] = recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body}
		rec.seen++
		rec.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) get(t *testing.T, path string) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r, ok := rec.last[path]
	if !ok {
		t.Fatalf("upstream saw no request to %s", path)
	}
	return r
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen
}

const (
	testSchema  = `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	emptySchema = `{"type":"object","properties":{},"additionalProperties":false}`
)

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
	fromManifest := parseTools(t, fmt.Sprintf(`{"tools":[{"name":"from_manifest","displayName":"From manifest","description":"A manifest tool.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/text"}},
{"name":"ext_text","description":"A url tool.","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"target":{"type":"url","method":"GET","url":"%s/text","query":{"q":"${input.q}"},"headers":{"X-Key":"${env.API_KEY}"},"component":"api"}}]}`, upstream))
	app := func(name, description, schema, method, path string) string {
		return fmt.Sprintf(`{"name":%q,"description":%q,"input_schema":%s,"target":{"type":"app","component":"api","method":%q,"path":%q}}`,
			name, description, schema, method, path)
	}
	inline := parseTools(t, `{"tools":[
{"name":"save","description":"Save an item.","displayName":"Save item","input_schema":`+testSchema+`,
 "target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","query":{"n":"${input.n}"},"headers":{"X-Note":"${input.note}"},"body":"${input}"}},
`+app("get_item", "Get an item.", testSchema, "GET", "/items/${input.id}")+`,
{"name":"typed_body","description":"Typed body.","input_schema":`+testSchema+`,
 "target":{"type":"app","component":"api","method":"PUT","path":"/items/x","body":{"tags":"${input.tags}","n":"${input.n}","label":"id=${input.id} n=${input.n}","lit":"$${input.id}","key":"${env.API_KEY}"}}},
`+app("md", "Markdown.", emptySchema, "GET", "/md")+`,
`+app("both", "Markdown and embed.", emptySchema, "GET", "/both")+`,
`+app("relative_embed", "Bad embed.", emptySchema, "GET", "/relative-embed")+`,
`+app("no_content", "JSON without content.", emptySchema, "GET", "/no-content")+`,
`+app("domain_error", "Domain error.", emptySchema, "GET", "/domain-error")+`,
`+app("slow", "Slow.", emptySchema, "GET", "/slow")+`,
`+app("big", "Big.", emptySchema, "GET", "/big")+`,
`+app("cut", "Cut.", emptySchema, "GET", "/cut")+`,
`+app("card", "Answers a card.", `{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}`, "GET", "/card/${input.kind}")+`,
`+app("slowok", "Slow but fine.", emptySchema, "GET", "/slowok")+`,
{"name":"ext","description":"External.","input_schema":`+emptySchema+`,"target":{"type":"url","method":"POST","url":"`+upstream+`/md"}}]}`)
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
	// api is the API's config; its Gateway, Bridge, JWKS and StateSeed
	// are filled in.
	api Config
}

// server is the API on a loopback port.
type server struct {
	// URL is where the API is mounted: http://127.0.0.1:port.
	URL    string
	srv    *httptest.Server
	api    *API
	bridge *clienttools.Bridge
	ledger ledger.Ledger
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
	tools, err := manifest.Compile(o.sources, o.components)
	if err != nil {
		t.Fatal(err)
	}
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
	}
	s.bridge = clienttools.NewBridge()
	s.bridge.SetLimits(o.limits)
	gw := gateway.New(gateway.Config{
		Tools: tools, Issuer: issuer,
		Client: dispatch.NewClient(o.upstreamTimeout, o.maxResponseSize),
		Ledger: s.ledger, Bridge: s.bridge, ClientTimeout: o.clientTimeout,
	})
	cfg := o.api
	cfg.Gateway, cfg.Bridge, cfg.JWKS, cfg.StateSeed = gw, s.bridge, issuer.JWKS(), key.Private.Seed()
	if s.api, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(s.api)
	s.URL = s.srv.URL
	addr := s.srv.Listener.Addr().String()
	s.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}
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

type answer struct {
	CallID   string `json:"callId"`
	Tool     string `json:"tool"`
	Status   string `json:"status"`
	IsError  bool   `json:"isError"`
	Content  string `json:"content"`
	Markdown string `json:"markdown"`
	EmbedURL string `json:"embedUrl"`
	Card     string `json:"card"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

const who = `"identity":{"user":"u_1","install":"in_1"}`

func invoke(t *testing.T, s *server, tool, body string, header ...string) (int, answer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("invoke %s: answer is not JSON: %q", tool, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("invoke %s: Content-Type %q", tool, ct)
	}
	return resp.StatusCode, a
}

// send makes one request through the server's client and returns the
// status and body.
func send(t *testing.T, s *server, method, url, ctype, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func get(t *testing.T, s *server, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// startGateway serves gatewayOptions over a new recorder.
func startGateway(t *testing.T) (*server, *recorder) {
	rec := newRecorder(t)
	return startServer(t, gatewayOptions(t, rec.srv.URL)), rec
}

func jwksKeys(t *testing.T, s *server) map[string]ed25519.PublicKey {
	t.Helper()
	resp, err := s.client.Get(s.URL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Cache-Control") == "" {
		t.Error("jwks has no Cache-Control")
	}
	var set struct {
		Keys []struct {
			Kty, Crv, X, Kid, Alg string
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" {
			t.Errorf("jwk %+v", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("jwk x %q", k.X)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out
}

// verifyWithJWKS verifies an identity token against the key set the
// server publishes.
func verifyWithJWKS(t *testing.T, s *server, token string) jwt.MapClaims {
	t.Helper()
	keys := jwksKeys(t, s)
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("https://tools.test"), jwt.WithAudience("api")).
		ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
			kid, _ := tok.Header["kid"].(string)
			k, ok := keys[kid]
			if !ok {
				return nil, fmt.Errorf("kid %q not in the JWKS", kid)
			}
			return k, nil
		})
	if err != nil {
		t.Fatalf("identity token does not verify against the served JWKS: %v", err)
	}
	return claims
}
