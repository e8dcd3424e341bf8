package caddymodule

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// provisionDirect provisions h without a server, as Caddy would inside
// one, filling a ledger (off) and an identity key when h has none.
func provisionDirect(t *testing.T, h *Handler) error {
	t.Helper()
	if h.Ledger == nil {
		h.Ledger = &Ledger{Backend: "off"}
	}
	if h.Identity == nil {
		h.Identity = &Identity{KeyFile: writeKey(t)}
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	err := h.provision(ctx, zap.NewNop())
	t.Cleanup(func() { _ = h.Cleanup() })
	return err
}

// serveDirect sends one request through a provisioned handler.
func serveDirect(t *testing.T, h *Handler, method, path, auth, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr, req.Host = "127.0.0.1:4000", "127.0.0.1:9080"
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	return w
}

func callerClaims(aud any) jwt.MapClaims {
	return jwt.MapClaims{"iss": "https://runtime.test", "sub": "u_1", "aud": aud, "exp": time.Now().Add(time.Minute).Unix()}
}

func pageTokenClaims(aud any) jwt.MapClaims {
	return jwt.MapClaims{"sub": "u_1", "thread": "th_1", "aud": aud, "exp": time.Now().Add(time.Minute).Unix()}
}

// writePublicKey writes a new Ed25519 public key as a PKIX PEM file in dir
// and returns its private half.
func writePublicKey(t *testing.T, dir string) ed25519.PrivateKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pub.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return priv
}

