package caddymodule

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loopbackConfig is mcpConfig on any Host (the gateway's own check is what
// refuses foreign ones), with a pages origin, and a second site on :9081
// that reverse-proxies to it, as a proxy on the same machine would.
// globals go into the global options block.
func loopbackConfig(t *testing.T, upstream string, globals []string, extra ...string) string {
	t.Helper()
	dir := dataDir(t)
	extra = append([]string{"pages {\nsecret " + pageSecret + "\norigins https://app.example.com\n}"}, extra...)
	cfg := mcpConfig(t, upstream, dir, extra...)
	out := strings.Replace(cfg, testGlobals(dir), testGlobals(dir, globals...), 1)
	out = strings.Replace(out, "http://127.0.0.1:9080 {", "http://:9080 {", 1)
	if out == cfg {
		t.Fatal("loopbackConfig: nothing replaced")
	}
	return out + "http://:9081 {\n\tbind 127.0.0.1\n\treverse_proxy 127.0.0.1:9080\n}\n"
}

// send makes one request through the tester's client (which dials
// 127.0.0.1 whatever the URL's host) and returns the status and body.
func send(t *testing.T, tc *caddytest.Tester, method, url, ctype, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestLoopbackFinding replays the finding of issue 12: with no callers, a
// web page's cross-origin text/plain POST ran a tool as the user it named,
// and a proxy on the same machine made every caller loopback. Each is now
// refused, and nothing reaches the upstream.
func TestLoopbackFinding(t *testing.T) {
	rec := newRecorder(t)
	tc := caddytest.NewTester(t)
	tc.InitServer(loopbackConfig(t, rec.srv.URL, nil), "caddyfile")
	const direct, proxied = "http://127.0.0.1:9080/toolgate", "http://127.0.0.1:9081/toolgate"
	envelope := `{"input":{},` + who + `}`
	before := rec.count()

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
		{"resume as text/plain", "POST", direct + "/calls/c1/resume", "text/plain", `{"action":"skip",` + who + `}`, nil, 415, "application/json"},
		{"page context as text/plain", "POST", direct + "/page-context", "text/plain", `{"items":[]}`, nil, 415, "application/json"},
		{"cross-origin page context", "POST", direct + "/page-context", "application/json", `{"items":[]}`,
			[]string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin call status", "GET", direct + "/calls/c1?user=u_1", "", "", []string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin tool list", "GET", direct + "/tools", "", "", []string{"Origin", "https://evil.example"}, 403, "another web origin"},
		{"cross-origin MCP", "POST", direct + "/mcp", "application/json", mcpInit,
			[]string{"Origin", "https://evil.example", "Accept", "application/json, text/event-stream"}, 403, "another web origin"},
		{"MCP as text/plain", "POST", direct + "/mcp", "text/plain", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}, 415, "application/json"},

		// A proxy on the same machine: Caddy's reverse_proxy adds
		// X-Forwarded-For, and this server trusts no proxies.
		{"invoke through a proxy", "POST", proxied + "/tools/md", "application/json", envelope, nil, 403, "trusted_proxies"},
		{"tool list through a proxy", "GET", proxied + "/tools", "", "", nil, 403, "trusted_proxies"},
		{"call status through a proxy", "GET", proxied + "/calls/c1?user=u_1", "", "", nil, 403, "trusted_proxies"},
		{"page context through a proxy", "POST", proxied + "/page-context", "application/json", `{"items":[]}`, nil, 403, "trusted_proxies"},
		{"MCP through a proxy", "POST", proxied + "/mcp", "application/json", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}, 403, "trusted_proxies"},
		{"X-Forwarded-For from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"X-Forwarded-For", "127.0.0.1"}, 403, "X-Forwarded-For"},
		{"Forwarded from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"Forwarded", "for=127.0.0.1"}, 403, "Forwarded"},
		{"X-Real-IP from loopback", "POST", direct + "/tools/md", "application/json", envelope,
			[]string{"X-Real-IP", "127.0.0.1"}, 403, "X-Real-Ip"},

		// DNS rebinding: evil.example resolving to 127.0.0.1.
		{"foreign Host", "POST", "http://evil.example:9080/toolgate/tools/md", "application/json", envelope, nil, 403, "allowed_hosts"},
		{"foreign Host, tool list", "GET", "http://evil.example:9080/toolgate/tools", "", "", nil, 403, "allowed_hosts"},
		{"foreign Host, MCP", "POST", "http://evil.example:9080/toolgate/mcp", "application/json", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}, 403, "allowed_hosts"},
		{"foreign Host, same-origin page", "POST", "http://evil.example:9080/toolgate/tools/md", "application/json", envelope,
			[]string{"Origin", "http://evil.example:9080"}, 403, "allowed_hosts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := send(t, tc, c.method, c.url, c.ctype, c.body, c.header...)
			var e apiErr
			if status != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == "" || !strings.Contains(e.Error.Message, c.want) {
				t.Errorf("%d %s, want %d with a JSON error naming %q", status, body, c.status, c.want)
			}
		})
	}
	if n := rec.count() - before; n != 0 {
		t.Fatalf("refused requests reached the upstream %d times", n)
	}

	// What stays allowed: this machine directly, the site's own pages and
	// the pages origins.
	for _, c := range []struct {
		name   string
		url    string
		header []string
	}{
		{"direct", direct, nil},
		{"localhost", "http://localhost:9080/toolgate", nil},
		{"same-origin page", direct, []string{"Origin", "http://127.0.0.1:9080", "Sec-Fetch-Site", "same-origin"}},
		{"pages origin", direct, []string{"Origin", "https://app.example.com", "Sec-Fetch-Site", "cross-site"}},
	} {
		t.Run("allowed "+c.name, func(t *testing.T) {
			n := rec.count()
			if status, body := send(t, tc, "POST", c.url+"/tools/md", "application/json; charset=utf-8", envelope, c.header...); status != 200 || !strings.Contains(body, `"content":"saved"`) {
				t.Errorf("%d %s", status, body)
			}
			if rec.count() != n+1 {
				t.Errorf("the upstream saw %d requests, want 1", rec.count()-n)
			}
		})
	}
	if status, body := send(t, tc, "POST", direct+"/mcp", "application/json", mcpInit, "Accept", "application/json, text/event-stream"); status != 200 || !strings.Contains(body, `"serverInfo"`) {
		t.Errorf("MCP from this machine: %d %s", status, body)
	}
}

