package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/gateway"
)

// asSecret signs the tokens of the test authorization server, which
// toolgate verifies as its callers' secret.
const asSecret = "as-secret-0123456789-abcdefghij-klmnop"

// startResourceServer serves mcpOptions with callers configured by tc
// (its Secret is asSecret), on ln when not nil.
func startResourceServer(t *testing.T, upstream string, tc TokenConfig, ln net.Listener) *server {
	t.Helper()
	tc.Secret = asSecret
	if tc.Issuer == "" {
		tc.Issuer = asIssuer
	}
	callers, _, err := NewAuthenticators(&tc, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	o := mcpOptions(t, upstream)
	o.api.Callers = callers
	o.listener = ln
	return startServer(t, o)
}

// listen takes a loopback port for a server whose config names its own
// URL; it returns the listener and http://127.0.0.1:port.
func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, "http://" + ln.Addr().String()
}

// asIssuer is the iss of the authorization servers' tokens.
const asIssuer = "https://as.test"

// oauthClaims are an access token's claims for user u_oauth.
func oauthClaims(aud any, scope string) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": asIssuer, "sub": "u_oauth", "install": "in_oauth", "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	if scope != "" {
		c["scope"] = scope
	}
	return c
}

// postMCP sends an initialize to /mcp with the token, if any, and returns
// the answer, its body read.
func postMCP(t *testing.T, s *server, endpoint, token string) (*http.Response, string) {
	t.Helper()
	return apitest.PostMCPInitialize(t, s.client, endpoint, token)
}

// challenge parses the answer's one Bearer challenge as the SDK does.
func challenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v %+v", resp.Header.Values("WWW-Authenticate"), err, cs)
	}
	return cs[0].Params
}

// The metadata document names the resource, its authorization servers and
// scopes, at both paths, with CORS for browser-based clients; without a
// configured resource it names the /mcp the request reached and is not
// to be stored, Host and all.
func TestMetadataDocument(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startResourceServer(t, rec.URL, TokenConfig{
		Audience: "toolgate", AuthorizationServers: []string{"https://as.test", "http://127.0.0.1:9/tenant"},
		Scopes: []string{"tools:call"},
	}, nil)
	for _, path := range []string{metadataPath, metadataPath + "/mcp"} {
		resp, body := s.Get(t, s.URL+path)
		var md oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal([]byte(body), &md); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if md.Resource != s.URL+"/mcp" || strings.Join(md.AuthorizationServers, " ") != "https://as.test http://127.0.0.1:9/tenant" ||
			strings.Join(md.ScopesSupported, " ") != "tools:call" || strings.Join(md.BearerMethodsSupported, " ") != "header" {
			t.Errorf("GET %s: %s", path, body)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", path, resp.Header)
		}
	}
	// A hostile Host gets its own name back, in an answer not to be kept.
	resp, body := s.Get(t, s.host("evil.test")+metadataPath+"/mcp")
	if !strings.Contains(body, `"resource":"`+s.host("evil.test")+`/mcp"`) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Host evil.test: %v %s", resp.Header, body)
	}
	// The preflight of a browser-based client.
	req, _ := http.NewRequest(http.MethodOptions, s.URL+metadataPath+"/mcp", nil)
	req.Header.Set("Origin", "http://inspector.test")
	req.Header.Set("Access-Control-Request-Method", "GET")
	if resp, err := s.client.Do(req); err != nil || resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Another path under it is not toolgate's.
	for _, c := range []struct {
		api  *API
		path string
	}{
		{s.api, metadataPath + "/other"},
		{newTestAPI(t, Config{}), metadataPath}, // loopback mode: no metadata
		{newTestAPI(t, Config{}), metadataPath + "/mcp"},
	} {
		r := httptest.NewRequest("GET", "http://127.0.0.1"+c.path, nil)
		r.RemoteAddr = "127.0.0.1:5000"
		if c.api.Serve(httptest.NewRecorder(), r) {
			t.Errorf("GET %s was answered", c.path)
		}
	}
}

