package httpapi

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
)

// startLoopback serves mcpOptions with pages for one more origin, and no
// callers: the loopback rules stand in for them. allowedHosts are the
// API's AllowedHosts.
func startLoopback(t *testing.T, upstream string, allowedHosts ...string) *server {
	t.Helper()
	_, pages, err := NewAuthenticators(nil, &TokenConfig{Secret: apitest.PageSecret}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	o := mcpOptions(t, upstream)
	o.api.Pages, o.api.PageOrigins, o.api.AllowedHosts = pages, []string{"https://app.example.com"}, allowedHosts
	return startServer(t, o)
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestLoopbackFinding replays a security review's finding: with no callers, a
// web page's cross-origin text/plain POST ran a tool as the user it named,
// and a proxy on the same machine made every caller loopback. Each is now
// refused, and nothing reaches the upstream. (A second Caddy site proxying
// to the gateway is the Caddy module's test; here a proxy is the headers
// it adds.)
func TestLoopbackFinding(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startLoopback(t, rec.URL)
	direct, evil := s.URL, s.host("evil.example")
	envelope := `{"input":{},` + apitest.Who + `}`
	before := rec.Count()

	for _, c := range []struct {
		name, method, url, ctype, body string
		header                         []string
		status                         int
		want                           string
	}{
		// The finding: what a page on evil.example can send without a
		// preflight, as the browser sends it.
		{"cross-origin text/plain POST", "POST", direct + "/tools/md", "text/plain;charset=UTF-8", envelope,
			[]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "evil.example"},
		{"cross-origin form POST", "POST", direct + "/tools/md", "application/x-www-form-urlencoded", envelope,
			[]string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin JSON POST", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-site without Origin", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"Sec-Fetch-Site", "cross-site"}, 403, "Sec-Fetch-Site"},
		{"text/plain from this machine", "POST", direct + "/tools/md", "text/plain", envelope, nil, 415, "application/json"},
		{"no Content-Type", "POST", direct + "/tools/md", "", envelope, nil, 415, "application/json"},
		{"resume as text/plain", "POST", direct + "/calls/c1/resume", "text/plain", `{"action":"skip",` + apitest.Who + `}`, nil, 415, "application/json"},
		{"page context as text/plain", "POST", direct + "/page-context", "text/plain", `{"items":[]}`, nil, 415, "application/json"},
		{"cross-origin page context", "POST", direct + "/page-context", "application/json", `{"items":[]}`,
			[]string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin call status", "GET", direct + "/calls/c1?user=u_1", "", "", []string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin tool list", "GET", direct + "/tools", "", "", []string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin MCP", "POST", direct + "/mcp", "application/json", mcpInit,
			[]string{"Origin", "https://evil.example", "Accept", "application/json, text/event-stream"}, 403, "another web origin"},
		{"MCP as text/plain", "POST", direct + "/mcp", "text/plain", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}, 415, "application/json"},

		// A proxy on the same machine says so in its headers, and this
		// server trusts no proxies.
		{"X-Forwarded-For from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"X-Forwarded-For", "127.0.0.1"}, 403, "X-Forwarded-For"},
		{"Forwarded from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"Forwarded", "for=127.0.0.1"}, 403, "Forwarded"},
		{"X-Real-IP from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"X-Real-IP", "127.0.0.1"}, 403, "X-Real-Ip"},

		// DNS rebinding: evil.example resolving to 127.0.0.1.
		{"foreign Host", "POST", evil + "/tools/md", "application/json", envelope, nil, 403, "allowed_hosts"},
		{"foreign Host, tool list", "GET", evil + "/tools", "", "", nil, 403, "allowed_hosts"},
		{"foreign Host, MCP", "POST", evil + "/mcp", "application/json", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}, 403, "allowed_hosts"},
		{"foreign Host, same-origin page", "POST", evil + "/tools/md", "application/json", envelope,
			[]string{"Origin", evil}, 403, "allowed_hosts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := s.Send(t, c.method, c.url, c.ctype, c.body, c.header...)
			var e apiError
			if status != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == "" || !strings.Contains(e.Error.Message, c.want) {
				t.Errorf("%d %s, want %d with a JSON error naming %q", status, body, c.status, c.want)
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Fatalf("refused requests reached the upstream %d times", n)
	}

	// What stays allowed: this machine directly and the site's own pages.
	for _, c := range []struct {
		name   string
		url    string
		header []string
	}{
		{"direct", direct, nil},
		{"localhost", s.host("localhost"), nil},
		{"same-origin page", direct, []string{"Origin", direct, "Sec-Fetch-Site", "same-origin"}},
	} {
		t.Run("allowed "+c.name, func(t *testing.T) {
			n := rec.Count()
			if status, body := s.Send(t, "POST", c.url+"/tools/md", "application/json; charset=utf-8", envelope, c.header...); status != 200 || !strings.Contains(body, `"content":"saved"`) {
				t.Errorf("%d %s", status, body)
			}
			if rec.Count() != n+1 {
				t.Errorf("the upstream saw %d requests, want 1", rec.Count()-n)
			}
		})
	}
	if status, body := s.Send(t, "POST", direct+"/mcp", "application/json", mcpInit, "Accept", "application/json, text/event-stream"); status != 200 || !strings.Contains(body, `"serverInfo"`) {
		t.Errorf("MCP from this machine: %d %s", status, body)
	}
}

// TestLoopbackAllowedHosts: a Host listed in allowed_hosts is served on
// every runtime endpoint; others still are not.
func TestLoopbackAllowedHosts(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startLoopback(t, rec.URL, "tools.internal")
	allowed := s.host("tools.internal")
	envelope := `{"input":{},` + apitest.Who + `}`
	if status, body := s.Send(t, "POST", allowed+"/tools/md", "application/json", envelope,
		"Origin", allowed); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Errorf("allowed host: %d %s", status, body)
	}
	if status, body := s.Send(t, "GET", allowed+"/tools", "", ""); status != 200 || !strings.Contains(body, `"name":"md"`) {
		t.Errorf("allowed host, tool list: %d %s", status, body)
	}
	before := rec.Count()
	if status, body := s.Send(t, "POST", s.host("other.example")+"/tools/md", "application/json", envelope); status != 403 || !strings.Contains(body, "allowed_hosts") {
		t.Errorf("other host: %d %s", status, body)
	}
	if rec.Count() != before {
		t.Error("a refused Host reached the upstream")
	}
}

// TestIdentityBoundsEndToEnd replays the second finding: a 40,000-byte
// identity.user was answered done, and the gateway could not start again.
// It is refused before anything is recorded, and the gateway starts again
// on its ledger.
func TestIdentityBoundsEndToEnd(t *testing.T) {
	rec := apitest.NewRecorder(t)
	o := gatewayOptions(t, rec.URL)
	o.ledger = filepath.Join(t.TempDir(), "ledger.db")
	s := startServer(t, o)
	huge := strings.Repeat("u", 40000)
	longest := strings.Repeat("u", 256)
	before := rec.Count()

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"40,000-byte user", "POST", "/tools/md", `{"input":{},"callId":"big_1","identity":{"user":"` + huge + `"}}`, 400, "invalid_identity"},
		{"257-byte user", "POST", "/tools/md", `{"input":{},"callId":"big_2","identity":{"user":"` + longest + `u"}}`, 400, "invalid_identity"},
		{"257-byte install", "POST", "/tools/md", `{"input":{},"identity":{"user":"u_1","install":"` + longest + `i"}}`, 400, "invalid_identity"},
		{"control character", "POST", "/tools/md", `{"input":{},"identity":{"user":"u_1\u001fin_2"}}`, 400, "invalid_identity"},
		{"C1 control", "POST", "/tools/md", `{"input":{},"identity":{"user":"u_1\u0085"}}`, 400, "invalid_identity"},
		{"call id with a slash", "POST", "/tools/md", `{"input":{},"callId":"a/b",` + apitest.Who + `}`, 400, "invalid_call_id"},
		{"call id ..", "POST", "/tools/md", `{"input":{},"callId":"..",` + apitest.Who + `}`, 400, "invalid_call_id"},
		{"call id of 129 bytes", "POST", "/tools/md", `{"input":{},"callId":"` + strings.Repeat("c", 129) + `",` + apitest.Who + `}`, 400, "invalid_call_id"},
		{"call id with a space", "POST", "/tools/md", `{"input":{},"callId":"a b",` + apitest.Who + `}`, 400, "invalid_call_id"},
		{"status for a long user", "GET", "/calls/big_1?user=" + longest + "u", "", 400, "invalid_identity"},
		{"status for a control character", "GET", "/calls/big_1?user=u%01", "", 400, "invalid_identity"},
		{"status for invalid UTF-8", "GET", "/calls/big_1?user=u%ff", "", 400, "invalid_identity"},
		{"resume for a long user", "POST", "/calls/big_1/resume", `{"action":"skip","identity":{"user":"` + huge + `"}}`, 400, "invalid_identity"},
		{"status of a bad call id", "GET", "/calls/a%20b?user=u_1", "", 404, "unknown_call"},
		{"nothing recorded for the 40,000-byte call", "GET", "/calls/big_1?user=u_1", "", 404, "unknown_call"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := s.Send(t, c.method, s.URL+c.path, "application/json", c.body)
			if status != c.status || apitest.ErrCode(body) != c.code {
				t.Errorf("%d %.300s, want %d %s", status, body, c.status, c.code)
			}
		})
	}
	if rec.Count() != before {
		t.Fatal("refused calls reached the upstream")
	}

	// The bounds are inclusive; that call is recorded.
	status, body := s.Send(t, "POST", s.URL+"/tools/md", "application/json",
		`{"input":{},"callId":"`+strings.Repeat("c", 128)+`","identity":{"user":"`+longest+`","install":"`+strings.Repeat("i", 256)+`"}}`)
	if status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Fatalf("a call at the bounds: %d %s", status, body)
	}

	// A restart: the gateway stops and releases the ledger, then a new one
	// opens it again and finds the call.
	s.stop()
	s = startServer(t, o)
	status, a := s.GetCall(t, "/calls/"+strings.Repeat("c", 128)+"?user="+longest+"&install="+strings.Repeat("i", 256))
	if status != 200 || a.Status != "done" || a.Content != "saved" {
		t.Errorf("after a restart: %d %+v", status, a)
	}
}