// TestLoopbackAllowedHosts: a Host listed in allowed_hosts is served on
// every runtime endpoint; others still are not.
func TestLoopbackAllowedHosts(t *testing.T) {
	rec := newRecorder(t)
	tc := caddytest.NewTester(t)
	tc.InitServer(loopbackConfig(t, rec.srv.URL, nil, "allowed_hosts tools.internal"), "caddyfile")
	envelope := `{"input":{},` + who + `}`
	if status, body := send(t, tc, "POST", "http://tools.internal:9080/toolgate/tools/md", "application/json", envelope,
		"Origin", "http://tools.internal:9080"); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Errorf("allowed host: %d %s", status, body)
	}
	if status, body := send(t, tc, "GET", "http://tools.internal:9080/toolgate/tools", "", ""); status != 200 || !strings.Contains(body, `"name":"md"`) {
		t.Errorf("allowed host, tool list: %d %s", status, body)
	}
	before := rec.count()
	if status, body := send(t, tc, "POST", "http://other.example:9080/toolgate/tools/md", "application/json", envelope); status != 403 || !strings.Contains(body, "allowed_hosts") {
		t.Errorf("other host: %d %s", status, body)
	}
	if rec.count() != before {
		t.Error("a refused Host reached the upstream")
	}
}

// TestLoopbackTrustedProxy: with trusted_proxies, Caddy's client IP is the
// one the proxy forwards for, and that is what must be loopback.
func TestLoopbackTrustedProxy(t *testing.T) {
	rec := newRecorder(t)
	tc := caddytest.NewTester(t)
	tc.InitServer(loopbackConfig(t, rec.srv.URL, []string{"servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}"}), "caddyfile")
	envelope := `{"input":{},` + who + `}`

	before := rec.count()
	// The outer site trusts its peer (this test) too, so it passes the
	// X-Forwarded-For on: the real client is on the internet.
	if status, body := send(t, tc, "POST", "http://127.0.0.1:9081/toolgate/tools/md", "application/json", envelope,
		"X-Forwarded-For", "203.0.113.9"); status != 403 || !strings.Contains(body, "203.0.113.9 is not a loopback address") {
		t.Errorf("internet client through a trusted proxy: %d %s", status, body)
	}
	if status, body := send(t, tc, "POST", "http://127.0.0.1:9080/toolgate/tools/md", "application/json", envelope,
		"X-Forwarded-For", "198.51.100.1"); status != 403 || !strings.Contains(body, "198.51.100.1") {
		t.Errorf("internet client named by a trusted peer: %d %s", status, body)
	}
	if rec.count() != before {
		t.Fatal("refused requests reached the upstream")
	}
	// A trusted proxy forwarding for this machine is this machine.
	if status, body := send(t, tc, "POST", "http://127.0.0.1:9081/toolgate/tools/md", "application/json", envelope); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Errorf("local client through a trusted proxy: %d %s", status, body)
	}
}