// A configured resource is what the document names, whatever the Host,
// and what the challenges point to the metadata of.
func TestMetadataConfiguredResource(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startResourceServer(t, rec.URL, TokenConfig{Resource: "https://gw.test/toolgate/mcp", AuthorizationServers: []string{"https://as.test"}}, nil)
	resp, body := s.Get(t, s.host("evil.test")+metadataPath+"/mcp")
	if !strings.Contains(body, `"resource":"https://gw.test/toolgate/mcp"`) || resp.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("metadata: %v %s", resp.Header, body)
	}
	resp, _ = postMCP(t, s, s.host("localhost")+"/mcp", "")
	if got := challenge(t, resp)["resource_metadata"]; got != "https://gw.test/toolgate/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("resource_metadata %q", got)
	}
}

// /mcp's 401 carries resource_metadata, which the SDK's own discovery
// follows to a document it accepts for this /mcp; a refused token says
// invalid_token beside it. Nothing reaches the upstream.
func TestMCPChallenge(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startResourceServer(t, rec.URL, TokenConfig{Audience: "toolgate", AuthorizationServers: []string{"https://as.test"}}, nil)

	resp, body := postMCP(t, s, s.URL+"/mcp", "")
	c := challenge(t, resp)
	if resp.StatusCode != 401 || c["error"] != "" || c["realm"] != "toolgate" || c["scope"] != "" || apitest.ErrCode(body) != "unauthorized" {
		t.Errorf("no token: %d %v %s", resp.StatusCode, c, body)
	}
	if c["resource_metadata"] != s.URL+metadataPath+"/mcp" {
		t.Errorf("resource_metadata %q", c["resource_metadata"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := oauthex.GetProtectedResourceMetadata(ctx, c["resource_metadata"], s.URL+"/mcp", s.client)
	if err != nil || md.AuthorizationServers[0] != "https://as.test" {
		t.Fatalf("the SDK's discovery: %v %+v", err, md)
	}

	resp, body = postMCP(t, s, s.URL+"/mcp", apitest.SignHS256(t, oauthClaims("billing", ""), asSecret))
	c = challenge(t, resp)
	if resp.StatusCode != 401 || c["error"] != "invalid_token" || !strings.Contains(c["error_description"], "audience") ||
		c["resource_metadata"] != s.URL+metadataPath+"/mcp" || apitest.ErrCode(body) != "invalid_token" {
		t.Errorf("a token for another audience: %d %v %s", resp.StatusCode, c, body)
	}
	if rec.Count() != 0 {
		t.Errorf("%d requests reached the upstream", rec.Count())
	}

	// Without an authorization server there is no document to point to.
	plain := startResourceServer(t, rec.URL, TokenConfig{Audience: "toolgate"}, nil)
	resp, _ = postMCP(t, plain, plain.URL+"/mcp", "")
	if c := challenge(t, resp); resp.StatusCode != 401 || c["resource_metadata"] != "" {
		t.Errorf("without authorization_server: %d %v", resp.StatusCode, c)
	}
}

// With a resource configured and no audience, a token must name the
// resource (RFC 8707); with both, either. A token for another resource of
// the same authorization server is refused before anything is sent.
func TestResourceAudience(t *testing.T) {
	rec := apitest.NewRecorder(t)
	ln, base := listen(t)
	resource := base + "/mcp"
	s := startResourceServer(t, rec.URL, TokenConfig{Resource: resource, AuthorizationServers: []string{"https://as.test"}}, ln)
	both := startResourceServer(t, rec.URL, TokenConfig{Resource: resource, Audience: "toolgate"}, nil)

	call := func(s *server, aud any) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := apitest.MCPClient{Endpoint: s.URL + "/mcp", Token: apitest.SignHS256(t, oauthClaims(aud, ""), asSecret)}.Connect(ctx)
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}})
	}
	for _, c := range []struct {
		name string
		s    *server
		aud  any
		ok   bool
	}{
		{"the resource", s, resource, true},
		{"the resource among others", s, []string{"https://other.test/mcp", resource}, true},
		{"another resource on this host", s, base + "/other/mcp", false},
		{"the resource with a slash more", s, resource + "/", false},
		{"an audience not configured", s, "toolgate", false},
		{"both configured: the resource", both, resource, true},
		{"both configured: the audience", both, "toolgate", true},
		{"both configured: another resource", both, "https://evil.test/mcp", false},
	} {
		before := rec.Count()
		res, err := call(c.s, c.aud)
		switch {
		case c.ok && (err != nil || res.IsError):
			t.Errorf("%s: %v %s", c.name, err, apitest.Dump(res))
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "nauthorized")):
			t.Errorf("%s: %v, want a 401", c.name, err)
		case !c.ok && rec.Count() != before:
			t.Errorf("%s: the upstream was reached", c.name)
		}
	}
	// The same tokens on the Tools API.
	for aud, want := range map[string]int{resource: 200, "toolgate": 401, base + "/other/mcp": 401} {
		code, _ := s.Send(t, "POST", s.URL+"/tools/md", "application/json", `{"input":{}}`, "Authorization", "Bearer "+apitest.SignHS256(t, oauthClaims(aud, ""), asSecret))
		if code != want {
			t.Errorf("Tools API, aud %s: %d, want %d", aud, code, want)
		}
	}
}

