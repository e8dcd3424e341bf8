package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/internal/apitest"
)

// authSecret signs the access tokens of these tests' authorization
// server, which toolgate verifies as its callers' secret.
const authSecret = "as-secret-0123456789-abcdefghij-klmnop"

// authConfig serves toolgate at /toolgate with callers (callers holds the
// block's lines), and the one route docs/mcp-clients.md gives for RFC 9728's root
// form of the metadata: /.well-known/oauth-protected-resource/toolgate/mcp
// rewritten to toolgate's own.
func authConfig(t *testing.T, upstream, callers string) string {
	return testGlobals(dataDir(t)) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	rewrite /.well-known/oauth-protected-resource/toolgate/mcp /toolgate/.well-known/oauth-protected-resource/mcp
	handle_path /toolgate/* {
		toolgate {
			component api %s
			ledger off
			identity {
				issuer https://tools.test
			}
			callers {
				secret %s
				issuer https://as.test
				%s
			}
			tool md {
				description "Markdown."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target app api GET /md
			}
		}
	}
}
`, upstream, authSecret, callers)
}

// accessToken is an access token for user u_oauth with aud and scope.
func accessToken(t *testing.T, aud, scope string) string {
	now := time.Now()
	return apitest.SignHS256(t, jwt.MapClaims{"iss": "https://as.test", "sub": "u_oauth", "aud": aud, "scope": scope, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}, authSecret)
}

// wwwAuthenticate posts an initialize to /mcp with the token, if any, and
// returns the status and the one Bearer challenge as the SDK parses it.
func wwwAuthenticate(t *testing.T, token string) (int, map[string]string) {
	t.Helper()
	resp, _ := apitest.PostMCPInitialize(t, http.DefaultClient, mcpEndpoint, token)
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode != 200 && (err != nil || len(cs) != 1 || cs[0].Scheme != "bearer") {
		t.Fatalf("%d, WWW-Authenticate %q: %v", resp.StatusCode, resp.Header.Values("WWW-Authenticate"), err)
	}
	if len(cs) == 0 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, cs[0].Params
}

// Through Caddy, mounted at /toolgate by handle_path: the metadata names
// the /mcp clients reach (the original path, not the stripped one), at
// the mount and at the host's root through docs/mcp-clients.md's route; /mcp's
// challenge points to a document the SDK's discovery accepts for it.
func TestMCPDiscoveryMounted(t *testing.T) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, authConfig(t, rec.URL, "audience toolgate\nauthorization_server https://as.test http://127.0.0.1:9/as\nscopes tools:call"))

	want := oauthex.ProtectedResourceMetadata{
		Resource: mcpEndpoint, AuthorizationServers: []string{"https://as.test", "http://127.0.0.1:9/as"},
		ScopesSupported: []string{"tools:call"}, BearerMethodsSupported: []string{"header"}, ResourceName: "toolgate",
	}
	for _, url := range []string{
		base + "/.well-known/oauth-protected-resource/mcp",
		base + "/.well-known/oauth-protected-resource",
		"http://127.0.0.1:9080/.well-known/oauth-protected-resource/toolgate/mcp",
	} {
		resp, body := client(tc).Get(t, url)
		var md oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal([]byte(body), &md); err != nil || resp.StatusCode != 200 || !reflect.DeepEqual(md, want) {
			t.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: no CORS", url)
		}
	}

	status, c := wwwAuthenticate(t, "")
	if status != 401 || c["resource_metadata"] != base+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("no token: %d %v", status, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, c["resource_metadata"], mcpEndpoint, tc.Client); err != nil {
		t.Errorf("the SDK's discovery: %v", err)
	}
	status, c = wwwAuthenticate(t, accessToken(t, "toolgate", ""))
	if status != 403 || c["error"] != "insufficient_scope" || c["scope"] != "tools:call" || c["resource_metadata"] == "" {
		t.Errorf("no scope: %d %v", status, c)
	}
	if rec.Count() != 0 {
		t.Errorf("%d requests reached the upstream", rec.Count())
	}
}

// With a configured resource, a token for it calls through Caddy as its
// user; a token the same server issued for another resource is refused
// (401 invalid_token) and nothing reaches the upstream.
func TestMCPResourceAudience(t *testing.T) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, authConfig(t, rec.URL, "resource "+mcpEndpoint+"\nauthorization_server https://as.test"))

	status, c := wwwAuthenticate(t, accessToken(t, "http://127.0.0.1:9080/other/mcp", ""))
	if status != 401 || c["error"] != "invalid_token" || c["resource_metadata"] != base+"/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("a token for another resource: %d %v", status, c)
	}
	if rec.Count() != 0 {
		t.Errorf("%d requests reached the upstream", rec.Count())
	}
	cs := apitest.MCPClient{Endpoint: mcpEndpoint, Token: accessToken(t, mcpEndpoint, "")}.Session(t)
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}})
	if res.IsError {
		t.Fatalf("md: %s", apitest.Dump(res))
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_oauth" {
		t.Errorf("the component was told %v", claims)
	}
}

// mcp { identity } is who an MCP client that names nobody acts for, as an
// app target is told in its identity token.
func TestMCPLocalIdentityCaddyfile(t *testing.T) {
	tc, rec := startMCPGateway(t, "mcp {\nidentity u_local in_local\n}")
	cs := apitest.MCPClient{Endpoint: mcpEndpoint}.Session(t)
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}})
	if res.IsError {
		t.Fatalf("md: %s", apitest.Dump(res))
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_local" || claims["install"] != "in_local" {
		t.Errorf("the component was told %v, want u_local/in_local", claims)
	}
}

// The load errors name the directive and what is wrong.
func TestMCPAuthLoadErrors(t *testing.T) {
	for _, c := range []struct{ name, callers, want string }{
		{"authorization server without resource", "authorization_server https://as.test", "callers: audience (or resource) is required"},
		{"http authorization server", "audience a\nauthorization_server http://as.test", `callers: authorization_server: "http://as.test" must be an https URL`},
		{"resource with a fragment", "resource https://gw.test/mcp#x", "callers: resource \"https://gw.test/mcp#x\" must not have a fragment"},
		{"scope with a space", "audience a\n" + `scopes "a b"`, `callers: scopes: "a b" is not a scope`},
	} {
		t.Run(c.name, func(t *testing.T) {
			caddytest.AssertLoadError(t, authConfig(t, "http://127.0.0.1:1", c.callers), "caddyfile", strings.ReplaceAll(c.want, `"`, `\"`))
		})
	}
	// With callers, at adapt time, naming the Caddyfile.
	caddytest.AssertLoadError(t, strings.Replace(authConfig(t, "http://127.0.0.1:1", "audience a"), "ledger off", "ledger off\nmcp {\nidentity u\n}", 1),
		"caddyfile", "mcp: identity is for loopback mode only, without callers: with callers, each token names its user, at Caddyfile:")
}

// The Caddyfile's callers and mcp options and their mistakes.
func TestMCPAuthCaddyfile(t *testing.T) {
	h, err := parseToolgate(
		"callers {", "secret s", "resource https://gw.test/mcp", "authorization_server https://a.test https://b.test",
		"authorization_server https://c.test", "scopes x y", "scopes z", "}",
	)
	if err != nil {
		t.Fatal(err)
	}
	c := h.Callers
	if c.Resource != "https://gw.test/mcp" || strings.Join(c.AuthorizationServers, " ") != "https://a.test https://b.test https://c.test" || strings.Join(c.Scopes, " ") != "x y z" {
		t.Errorf("callers %+v", c)
	}
	for _, c := range []struct {
		lines   []string
		user    string
		install string
	}{
		{[]string{"mcp {", "identity u_1", "}"}, "u_1", ""},
		{[]string{"mcp {", "identity u_1 in_1", "}"}, "u_1", "in_1"},
	} {
		h, err := parseToolgate(c.lines...)
		if err != nil || h.MCP.Identity.User != c.user || h.MCP.Identity.Install != c.install {
			t.Errorf("%q: %+v %v", c.lines, h, err)
		}
	}
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"mcp {", "identity", "}"}, "want: identity <user> [<install>], at Testfile:3"},
		{[]string{"mcp {", "identity a b c", "}"}, "want: identity <user> [<install>], at Testfile:3"},
		{[]string{"mcp {", "identity a", "identity b", "}"}, "identity already specified, at Testfile:4"},
		{[]string{"mcp {", "user a", "}"}, "unrecognized mcp subdirective user, at Testfile:3"},
		{[]string{"mcp", "mcp"}, "mcp already specified, at Testfile:3"},
		{[]string{"mcp {", "identity \"u\x01\"", "}"}, "mcp: identity: identity.user holds the control character U+0001 at byte 1"},
		{[]string{"callers {", "resource", "}"}, "wrong argument count or unexpected line ending after 'resource', at Testfile:3"},
		{[]string{"callers {", "authorization_server", "}"}, "wrong argument count or unexpected line ending after 'authorization_server', at Testfile:3"},
	} {
		if _, err := parseToolgate(c.lines...); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s", c.lines, err, c.want)
		}
	}
	// JSON names.
	var j Handler
	if err := json.Unmarshal([]byte(`{"mcp":{"identity":{"user":"u","install":"i"}},"callers":{"resource":"r","authorization_servers":["a"],"scopes":["s"]}}`), &j); err != nil ||
		j.MCP.Identity.User != "u" || j.MCP.Identity.Install != "i" || j.Callers.Resource != "r" || j.Callers.AuthorizationServers[0] != "a" || j.Callers.Scopes[0] != "s" {
		t.Errorf("JSON: %+v %v", j, err)
	}
}