// TestIdentityBoundsEndToEnd replays the second finding: a 40,000-byte
// identity.user was answered done, and the gateway could not start again.
// It is refused before anything is recorded, and the gateway reloads.
func TestIdentityBoundsEndToEnd(t *testing.T) {
	rec := newRecorder(t)
	dir := dataDir(t)
	cfg := testConfig(t, rec.srv.URL, dir)
	tc := caddytest.NewTester(t)
	tc.InitServer(cfg, "caddyfile")
	huge := strings.Repeat("u", 40000)
	longest := strings.Repeat("u", 256)
	before := rec.count()

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
		{"call id with a slash", "POST", "/tools/md", `{"input":{},"callId":"a/b",` + who + `}`, 400, "invalid_call_id"},
		{"call id ..", "POST", "/tools/md", `{"input":{},"callId":"..",` + who + `}`, 400, "invalid_call_id"},
		{"call id of 129 bytes", "POST", "/tools/md", `{"input":{},"callId":"` + strings.Repeat("c", 129) + `",` + who + `}`, 400, "invalid_call_id"},
		{"call id with a space", "POST", "/tools/md", `{"input":{},"callId":"a b",` + who + `}`, 400, "invalid_call_id"},
		{"status for a long user", "GET", "/calls/big_1?user=" + longest + "u", "", 400, "invalid_identity"},
		{"status for a control character", "GET", "/calls/big_1?user=u%01", "", 400, "invalid_identity"},
		{"status for invalid UTF-8", "GET", "/calls/big_1?user=u%ff", "", 400, "invalid_identity"},
		{"resume for a long user", "POST", "/calls/big_1/resume", `{"action":"skip","identity":{"user":"` + huge + `"}}`, 400, "invalid_identity"},
		{"status of a bad call id", "GET", "/calls/a%20b?user=u_1", "", 404, "unknown_call"},
		{"nothing recorded for the 40,000-byte call", "GET", "/calls/big_1?user=u_1", "", 404, "unknown_call"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := send(t, tc, c.method, base+c.path, "application/json", c.body)
			if status != c.status || errCode(body) != c.code {
				t.Errorf("%d %.300s, want %d %s", status, body, c.status, c.code)
			}
		})
	}
	if rec.count() != before {
		t.Fatal("refused calls reached the upstream")
	}

	// The bounds are inclusive; that call is recorded.
	status, body := send(t, tc, "POST", base+"/tools/md", "application/json",
		`{"input":{},"callId":"`+strings.Repeat("c", 128)+`","identity":{"user":"`+longest+`","install":"`+strings.Repeat("i", 256)+`"}}`)
	if status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Fatalf("a call at the bounds: %d %s", status, body)
	}

	// A restart: another config releases the ledger, then the same one
	// opens it again and finds the call.
	tc.InitServer(testGlobals(dataDir(t))+"http://127.0.0.1:9080 {\n\tbind 127.0.0.1\n\trespond \"away\" 200\n}\n", "caddyfile")
	tc.InitServer(cfg, "caddyfile")
	status, a := getCall(t, tc, "/calls/"+strings.Repeat("c", 128)+"?user="+longest+"&install="+strings.Repeat("i", 256))
	if status != 200 || a.Status != "done" || a.Content != "saved" {
		t.Errorf("after a restart: %d %+v", status, a)
	}
}