// A token without a required scope gets 403 insufficient_scope naming
// them all, from /mcp with resource_metadata, and from the Tools API,
// which takes the same tokens and must not be the way around the scope.
func TestScopes(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startResourceServer(t, rec.URL, TokenConfig{Audience: "toolgate", AuthorizationServers: []string{"https://as.test"}, Scopes: []string{"tools:call", "notes"}}, nil)
	for _, c := range []struct {
		name  string
		claim func(jwt.MapClaims)
		ok    bool
	}{
		{"scope with both", func(c jwt.MapClaims) { c["scope"] = "openid notes tools:call" }, true},
		{"scp with both", func(c jwt.MapClaims) { c["scp"] = []string{"tools:call", "notes"} }, true},
		{"one in each", func(c jwt.MapClaims) { c["scope"] = "notes"; c["scp"] = []string{"tools:call"} }, true},
		{"no scope", func(jwt.MapClaims) {}, false},
		{"one missing", func(c jwt.MapClaims) { c["scope"] = "tools:call" }, false},
		{"a prefix is not the scope", func(c jwt.MapClaims) { c["scope"] = "tools:callx notes" }, false},
		{"scope as an array is not read", func(c jwt.MapClaims) { c["scope"] = []string{"tools:call", "notes"} }, false},
	} {
		claims := oauthClaims("toolgate", "")
		c.claim(claims)
		token := apitest.SignHS256(t, claims, asSecret)
		resp, body := postMCP(t, s, s.URL+"/mcp", token)
		code, tbody := s.Send(t, "POST", s.URL+"/tools/md", "application/json", `{"input":{}}`, "Authorization", "Bearer "+token)
		if c.ok {
			if resp.StatusCode != 200 || code != 200 {
				t.Errorf("%s: /mcp %d %s, Tools API %d %s", c.name, resp.StatusCode, body, code, tbody)
			}
			continue
		}
		ch := challenge(t, resp)
		if resp.StatusCode != 403 || ch["error"] != "insufficient_scope" || ch["scope"] != "tools:call notes" ||
			ch["resource_metadata"] != s.URL+metadataPath+"/mcp" || apitest.ErrCode(body) != "insufficient_scope" {
			t.Errorf("%s: /mcp %d %v %s", c.name, resp.StatusCode, ch, body)
		}
		if code != 403 || apitest.ErrCode(tbody) != "insufficient_scope" {
			t.Errorf("%s: Tools API %d %s", c.name, code, tbody)
		}
	}
	// The 401 names the scopes too, for a client's first request.
	resp, _ := postMCP(t, s, s.URL+"/mcp", "")
	if c := challenge(t, resp); resp.StatusCode != 401 || c["scope"] != "tools:call notes" || c["error"] != "" || c["resource_metadata"] == "" {
		t.Errorf("no token: %d %v", resp.StatusCode, c)
	}
	if n := rec.Count(); n != 3 {
		t.Errorf("the upstream saw %d calls, want the 3 of the accepted tokens", n)
	}
}

// authServer is an OAuth authorization server for tests: it publishes its
// metadata (RFC 8414), grants every authorization request, and issues
// HS256 access tokens under asSecret naming the resource asked for in aud
// (RFC 8707), or aud when set.
type authServer struct {
	*httptest.Server
	aud string

	mu        sync.Mutex
	resources []string // the resource of each authorization and token request
	scopes    []string // the scope of each authorization request
}

