package caddymodule

import (
	"context"
	"crypto/tls"
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

// TestLoopbackRefusal: without callers, a runtime request is served only
// when it comes straight from this machine, names this machine, and comes
// from no other web origin than the site's own or a pages origin.
func TestLoopbackRefusal(t *testing.T) {
	h := &Handler{
		AllowedHosts: []string{"tools.internal", "gw.example:8443"},
		Pages:        &Pages{Origins: []string{"https://app.example.com", "http://127.0.0.1:9001/"}},
	}
	if err := h.setupLoopback(); err != nil {
		t.Fatal(err)
	}
	type vars struct {
		trusted  bool
		clientIP string
	}
	for _, c := range []struct {
		name   string
		remote string
		vars   *vars // Caddy's, when the request went through a Caddy server
		host   string
		tls    bool
		header []string
		refuse string // a part of the refusal; "" to accept
	}{
		{name: "loopback", remote: "127.0.0.1:5000"},
		{name: "loopback 127/8", remote: "127.0.0.2:5000"},
		{name: "IPv6 loopback", remote: "[::1]:5000", host: "[::1]:9080"},
		{name: "IPv4-mapped loopback", remote: "[::ffff:127.0.0.1]:5000"},
		{name: "LAN peer", remote: "10.1.2.3:5000", refuse: "10.1.2.3 is not a loopback address"},
		{name: "public IPv6 peer", remote: "[2001:db8::1]:5000", refuse: "not a loopback address"},
		{name: "unix socket", remote: "@", refuse: "not a loopback address"},
		{name: "Caddy's client IP is the peer", remote: "127.0.0.1:5000", vars: &vars{false, "127.0.0.1"}},
		{name: "trusted proxy for an internet client", remote: "127.0.0.1:5000", vars: &vars{true, "203.0.113.9"},
			header: []string{"X-Forwarded-For", "203.0.113.9"}, refuse: "203.0.113.9 is not a loopback address"},
		{name: "trusted proxy for a local client", remote: "127.0.0.1:5000", vars: &vars{true, "127.0.0.1"},
			header: []string{"X-Forwarded-For", "127.0.0.1"}},
		{name: "X-Forwarded-For from an untrusted peer", remote: "127.0.0.1:5000", vars: &vars{false, "127.0.0.1"},
			header: []string{"X-Forwarded-For", "127.0.0.1"}, refuse: "X-Forwarded-For"},
		{name: "Forwarded", remote: "127.0.0.1:5000", header: []string{"Forwarded", "for=127.0.0.1"}, refuse: "Forwarded"},
		{name: "X-Real-IP", remote: "127.0.0.1:5000", header: []string{"X-Real-IP", "127.0.0.1"}, refuse: "X-Real-Ip"},
		{name: "X-Forwarded-Host", remote: "127.0.0.1:5000", header: []string{"X-Forwarded-Host", "evil.example"}, refuse: "X-Forwarded-Host"},
		{name: "Via", remote: "127.0.0.1:5000", header: []string{"Via", "1.1 proxy"}, refuse: "Via"},
		{name: "empty X-Forwarded-For", remote: "127.0.0.1:5000", header: []string{"X-Forwarded-For", ""}, refuse: "X-Forwarded-For"},

		{name: "Host localhost", remote: "127.0.0.1:5000", host: "localhost:9080"},
		{name: "Host LOCALHOST", remote: "127.0.0.1:5000", host: "LOCALHOST"},
		{name: "Host [::1]", remote: "127.0.0.1:5000", host: "[::1]"},
		{name: "foreign Host", remote: "127.0.0.1:5000", host: "evil.example", refuse: "allowed_hosts"},
		{name: "foreign Host and port", remote: "127.0.0.1:5000", host: "evil.example:9080", refuse: "allowed_hosts"},
		{name: "localhost as a subdomain", remote: "127.0.0.1:5000", host: "localhost.evil.example", refuse: "allowed_hosts"},
		{name: "loopback IP as a subdomain", remote: "127.0.0.1:5000", host: "127.0.0.1.nip.io:9080", refuse: "allowed_hosts"},
		{name: "no Host", remote: "127.0.0.1:5000", host: "-", refuse: "allowed_hosts"},
		{name: "allowed host, any port", remote: "127.0.0.1:5000", host: "tools.internal:9080"},
		{name: "allowed host, other case", remote: "127.0.0.1:5000", host: "Tools.Internal"},
		{name: "allowed host:port", remote: "127.0.0.1:5000", host: "gw.example:8443"},
		{name: "allowed host, another port", remote: "127.0.0.1:5000", host: "gw.example:9999", refuse: "allowed_hosts"},

		{name: "own origin", remote: "127.0.0.1:5000", host: "127.0.0.1:9080", header: []string{"Origin", "http://127.0.0.1:9080"}},
		{name: "own origin, default port", remote: "127.0.0.1:5000", host: "127.0.0.1", header: []string{"Origin", "http://127.0.0.1:80"}},
		{name: "own origin over TLS", remote: "127.0.0.1:5000", host: "localhost", tls: true, header: []string{"Origin", "https://localhost"}},
		{name: "own host over another scheme", remote: "127.0.0.1:5000", host: "localhost", tls: true, header: []string{"Origin", "http://localhost"}, refuse: "another web origin"},
		{name: "own host, another port", remote: "127.0.0.1:5000", host: "127.0.0.1:9080", header: []string{"Origin", "http://127.0.0.1:3000"}, refuse: "another web origin"},
		{name: "localhost page to 127.0.0.1", remote: "127.0.0.1:5000", host: "127.0.0.1:9080", header: []string{"Origin", "http://localhost:9080"}, refuse: "another web origin"},
		{name: "evil origin", remote: "127.0.0.1:5000", header: []string{"Origin", "https://evil.example"}, refuse: `"https://evil.example" is another web origin`},
		{name: "null origin", remote: "127.0.0.1:5000", header: []string{"Origin", "null"}, refuse: "another web origin"},
		{name: "pages origin", remote: "127.0.0.1:5000", header: []string{"Origin", "https://app.example.com", "Sec-Fetch-Site", "cross-site"}},
		{name: "pages origin, explicit port and case", remote: "127.0.0.1:5000", header: []string{"Origin", "HTTPS://App.Example.com:443"}},
		{name: "pages origin from a trailing-slash config", remote: "127.0.0.1:5000", header: []string{"Origin", "http://127.0.0.1:9001"}},
		{name: "pages host over http", remote: "127.0.0.1:5000", header: []string{"Origin", "http://app.example.com"}, refuse: "another web origin"},
		{name: "cross-site without Origin", remote: "127.0.0.1:5000", header: []string{"Sec-Fetch-Site", "cross-site"}, refuse: "Sec-Fetch-Site: cross-site"},
		{name: "same-site without Origin", remote: "127.0.0.1:5000", header: []string{"Sec-Fetch-Site", "same-site"}},
		{name: "typed in the address bar", remote: "127.0.0.1:5000", header: []string{"Sec-Fetch-Site", "none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/tools", nil)
			r.RemoteAddr = c.remote
			switch c.host {
			case "":
				r.Host = "127.0.0.1:9080"
			case "-":
				r.Host = ""
			default:
				r.Host = c.host
			}
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for i := 0; i+1 < len(c.header); i += 2 {
				r.Header.Set(c.header[i], c.header[i+1])
			}
			if c.vars != nil {
				r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{
					caddyhttp.TrustedProxyVarKey: c.vars.trusted,
					caddyhttp.ClientIPVarKey:     c.vars.clientIP,
				}))
			}
			got := h.loopbackRefusal(r)
			if c.refuse == "" && got != "" {
				t.Errorf("refused: %s", got)
			}
			if c.refuse != "" && !strings.Contains(got, c.refuse) {
				t.Errorf("got %q, want a refusal naming %q", got, c.refuse)
			}
		})
	}
}