// TestContentTypeEveryMode: POST bodies must be application/json with
// callers and on the page endpoints too, not only in loopback mode.
func TestContentTypeEveryMode(t *testing.T) {
	tc := startPages(t)
	tok := pageToken(t, "u_1", "th_1")
	for _, c := range []struct{ path, body string }{
		{"/client/calls/c1/result", `{"result":1}`},
		{"/client/calls/c1/claim", `{}`},
		{"/page-context", `{"items":[]}`},
	} {
		if status, _, _ := pagePost(t, tc, tok, c.path, ""); status == http.StatusUnsupportedMediaType {
			t.Errorf("%s without a body: 415", c.path)
		}
		status, body := send(t, tc, "POST", base+c.path, "text/plain", c.body, "Authorization", "Bearer "+tok, "Origin", pageOrigin)
		if status != http.StatusUnsupportedMediaType || errCode(body) != "unsupported_media_type" {
			t.Errorf("%s as text/plain: %d %s, want 415", c.path, status, body)
		}
	}

	rec := newRecorder(t)
	p := newPlatform(t, "k1")
	tc = caddytest.NewTester(t)
	tc.InitServer(callersConfig(t, rec.srv.URL, p.srv.URL), "caddyfile")
	before := rec.count()
	status, body := send(t, tc, "POST", base+"/tools/open", "text/plain", `{"input":{}}`, "Authorization", "Bearer "+p.token(t, "k1", goodClaims("u_7", "user")))
	if status != http.StatusUnsupportedMediaType || errCode(body) != "unsupported_media_type" || rec.count() != before {
		t.Errorf("callers, text/plain: %d %s", status, body)
	}
}

// TestCallerTokenIdentityBounds: a verified token whose user or install
// claim breaks the identity bounds is refused as a bad token (401), on
// the Tools API and on MCP, and nothing is sent.
func TestCallerTokenIdentityBounds(t *testing.T) {
	rec := newRecorder(t)
	p := newPlatform(t, "k1")
	tc := caddytest.NewTester(t)
	tc.InitServer(callersConfig(t, rec.srv.URL, p.srv.URL), "caddyfile")
	before := rec.count()
	long := goodClaims(strings.Repeat("u", 257), "user")
	ctl := goodClaims("u_7", "user")
	ctl["install"] = "in\x1fu_8"
	for name, claims := range map[string]jwt.MapClaims{"long sub": long, "control character in install": ctl} {
		tok := p.token(t, "k1", claims)
		status, body := send(t, tc, "POST", base+"/tools/open", "application/json", `{"input":{}}`, "Authorization", "Bearer "+tok)
		if status != 401 || errCode(body) != "invalid_token" {
			t.Errorf("%s: %d %s, want 401 invalid_token", name, status, body)
		}
		status, body = send(t, tc, "POST", base+"/mcp", "application/json", mcpInit,
			"Authorization", "Bearer "+tok, "Accept", "application/json, text/event-stream")
		if status != 401 {
			t.Errorf("%s over MCP: %d %s, want 401", name, status, body)
		}
	}
	if rec.count() != before {
		t.Error("a refused token reached the upstream")
	}
	// The same token with a good identity works.
	status, body := send(t, tc, "POST", base+"/tools/open", "application/json", `{"input":{}}`, "Authorization", "Bearer "+p.token(t, "k1", goodClaims("u_7", "user")))
	if status != 200 {
		t.Errorf("good token: %d %s", status, body)
	}
}