func newAuthServer(t *testing.T) *authServer {
	as := &authServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.MarshalWrite(w, map[string]any{
			"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		as.resources = append(as.resources, r.PostForm.Get("resource"))
		scope := as.scopes[len(as.scopes)-1]
		as.mu.Unlock()
		aud := r.PostForm.Get("resource")
		if as.aud != "" {
			aud = as.aud
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.MarshalWrite(w, map[string]any{
			"access_token": apitest.SignHS256(t, oauthClaims(aud, scope), asSecret),
			"token_type":   "Bearer", "expires_in": 60,
		})
	})
	as.Server = httptest.NewServer(mux)
	t.Cleanup(as.Close)
	return as
}

// client is an MCP client that authorizes with the authorization server
// through the SDK's own discovery: the challenge, the metadata, the
// server's metadata, an authorization code and the token.
func (as *authServer) client(t *testing.T) *auth.AuthorizationCodeHandler {
	t.Helper()
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "test-client"},
		RedirectURL:         "http://127.0.0.1:1/callback",
		AuthorizationCodeFetcher: func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			u, err := url.Parse(args.URL)
			if err != nil {
				return nil, err
			}
			q := u.Query()
			as.mu.Lock()
			as.resources = append(as.resources, q.Get("resource"))
			as.scopes = append(as.scopes, q.Get("scope"))
			as.mu.Unlock()
			return &auth.AuthorizationResult{Code: "code-1", State: q.Get("state")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The whole discovery with the Go SDK client: it reads the challenge,
// fetches the metadata, asks the authorization server for a token for
// this resource with the scopes, and calls a tool as the token's user.
// A server that issues its tokens for another resource gets nothing done.
func TestMCPOAuthFlow(t *testing.T) {
	rec := apitest.NewRecorder(t)
	as := newAuthServer(t)
	ln, base := listen(t)
	s := startResourceServer(t, rec.URL, TokenConfig{Resource: base + "/mcp", AuthorizationServers: []string{as.URL}, Scopes: []string{"tools:call"}}, ln)

	connect := func() (*mcp.ClientSession, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", OAuthHandler: as.client(t), MaxRetries: -1}, nil)
	}
	cs, err := connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}})
	if res.IsError {
		t.Fatalf("call: %s", apitest.Dump(res))
	}
	claims := s.VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_oauth" || claims["install"] != "in_oauth" {
		t.Errorf("the component was told %v", claims)
	}
	as.mu.Lock()
	if strings.Join(as.resources, " ") != base+"/mcp "+base+"/mcp" || strings.Join(as.scopes, " ") != "tools:call" {
		t.Errorf("the authorization server was asked for resources %q, scopes %q", as.resources, as.scopes)
	}
	as.mu.Unlock()

	before := rec.Count()
	as.aud = base + "/other/mcp"
	if cs, err := connect(); err == nil {
		cs.Close()
		t.Error("connected with a token for another resource")
	}
	if rec.Count() != before {
		t.Error("a token for another resource reached the upstream")
	}
}