func TestRequireJSON(t *testing.T) {
	for _, c := range []struct {
		method, ctype, body string
		ok                  bool
	}{
		{"POST", "application/json", "{}", true},
		{"POST", "application/json; charset=utf-8", "{}", true},
		{"POST", "Application/JSON", "{}", true},
		{"POST", "", "", true}, // no body: nothing to declare
		{"POST", "", "{}", false},
		{"POST", "text/plain", "{}", false},
		{"POST", "text/plain; charset=application/json", "{}", false},
		{"POST", "application/x-www-form-urlencoded", "a=1", false},
		{"POST", "multipart/form-data; boundary=x", "--x--", false},
		{"POST", "application/json-patch+json", "[]", false},
		{"POST", "application/jsonx", "{}", false},
		{"POST", "application/json;", "{}", true}, // an empty parameter list parses
		{"GET", "text/plain", "x", true},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := httptest.NewRequest(c.method, "/tools/x", body)
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		w := httptest.NewRecorder()
		if got := requireJSON(w, r); got != c.ok {
			t.Errorf("%s %q with body %q: %v, want %v", c.method, c.ctype, c.body, got, c.ok)
		}
		if !c.ok && (w.Code != http.StatusUnsupportedMediaType || errCode(w.Body.String()) != "unsupported_media_type") {
			t.Errorf("%s %q: %d %s, want 415 unsupported_media_type", c.method, c.ctype, w.Code, w.Body)
		}
	}
}

func TestAllowedHostsConfig(t *testing.T) {
	for _, bad := range []string{"", "https://tools.example.com", "tools.example.com/x", "*.example.com", "a b", "user@host", "host?x"} {
		h := &Handler{AllowedHosts: []string{bad}}
		if err := h.setupLoopback(); err == nil || !strings.Contains(err.Error(), "allowed_hosts") {
			t.Errorf("allowed_hosts %q: %v, want an error naming allowed_hosts", bad, err)
		}
	}
	for _, good := range []string{"tools.example.com", "tools.example.com:8443", "[::1]:9080", "10.0.0.5"} {
		h := &Handler{AllowedHosts: []string{good}}
		if err := h.setupLoopback(); err != nil {
			t.Errorf("allowed_hosts %q: %v", good, err)
		}
	}

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
func TestPagesOriginsAtLoad(t *testing.T) {
	for _, c := range []struct {
		origin string
		ok     bool
	}{
		{"https://app.example.com", true},
		{"https://app.example.com/", true},
		{"http://127.0.0.1:9001", true},
		{"ftp://app.example.com", false},
		{"https://app.example.com/page", false},
		{"https://app.example.com?x=1", false},
		{"https://user@app.example.com", false},
		{"https://app.example.com#top", false},
		{"app.example.com", false},
		{"null", false},
	} {
		h := &Handler{Pages: &Pages{Origins: []string{c.origin}}}
		err := h.setupLoopback()
		if (err == nil) != c.ok {
			t.Errorf("origin %q: %v, want ok=%v", c.origin, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "must be scheme://host[:port]") {
			t.Errorf("origin %q: %v does not say the rule", c.origin, err)
		}
	}
}