// TestMCPIdentityAndCallIDBounds: over MCP, a _meta identity or call id
// that breaks the gateway's bounds is a protocol error, and nothing is
// sent or recorded.
func TestMCPIdentityAndCallIDBounds(t *testing.T) {
	_, rec := startMCPGateway(t)
	cs := mcpClient{}.session(t)
	before := rec.count()
	for name, meta := range map[string]mcp.Meta{
		"40,000-byte user":       {"toolgate/identity": map[string]any{"user": strings.Repeat("u", 40000)}},
		"control character":      {"toolgate/identity": map[string]any{"user": "u_1\x1fin_2"}},
		"257-byte install":       {"toolgate/identity": map[string]any{"user": "u_1", "install": strings.Repeat("i", 257)}},
		"identity not an object": {"toolgate/identity": "u_1"},
		"user not a string":      {"toolgate/identity": map[string]any{"user": 7}},
		"call id with a slash":   withMeta(u1(), "toolgate/callId", "a/b"),
		"call id ..":             withMeta(u1(), "toolgate/callId", ".."),
		"call id of 129 bytes":   withMeta(u1(), "toolgate/callId", strings.Repeat("c", 129)),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: meta})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "_meta") {
			t.Errorf("%s: %v %.200s, want a protocol error naming _meta", name, err, dump(res))
		}
	}
	if n := rec.count() - before; n != 0 {
		t.Errorf("refused calls reached the upstream %d times", n)
	}
	// At the bounds, the call runs.
	res := callTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{},
		Meta: mcp.Meta{"toolgate/identity": map[string]any{"user": strings.Repeat("u", 256)}, "toolgate/callId": strings.Repeat("c", 128)}})
	if res.IsError || modelText(t, res) != "saved" {
		t.Errorf("at the bounds: %.300s", dump(res))
	}
}

// The pages origins are checked once, at load (setupLoopback), as
// scheme://host[:port] and nothing else.

func TestAllowedHostsCaddyfile(t *testing.T) {
	// The old name is a config error that says what to use.
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("toolgate {\n\tmcp_allowed_hosts tools.example.com\n}"))
	if err == nil || !strings.Contains(err.Error(), "use allowed_hosts") {
		t.Errorf("mcp_allowed_hosts: %v", err)
	}
	h = Handler{}
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("toolgate {\n\tallowed_hosts a.example b.example:8080\n\tallowed_hosts c.example\n}")); err != nil ||
		strings.Join(h.AllowedHosts, " ") != "a.example b.example:8080 c.example" {
		t.Errorf("allowed_hosts: %v %v", h.AllowedHosts, err)
	}
}

// caddyClient reads the client Caddy determined, and whether it came
// through a trusted proxy; outside a Caddy server, the peer.
func TestCaddyClient(t *testing.T) {
	r := httptest.NewRequest("GET", "/tools", nil)
	r.RemoteAddr = "10.0.0.1:5000"
	if ip, trusted := caddyClient(r); ip.String() != "10.0.0.1" || trusted {
		t.Errorf("no vars: %v %v, want the peer, untrusted", ip, trusted)
	}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{
		caddyhttp.TrustedProxyVarKey: true,
		caddyhttp.ClientIPVarKey:     "203.0.113.9",
	}))
	if ip, trusted := caddyClient(r); ip.String() != "203.0.113.9" || !trusted {
		t.Errorf("vars: %v %v, want Caddy's client, trusted", ip, trusted)
	}
}