// The load errors of the resource server settings name what is wrong.
func TestResourceServerConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  TokenConfig
		want string
	}{
		{"an authorization server without resource or audience", TokenConfig{Issuer: asIssuer, AuthorizationServers: []string{"https://as.test"}}, "audience (or resource) is required"},
		{"no audience", TokenConfig{Issuer: asIssuer}, "tokens for any other app on the same identity provider would be accepted"},
		{"no issuer", TokenConfig{Audience: "a"}, "callers: issuer is required"},
		{"an http authorization server", TokenConfig{Audience: "a", AuthorizationServers: []string{"http://as.test"}}, `authorization_server: "http://as.test" must be an https URL`},
		{"a relative authorization server", TokenConfig{Audience: "a", AuthorizationServers: []string{"as.test"}}, "authorization_server"},
		{"an authorization server with a query", TokenConfig{Audience: "a", AuthorizationServers: []string{"https://as.test/?t=1"}}, "no query or fragment"},
		{"a relative resource", TokenConfig{Resource: "/mcp"}, `resource "/mcp" is not an absolute URL`},
		{"a resource with a fragment", TokenConfig{Resource: "https://gw.test/mcp#x"}, "must not have a fragment"},
		{"an http resource", TokenConfig{Resource: "http://gw.test/mcp"}, "resource"},
		{"a scope with a quote", TokenConfig{Issuer: asIssuer, Audience: "a", Scopes: []string{`a"b`}}, "is not a scope"},
		{"a scope with a space", TokenConfig{Issuer: asIssuer, Audience: "a", Scopes: []string{"a b"}}, "is not a scope"},
	} {
		c.cfg.Secret = asSecret
		_, _, err := NewAuthenticators(&c.cfg, nil, zap.NewNop())
		if err == nil || !strings.Contains(err.Error(), "callers: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Pages take none of them.
	_, _, err := NewAuthenticators(nil, &TokenConfig{Secret: asSecret, Scopes: []string{"x"}}, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "pages: resource, authorization_server and scopes are for callers only") {
		t.Errorf("pages with scopes: %v", err)
	}
	// A page token must not name the callers' resource either.
	_, _, err = NewAuthenticators(&TokenConfig{Secret: asSecret, Resource: "https://gw.test/mcp"}, &TokenConfig{Secret: asSecret, Audience: "https://gw.test/mcp"}, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "is the same") {
		t.Errorf("pages with the callers' resource as audience: %v", err)
	}
}

// The local identity is who MCP calls act for when they name none; a
// _meta identity still wins; callers exclude it.
func TestMCPLocalIdentity(t *testing.T) {
	rec := apitest.NewRecorder(t)
	o := mcpOptions(t, rec.URL)
	o.api.LocalIdentity = &gateway.Identity{User: "u_local", Install: "in_local"}
	s := startServer(t, o)
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	for _, c := range []struct {
		meta          mcp.Meta
		user, install string
	}{
		{nil, "u_local", "in_local"},
		{apitest.U1(), "u_1", "in_1"},
		{mcp.Meta{"toolgate/identity": map[string]any{"user": "u_2"}}, "u_2", ""},
	} {
		res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: c.meta})
		if res.IsError {
			t.Fatalf("call: %s", apitest.Dump(res))
		}
		claims := s.VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
		install, _ := claims["install"].(string)
		if claims["sub"] != c.user || install != c.install {
			t.Errorf("_meta %v: the component was told %v, want %s/%s", c.meta, claims, c.user, c.install)
		}
	}

	callers, _, err := NewAuthenticators(&TokenConfig{Secret: asSecret, Issuer: asIssuer, Audience: "toolgate"}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Callers: callers, LocalIdentity: &gateway.Identity{User: "u"}}, "mcp: identity is for loopback mode only"},
		{Config{LocalIdentity: &gateway.Identity{User: "u\x1fx"}}, "mcp: identity: identity.user holds the control character"},
		{Config{LocalIdentity: &gateway.Identity{Install: "i"}}, "mcp: identity names no user"},
	} {
		if err := newTestAPIErr(t, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.LocalIdentity, err, c.want)
		}
	}
}

// newTestAPIErr is newTestAPI's error.
func newTestAPIErr(t *testing.T, c Config) error {
	t.Helper()
	api := newTestAPI(t, Config{})
	c.Gateway, c.Bridge = api.gw, api.bridge
	_, err := New(c)
	return err
}

// Whatever an error or a Host holds, the challenge stays one challenge
// whose parameters read back as they were: quotes and backslashes are
// quoted-pairs, control characters never reach the header.
func TestChallengeQuoting(t *testing.T) {
	callers, _, err := NewAuthenticators(&TokenConfig{Secret: asSecret, Issuer: asIssuer, Audience: "toolgate"}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	metadata := `http://evil", error="none\x/.well-known/oauth-protected-resource/mcp`
	h := callers.challenge(&tokenError{errors.New(`a "quoted" \ claim` + "\x01")}, metadata)
	if strings.ContainsAny(h, "\x00\x01\r\n") {
		t.Fatalf("control characters in %q", h)
	}
	cs, err := oauthex.ParseWWWAuthenticate([]string{h})
	if err != nil || len(cs) != 1 {
		t.Fatalf("%q: %v %+v", h, err, cs)
	}
	p := cs[0].Params
	if p["error"] != "invalid_token" || p["resource_metadata"] != metadata || !strings.HasPrefix(p["error_description"], `a "quoted" \ claim`) {
		t.Errorf("%q read back as %v", h, p)
	}
}
