package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
)

// loopbackConfig is mcpConfig on any Host (the gateway's own check is what
// refuses foreign ones), with a pages origin, and a second site on :9081
// that reverse-proxies to it, as a proxy on the same machine would.
// globals go into the global options block.
func loopbackConfig(t *testing.T, upstream string, globals []string, extra ...string) string {
	t.Helper()
	dir := dataDir(t)
	extra = append([]string{"pages {\nsecret " + apitest.PageSecret + "\norigins https://app.example.com\n}"}, extra...)
	cfg := mcpConfig(t, upstream, dir, extra...)
	out := strings.Replace(cfg, testGlobals(dir), testGlobals(dir, globals...), 1)
	out = strings.Replace(out, "http://127.0.0.1:9080 {", "http://:9080 {", 1)
	if out == cfg {
		t.Fatal("loopbackConfig: nothing replaced")
	}
	return out + "http://:9081 {\n\tbind 127.0.0.1\n\treverse_proxy 127.0.0.1:9080\n}\n"
}

const mcpInit = apitest.MCPInitialize

// TestLoopbackThroughProxy: a proxy on the same machine made every caller
// loopback (a finding in docs/security.md's table of attacks). Caddy's
// reverse_proxy, as a second site, adds X-Forwarded-For, and this server trusts no proxies: each
// runtime endpoint refuses what comes through it, naming trusted_proxies,
// and nothing reaches the upstream; the same request straight to the
// gateway is served. (The rest of the finding is internal/httpapi's
// TestLoopbackFinding.)
func TestLoopbackThroughProxy(t *testing.T) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, loopbackConfig(t, rec.URL, nil))
	const direct, proxied = "http://127.0.0.1:9080/toolgate", "http://127.0.0.1:9081/toolgate"
	envelope := `{"input":{},` + apitest.Who + `}`
	before := rec.Count()

	for _, c := range []struct {
		name, method, url, ctype, body string
		header                         []string
	}{
		{"invoke through a proxy", "POST", proxied + "/tools/md", "application/json", envelope, nil},
		{"tool list through a proxy", "GET", proxied + "/tools", "", "", nil},
		{"call status through a proxy", "GET", proxied + "/calls/c1?user=u_1", "", "", nil},
		{"page context through a proxy", "POST", proxied + "/page-context", "application/json", `{"items":[]}`, nil},
		{"MCP through a proxy", "POST", proxied + "/mcp", "application/json", mcpInit,
			[]string{"Accept", "application/json, text/event-stream"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := client(tc).Send(t, c.method, c.url, c.ctype, c.body, c.header...)
			var e apitest.ErrorBody
			if status != 403 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == "" || !strings.Contains(e.Error.Message, "trusted_proxies") {
				t.Errorf("%d %s, want 403 with a JSON error naming trusted_proxies", status, body)
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Fatalf("refused requests reached the upstream %d times", n)
	}
	if status, body := client(tc).Send(t, "POST", direct+"/tools/md", "application/json", envelope); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Errorf("direct: %d %s", status, body)
	}
}

// TestLoopbackTrustedProxy: trusted_proxies does not make a proxied
// request this machine's. A proxy that appends to X-Forwarded-For passes
// on what its client wrote, and Caddy takes the left-most entry: a client
// on the internet that writes "X-Forwarded-For: 127.0.0.1" would be
// loopback. Without callers every forwarding header is refused, from a
// trusted peer too, and nothing reaches the upstream; the same peer
// calling directly with none is served.
func TestLoopbackTrustedProxy(t *testing.T) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, loopbackConfig(t, rec.URL, []string{"servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}"}))
	envelope := `{"input":{},` + apitest.Who + `}`
	const direct, proxied = "http://127.0.0.1:9080/toolgate/tools/md", "http://127.0.0.1:9081/toolgate/tools/md"

	before := rec.Count()
	for _, c := range []struct {
		name, url string
		header    []string
		want      string
	}{
		// The outer site trusts its peer (this test) too, so it appends
		// to the header it was sent, as nginx's $proxy_add_x_forwarded_for does.
		{"spoofed loopback through an appending proxy", proxied, []string{"X-Forwarded-For", "127.0.0.1"}, "X-Forwarded-For"},
		{"internet client through a trusted proxy", proxied, []string{"X-Forwarded-For", "203.0.113.9"}, "X-Forwarded-For"},
		{"this machine through a trusted proxy", proxied, nil, "X-Forwarded-For"},
		{"loopback named by a trusted peer", direct, []string{"X-Forwarded-For", "127.0.0.1"}, "X-Forwarded-For"},
		{"Forwarded from a trusted peer", direct, []string{"Forwarded", "for=127.0.0.1"}, "Forwarded"},
		{"X-Real-IP from a trusted peer", direct, []string{"X-Real-IP", "127.0.0.1"}, "X-Real-Ip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := client(tc).Send(t, "POST", c.url, "application/json", envelope, c.header...)
			var e apitest.ErrorBody
			if status != 403 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error.Message, c.want) ||
				!strings.Contains(e.Error.Message, "configure callers") {
				t.Errorf("%d %s, want 403 naming %s and callers", status, body, c.want)
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Fatalf("refused requests reached the upstream %d times", n)
	}
	// A trusted proxy's own address, calling directly, is this machine.
	if status, body := client(tc).Send(t, "POST", direct, "application/json", envelope); status != 200 || !strings.Contains(body, `"content":"saved"`) {
		t.Errorf("direct from a trusted address: %d %s", status, body)
	}
}

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