// TestContentTypeEveryMode: POST bodies must be application/json with
// callers and on the page endpoints too, not only in loopback mode.
func TestContentTypeEveryMode(t *testing.T) {
	s := startPages(t)
	tok := apitest.PageToken(t, "u_1", "th_1")
	for _, c := range []struct{ path, body string }{
		{"/client/calls/c1/result", `{"result":1}`},
		{"/client/calls/c1/claim", `{}`},
		{"/page-context", `{"items":[]}`},
	} {
		if status, _, _ := s.PagePost(t, tok, c.path, ""); status == http.StatusUnsupportedMediaType {
			t.Errorf("%s without a body: 415", c.path)
		}
		header := []string{"Authorization", "Bearer " + tok}
		if strings.HasPrefix(c.path, "/client/") {
			header = append(header, "Origin", apitest.PageOrigin)
		}
		status, body := s.Send(t, "POST", s.URL+c.path, "text/plain", c.body, header...)
		if status != http.StatusUnsupportedMediaType || apitest.ErrCode(body) != "unsupported_media_type" {
			t.Errorf("%s as text/plain: %d %s, want 415", c.path, status, body)
		}
	}

	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	s = startCallers(t, rec.URL, p.URL)
	before := rec.Count()
	status, body := s.Send(t, "POST", s.URL+"/tools/open", "text/plain", `{"input":{}}`, "Authorization", "Bearer "+p.Token(t, "k1", apitest.GoodClaims("u_7", "user")))
	if status != http.StatusUnsupportedMediaType || apitest.ErrCode(body) != "unsupported_media_type" || rec.Count() != before {
		t.Errorf("callers, text/plain: %d %s", status, body)
	}
}