// Rule: callers name an issuer and an audience (or resource); with
// callers and pages both configured, each names its own audience; caller keys come over https (http only on loopback); the
// leeway is at most 5m.
func TestCallersConfigRules(t *testing.T) {
	secret := strings.Repeat("s", 32)
	const iss = "https://platform.example"
	for _, c := range []struct {
		name    string
		callers *Callers
		pages   *Pages
		want    string // "" when the config loads
	}{
		{"callers need an audience", &Callers{Tokens: Tokens{Secret: secret, Issuer: iss}}, nil, "callers: audience (or resource) is required: without it, tokens for any other app on the same identity provider would be accepted"},
		{"callers need an issuer", &Callers{Tokens: Tokens{Secret: secret, Audience: "toolgate"}}, nil, "callers: issuer is required"},
		{"a resource is an audience", &Callers{Tokens: Tokens{Secret: secret, Issuer: iss}, Resource: "https://gw.example/toolgate/mcp"}, nil, ""},
		{"pages alone need no audience", nil, &Pages{Tokens: Tokens{Secret: secret}}, ""},
		{"both with their own audiences", &Callers{Tokens: Tokens{Secret: secret, Audience: "toolgate", Issuer: iss}}, &Pages{Tokens: Tokens{Secret: secret, Audience: "toolgate-pages"}}, ""},
		{"callers without audience", &Callers{Tokens: Tokens{Secret: secret, Issuer: iss}}, &Pages{Tokens: Tokens{Secret: secret, Audience: "toolgate-pages"}}, "callers: audience (or resource) is required"},
		{"pages without audience", &Callers{Tokens: Tokens{Secret: secret, Audience: "toolgate", Issuer: iss}}, &Pages{Tokens: Tokens{Secret: secret}}, "pages: audience is required when callers are configured too"},
		{"one audience for both", &Callers{Tokens: Tokens{Secret: secret, Audience: "toolgate", Issuer: iss}}, &Pages{Tokens: Tokens{KeyFile: "/nonexistent", Audience: "toolgate"}}, `callers and pages: the audience "toolgate" is the same`},
		{"jwks over https", &Callers{Tokens: Tokens{JWKSURL: "https://platform.example/.well-known/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"jwks over http to 127.0.0.1", &Callers{Tokens: Tokens{JWKSURL: "http://127.0.0.1:8081/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"jwks over http to 127.1.2.3", &Callers{Tokens: Tokens{JWKSURL: "http://127.1.2.3/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"jwks over http to ::1", &Callers{Tokens: Tokens{JWKSURL: "http://[::1]:8081/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"jwks over http to localhost", &Callers{Tokens: Tokens{JWKSURL: "http://localhost:8081/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"jwks over http elsewhere", &Callers{Tokens: Tokens{JWKSURL: "http://platform.example/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, "must be an https URL"},
		{"pages jwks over http elsewhere", nil, &Pages{Tokens: Tokens{JWKSURL: "http://app.example/jwks.json"}}, "pages: jwks_url: \"http://app.example/jwks.json\" must be an https URL"},
		{"pages jwks over https", nil, &Pages{Tokens: Tokens{JWKSURL: "https://app.example/jwks.json"}}, ""},
		{"jwks over http to a name under 127.0.0.1", &Callers{Tokens: Tokens{JWKSURL: "http://127.0.0.1.evil.example/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, "must be an https URL"},
		{"jwks over http to a private address", &Callers{Tokens: Tokens{JWKSURL: "http://10.0.0.1/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, "must be an https URL"},
		{"jwks over ftp", &Callers{Tokens: Tokens{JWKSURL: "ftp://127.0.0.1/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, "must be an https URL"},
		{"jwks not absolute", &Callers{Tokens: Tokens{JWKSURL: "/jwks.json", Issuer: iss, Audience: "toolgate"}}, nil, "not an absolute URL"},
		{"leeway 5m", &Callers{Tokens: Tokens{Secret: secret, Leeway: caddy.Duration(5 * time.Minute), Issuer: iss, Audience: "toolgate"}}, nil, ""},
		{"leeway over 5m", &Callers{Tokens: Tokens{Secret: secret, Leeway: caddy.Duration(5*time.Minute + time.Second), Issuer: iss, Audience: "toolgate"}}, nil, "callers: leeway 5m1s must be between 0 and 5m0s"},
		{"negative leeway", &Callers{Tokens: Tokens{Secret: secret, Leeway: caddy.Duration(-time.Second), Issuer: iss, Audience: "toolgate"}}, nil, "callers: leeway -1s must be between"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := provisionDirect(t, &Handler{Callers: c.callers, Pages: c.pages})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// tokenKindsConfig has callers and pages that share one secret, from an
// env placeholder, and tell their tokens apart by audience alone.
func tokenKindsConfig(upstream, dir string) string {
	return testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[1]s
			ledger bolt %[2]s/ledger.db
			callers {
				secret {env.TOOLGATE_TEST_SHARED_SECRET}
				issuer https://runtime.test
				audience toolgate-callers
			}
			pages {
				secret {env.TOOLGATE_TEST_SHARED_SECRET}
				audience toolgate-pages
			}
			client_tool_timeout 5s
			tool md {
				description "Markdown."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target app api GET /md
			}
			tool where {
				description "A client tool."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target kazzle video_position
			}
		}
	}
}
`, upstream, dir)
}

func doRequest(t *testing.T, tc *caddytest.Tester, method, path, token, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// Rule: a page token is never accepted as a caller token, nor the
// reverse, even when both kinds are signed with one secret; and a
// secret given as {env.NAME} is the variable's value.
func TestTokenKindsNotInterchangeable(t *testing.T) {
	secret := "shared-secret-0123456789-abcdefghijklmnop"
	t.Setenv("TOOLGATE_TEST_SHARED_SECRET", secret)
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, tokenKindsConfig(rec.URL, dataDir(t)))

	caller := apitest.SignHS256(t, callerClaims("toolgate-callers"), secret)
	page := apitest.SignHS256(t, pageTokenClaims("toolgate-pages"), secret)
	both := apitest.SignHS256(t, pageTokenClaims([]string{"toolgate-callers", "toolgate-pages"}), secret)
	literal := apitest.SignHS256(t, callerClaims("toolgate-callers"), "{env.TOOLGATE_TEST_SHARED_SECRET}")

	// The caller token works as a caller token.
	if status, body, _ := doRequest(t, tc, "POST", "/tools/md", caller, `{"input":{}}`); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Fatalf("caller token: %d %s", status, body)
	}

	// Refused as the other kind, and nothing reaches the upstream.
	before := rec.Count()
	for _, c := range []struct{ name, method, path, token string }{
		{"page token as caller: invoke", "POST", "/tools/md", page},
		{"page token as caller: list", "GET", "/tools", page},
		{"page token as caller: page context", "POST", "/page-context", page},
		{"page token as caller: mcp", "POST", "/mcp", page},
		{"token for both audiences as caller", "POST", "/tools/md", both},
		{"secret taken literally", "POST", "/tools/md", literal},
		{"caller token as page: stream", "GET", "/client/calls?threadId=th_1", caller},
		{"caller token as page: claim", "POST", "/client/calls/c1/claim", caller},
		{"caller token as page: result", "POST", "/client/calls/c1/result", caller},
		{"token for both audiences as page", "POST", "/client/calls/c1/claim", both},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"input":{}}`
			switch {
			case strings.HasSuffix(c.path, "/result"):
				body = `{"result":"forged"}`
			case c.path == "/mcp":
				body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"md","arguments":{}}}`
			case c.path == "/page-context":
				body = `{"items":[]}`
			}
			status, resp, h := doRequest(t, tc, c.method, c.path, c.token, body)
			// The MCP SDK answers its 401 without a challenge.
			if status != 401 || (c.path != "/mcp" && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("%d %s %q, want 401 with a challenge", status, resp, h.Get("WWW-Authenticate"))
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("refused tokens reached the upstream %d times", n)
	}

	// A client call waits for its page: the caller token cannot claim or
	// answer it (above, and here on a real call), the page token can.
	ch := make(chan string, 1)
	go func() {
		_, body, _ := doRequest(t, tc, "POST", "/tools/where", caller, `{"input":{},"callId":"c2","context":{"source":"thread","threadId":"th_1"}}`)
		ch <- body
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body, _ := doRequest(t, tc, "POST", "/client/calls/c2/claim", caller, "")
		if status != 401 {
			t.Fatalf("caller token claiming a waiting call: %d %s", status, body)
		}
		status, body, _ = doRequest(t, tc, "POST", "/client/calls/c2/claim", page, "")
		if status == 200 {
			break
		}
		if status != 404 || time.Now().After(deadline) {
			t.Fatalf("page token claiming: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond) // the invoke has not registered the call yet
	}
	if status, body, _ := doRequest(t, tc, "POST", "/client/calls/c2/result", caller, `{"result":"forged"}`); status != 401 {
		t.Fatalf("caller token posting a result: %d %s", status, body)
	}
	if status, body, _ := doRequest(t, tc, "POST", "/client/calls/c2/result", page, `{"result":"from the page"}`); status != 200 {
		t.Fatalf("page token posting the result: %d %s", status, body)
	}
	select {
	case body := <-ch:
		if !strings.Contains(body, `"content":"from the page"`) {
			t.Errorf("the client call answered %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client call did not answer")
	}
}

// Rule: a JWKS fetch error never reaches the 401; it is logged.
func TestCallersJWKSDownMessage(t *testing.T) {
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal detail of the platform", http.StatusBadGateway)
	}))
	defer jwks.Close()
	h := &Handler{
		Callers: &Callers{Tokens: Tokens{JWKSURL: jwks.URL + "/secret-path/jwks.json", Issuer: "https://runtime.test", Audience: "toolgate"}},
		Tools: []manifest.Tool{{
			Name: "ping", Description: "d", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: "http://127.0.0.1:1/ping"},
		}},
	}
	if err := provisionDirect(t, h); err != nil {
		t.Fatal(err)
	}
	priv := writePublicKey(t, t.TempDir())
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, callerClaims("toolgate"))
	tok.Header["kid"] = "k1"
	s, _ := tok.SignedString(priv)
	w := serveDirect(t, h, "POST", "/tools/ping", s, `{"input":{}}`)
	answer := w.Body.String() + w.Header().Get("WWW-Authenticate")
	if w.Code != 401 || !strings.Contains(w.Body.String(), "the token could not be verified") {
		t.Errorf("%d %s, want 401 saying the token could not be verified", w.Code, w.Body)
	}
	u := strings.TrimPrefix(jwks.URL, "http://")
	for _, leak := range []string{u, "secret-path", "502", "internal detail"} {
		if strings.Contains(answer, leak) {
			t.Errorf("the 401 tells %q: %s", leak, answer)
		}
	}
}

// Rule: every secret, password, key path and env value of the directive
// is resolved with Caddy's replacer at load: an unset {env.NAME} is a
// config error naming the option.
func TestSecretPlaceholders(t *testing.T) {
	const unset = "{env.TOOLGATE_TEST_UNSET}"
	os.Unsetenv("TOOLGATE_TEST_UNSET")
	secret := "env-secret-0123456789-abcdefghijklmnopq"
	t.Setenv("TOOLGATE_TEST_SECRET", secret)
	keyDir := t.TempDir()
	priv := writePublicKey(t, keyDir)
	t.Setenv("TOOLGATE_TEST_KEY_DIR", keyDir)
	identityKey := writeKey(t)
	t.Setenv("TOOLGATE_TEST_IDENTITY_KEY", identityKey)

	for _, c := range []struct {
		name string
		h    *Handler
		want string
	}{
		{"callers secret", &Handler{Callers: &Callers{Tokens: Tokens{Secret: unset}}}, "callers: secret: evaluated placeholder " + unset + " is empty"},
		{"callers key_file", &Handler{Callers: &Callers{Tokens: Tokens{KeyFile: unset + "/pub.pem"}}}, "callers: key_file: evaluated placeholder " + unset + " is empty"},
		{"callers jwks_url", &Handler{Callers: &Callers{Tokens: Tokens{JWKSURL: "https://" + unset + "/jwks.json"}}}, "callers: jwks_url: evaluated placeholder " + unset},
		{"pages secret", &Handler{Pages: &Pages{Tokens: Tokens{Secret: unset}}}, "pages: secret: evaluated placeholder " + unset},
		{"pages key_file", &Handler{Pages: &Pages{Tokens: Tokens{KeyFile: unset}}}, "pages: key_file: evaluated placeholder " + unset},
		{"identity key_file", &Handler{Identity: &Identity{KeyFile: unset}}, "identity key: key_file: evaluated placeholder " + unset},
		{"identity key file", &Handler{Identity: &Identity{Keys: []IdentityKey{{ID: "k1", File: unset}}}}, `identity key: key "k1": file: evaluated placeholder ` + unset},
		{"redis password", &Handler{Ledger: &Ledger{Backend: "redis", Addr: "127.0.0.1:1", Password: unset}}, "ledger redis: password: evaluated placeholder " + unset},
		{"component env", &Handler{Components: map[string]*Component{"api": {BaseURL: "http://127.0.0.1:1", Env: map[string]string{"API_KEY": unset}}}}, `component "api": env API_KEY: evaluated placeholder ` + unset},
		{"unknown placeholder", &Handler{Pages: &Pages{Tokens: Tokens{Secret: "{nope.x}" + secret}}}, "pages: secret: unrecognized placeholder {nope.x}"},
		{"braces in a literal secret", &Handler{Callers: &Callers{Tokens: Tokens{Secret: "abc{def}" + secret}}}, `callers: secret: unrecognized placeholder {def} (write \{ for a literal brace)`},
		{"set placeholders", &Handler{
			Callers:  &Callers{Tokens: Tokens{KeyFile: "{env.TOOLGATE_TEST_KEY_DIR}/pub.pem", Issuer: "https://runtime.test", Audience: "toolgate"}},
			Pages:    &Pages{Tokens: Tokens{Secret: "{env.TOOLGATE_TEST_SECRET}", Audience: "toolgate-pages"}},
			Identity: &Identity{KeyFile: "{env.TOOLGATE_TEST_IDENTITY_KEY}"},
		}, ""},
		{"an escaped brace", &Handler{Callers: &Callers{Tokens: Tokens{Secret: `abc\{def}` + secret, Issuer: "https://runtime.test", Audience: "toolgate"}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := provisionDirect(t, c.h)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}

	// The resolved values are the ones used.
	h := &Handler{
		Callers: &Callers{Tokens: Tokens{KeyFile: "{env.TOOLGATE_TEST_KEY_DIR}/pub.pem", Issuer: "https://runtime.test", Audience: "toolgate"}},
		Pages:   &Pages{Tokens: Tokens{Secret: "{env.TOOLGATE_TEST_SECRET}", Audience: "toolgate-pages"}},
	}
	if err := provisionDirect(t, h); err != nil {
		t.Fatal(err)
	}
	callerTok, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, callerClaims("toolgate")).SignedString(priv)
	if w := serveDirect(t, h, "GET", "/tools", callerTok, ""); w.Code != 200 {
		t.Errorf("caller token by the key at {env.TOOLGATE_TEST_KEY_DIR}/pub.pem: %d %s", w.Code, w.Body)
	}
	// Claiming an unknown call gets past authentication to a 404.
	if w := serveDirect(t, h, "POST", "/client/calls/c1/claim", apitest.SignHS256(t, pageTokenClaims("toolgate-pages"), secret), ""); w.Code != 404 {
		t.Errorf("page token by the {env.TOOLGATE_TEST_SECRET} secret: %d %s", w.Code, w.Body)
	}
	if w := serveDirect(t, h, "POST", "/client/calls/c1/claim", apitest.SignHS256(t, pageTokenClaims("toolgate-pages"), "{env.TOOLGATE_TEST_SECRET}"), ""); w.Code != 401 {
		t.Errorf("page token by the placeholder's own text: %d %s", w.Code, w.Body)
	}
	// An escaped brace is a literal one.
	h = &Handler{Callers: &Callers{Tokens: Tokens{Secret: `abc\{def}` + secret, Issuer: "https://runtime.test", Audience: "toolgate"}}}
	if err := provisionDirect(t, h); err != nil {
		t.Fatal(err)
	}
	if w := serveDirect(t, h, "GET", "/tools", apitest.SignHS256(t, callerClaims("toolgate"), "abc{def}"+secret), ""); w.Code != 200 {
		t.Errorf("secret with an escaped brace: %d %s", w.Code, w.Body)
	}
}

// Rule: env values are resolved at load, and what they resolve to is sent
// as it is: never scanned again for placeholders or ${…} references.
func TestEnvPlaceholders(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_API_KEY", "key-${input.id}-{env.HOME}-${env.OTHER}")
	rec := apitest.NewRecorder(t)
	h := &Handler{
		Components: map[string]*Component{"api": {BaseURL: rec.URL, Env: map[string]string{
			"API_KEY": "{env.TOOLGATE_TEST_API_KEY}", "OTHER": "other",
		}}},
		Tools: []manifest.Tool{{
			Name: "ping", Description: "d",
			InputSchema: jsontext.Value(`{"type":"object","properties":{"id":{"type":"string"}}}`),
			Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/md",
				Headers: map[string]string{"X-Key": "${env.API_KEY}"}},
		}},
	}
	if err := provisionDirect(t, h); err != nil {
		t.Fatal(err)
	}
	if w := serveDirect(t, h, "POST", "/tools/ping", "", `{"input":{"id":"INJECTED"},"identity":{"user":"u_1"}}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"content":"saved"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got, want := rec.Get(t, "/md").Header.Get("X-Key"), "key-${input.id}-{env.HOME}-${env.OTHER}"; got != want {
		t.Errorf("X-Key = %q, want %q", got, want)
	}
}

// Rule: the public fallback page secret of Caddyfile.example is refused
// unless every listener is on loopback.
func TestServersLoopbackOnly(t *testing.T) {
	repl := caddy.NewReplacer()
	t.Setenv("TOOLGATE_TEST_LISTEN", "127.0.0.1:9080")
	for _, c := range []struct {
		name   string
		listen [][]string
		want   string
	}{
		{"127.0.0.1", [][]string{{"127.0.0.1:8080"}}, ""},
		{"another loopback address", [][]string{{"127.5.6.7:8080"}}, ""},
		{"::1", [][]string{{"[::1]:8080"}}, ""},
		{"localhost", [][]string{{"localhost:8080"}}, ""},
		{"unix socket", [][]string{{"unix//run/toolgate.sock"}}, ""},
		{"tcp/ network", [][]string{{"tcp/127.0.0.1:8080", "tcp6/[::1]:8080"}}, ""},
		{"placeholder", [][]string{{"{env.TOOLGATE_TEST_LISTEN}"}}, ""},
		{"every interface", [][]string{{":8080"}}, "listens on :8080, beyond loopback"},
		{"a public address", [][]string{{"127.0.0.1:8080", "192.0.2.1:8080"}}, "listens on 192.0.2.1:8080"},
		{"0.0.0.0", [][]string{{"0.0.0.0:8080"}}, "beyond loopback"},
		{"another server", [][]string{{"127.0.0.1:8080"}, {":80"}}, "listens on :80"},
		{"a host name", [][]string{{"example.com:8080"}}, "beyond loopback"},
		{"socket activation", [][]string{{"fd/3"}}, "beyond loopback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := map[string]*caddyhttp.Server{}
			for i, l := range c.listen {
				servers[fmt.Sprintf("srv%d", i)] = &caddyhttp.Server{Listen: l}
			}
			err := serversLoopbackOnly(servers, repl)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func fallbackConfig(dir, bind, logFile string) string {
	return testGlobals(dir, "log {\n\t\toutput file "+logFile+"\n\t}") + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind %[2]s
	handle_path /toolgate/* {
		toolgate {
			ledger off
			pages {
				secret %[1]s
				audience toolgate-pages
			}
		}
	}
}
`, examplePageSecret, bind)
}

// The fallback secret loads on loopback, with a warning in the log, and is
// refused when a listener is beyond it (the address is never listened on:
// the load fails before).
func TestExamplePageSecret(t *testing.T) {
	dir := dataDir(t)
	logFile := filepath.Join(dir, "caddy.log")
	tc := caddytest.NewTester(t)
	initServer(tc, fallbackConfig(dir, "127.0.0.1", logFile))
	if status, body, _ := doRequest(t, tc, "POST", "/client/calls/c1/claim", apitest.SignHS256(t, pageTokenClaims("toolgate-pages"), examplePageSecret), ""); status != 404 {
		t.Errorf("page token by the example secret on loopback: %d %s", status, body)
	}
	logged, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), `"level":"warn"`) || !strings.Contains(string(logged), "the example's public fallback") {
		t.Errorf("no warning about the example secret in the log:\n%s", logged)
	}

	caddytest.AssertLoadError(t, fallbackConfig(dir, "192.0.2.1", logFile), "caddyfile",
		"pages: secret is the example's public fallback, which lets anyone sign page tokens; it is refused unless every listener is on loopback: server srv0 listens on 192.0.2.1:9080, beyond loopback")
}