// TestCallerTokenIdentityBounds: a verified token whose user or install
// claim breaks the identity bounds is refused as a bad token (401), on
// the Tools API and on MCP, and nothing is sent.
func TestCallerTokenIdentityBounds(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	s := startCallers(t, rec.URL, p.URL)
	before := rec.Count()
	long := apitest.GoodClaims(strings.Repeat("u", 257), "user")
	ctl := apitest.GoodClaims("u_7", "user")
	ctl["install"] = "in\x1fu_8"
	for name, claims := range map[string]jwt.MapClaims{"long sub": long, "control character in install": ctl} {
		tok := p.Token(t, "k1", claims)
		status, body := s.Send(t, "POST", s.URL+"/tools/open", "application/json", `{"input":{}}`, "Authorization", "Bearer "+tok)
		if status != 401 || apitest.ErrCode(body) != "invalid_token" {
			t.Errorf("%s: %d %s, want 401 invalid_token", name, status, body)
		}
		status, body = s.Send(t, "POST", s.URL+"/mcp", "application/json", mcpInit,
			"Authorization", "Bearer "+tok, "Accept", "application/json, text/event-stream")
		if status != 401 {
			t.Errorf("%s over MCP: %d %s, want 401", name, status, body)
		}
	}
	if rec.Count() != before {
		t.Error("a refused token reached the upstream")
	}
	// The same token with a good identity works.
	status, body := s.Send(t, "POST", s.URL+"/tools/open", "application/json", `{"input":{}}`, "Authorization", "Bearer "+p.Token(t, "k1", apitest.GoodClaims("u_7", "user")))
	if status != 200 {
		t.Errorf("good token: %d %s", status, body)
	}
}

// TestMCPIdentityAndCallIDBounds: over MCP, a _meta identity or call id
// that breaks the gateway's bounds is a protocol error, and nothing is
// sent or recorded.
func TestMCPIdentityAndCallIDBounds(t *testing.T) {
	s, rec := startMCPGateway(t)
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	before := rec.Count()
	for name, meta := range map[string]mcp.Meta{
		"40,000-byte user":       {"toolgate/identity": map[string]any{"user": strings.Repeat("u", 40000)}},
		"control character":      {"toolgate/identity": map[string]any{"user": "u_1\x1fin_2"}},
		"257-byte install":       {"toolgate/identity": map[string]any{"user": "u_1", "install": strings.Repeat("i", 257)}},
		"identity not an object": {"toolgate/identity": "u_1"},
		"user not a string":      {"toolgate/identity": map[string]any{"user": 7}},
		"call id with a slash":   withMeta(apitest.U1(), "toolgate/callId", "a/b"),
		"call id ..":             withMeta(apitest.U1(), "toolgate/callId", ".."),
		"call id of 129 bytes":   withMeta(apitest.U1(), "toolgate/callId", strings.Repeat("c", 129)),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: meta})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "_meta") {
			t.Errorf("%s: %v %.200s, want a protocol error naming _meta", name, err, apitest.Dump(res))
		}
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("refused calls reached the upstream %d times", n)
	}
	// At the bounds, the call runs.
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{},
		Meta: mcp.Meta{"toolgate/identity": map[string]any{"user": strings.Repeat("u", 256)}, "toolgate/callId": strings.Repeat("c", 128)}})
	if res.IsError || apitest.ModelText(t, res) != "saved" {
		t.Errorf("at the bounds: %.300s", apitest.Dump(res))
	}
}

// The pages origins are checked once, at load (setupLoopback), as
// scheme://host[:port] and nothing else.
