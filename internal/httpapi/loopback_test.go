package httpapi

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/apitest"
)

// TestLoopbackRefusal: without callers, a runtime request is served only
// when it comes straight from this machine, names this machine, and comes
// from no other web origin than the site's own or a pages origin.
func TestLoopbackRefusal(t *testing.T) {
	l, err := newLoopback([]string{"tools.internal", "gw.example:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		remote string
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
		// Whatever trusted_proxies say: the peer, and no forwarding header.
		{name: "proxy for an internet client", remote: "127.0.0.1:5000",
			header: []string{"X-Forwarded-For", "203.0.113.9"}, refuse: "X-Forwarded-For"},
		{name: "proxy for a spoofed local client", remote: "127.0.0.1:5000",
			header: []string{"X-Forwarded-For", "127.0.0.1, 127.0.0.1"}, refuse: "X-Forwarded-For"},
		{name: "X-Forwarded-For", remote: "127.0.0.1:5000",
			header: []string{"X-Forwarded-For", "127.0.0.1"}, refuse: "X-Forwarded-For"},
		{name: "X-Forwarded-Proto", remote: "127.0.0.1:5000", header: []string{"X-Forwarded-Proto", "https"}, refuse: "X-Forwarded-Proto"},
		{name: "Forwarded", remote: "127.0.0.1:5000", header: []string{"Forwarded", "for=127.0.0.1"}, refuse: "Forwarded"},
		{name: "X-Real-IP", remote: "127.0.0.1:5000", header: []string{"X-Real-IP", "127.0.0.1"}, refuse: "X-Real-Ip"},
		{name: "X-Forwarded-Host", remote: "127.0.0.1:5000", header: []string{"X-Forwarded-Host", "evil.example"}, refuse: "X-Forwarded-Host"},
		{name: "Via", remote: "127.0.0.1:5000", header: []string{"Via", "1.1 proxy"}, refuse: "Via"},
		{name: "empty X-Forwarded-For", remote: "127.0.0.1:5000", header: []string{"X-Forwarded-For", ""}, refuse: "X-Forwarded-For"},

		{name: "Host localhost", remote: "127.0.0.1:5000", host: "localhost:9080"},
		{name: "Host LOCALHOST", remote: "127.0.0.1:5000", host: "LOCALHOST"},
		{name: "Host [::1]", remote: "127.0.0.1:5000", host: "[::1]"},
		{name: "Host with a zone", remote: "127.0.0.1:5000", host: "[::1%25lo]:9080", refuse: "allowed_hosts"},
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
		{name: "own origin, explicit port and case", remote: "127.0.0.1:5000", host: "localhost", tls: true, header: []string{"Origin", "HTTPS://LocalHost:443"}},
		// A page origin reaches the page endpoints only (a page token for
		// one user and thread), never a runtime one.
		{name: "another loopback origin", remote: "127.0.0.1:5000", header: []string{"Origin", "http://127.0.0.1:9001"}, refuse: "pages origins reach the page endpoints only"},
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
			got := l.refusal(r)
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
		if !c.ok && (w.Code != http.StatusUnsupportedMediaType || apitest.ErrCode(w.Body.String()) != "unsupported_media_type") {
			t.Errorf("%s %q: %d %s, want 415 unsupported_media_type", c.method, c.ctype, w.Code, w.Body)
		}
	}
}

func TestAllowedHostsConfig(t *testing.T) {
	for _, bad := range []string{"", "https://tools.example.com", "tools.example.com/x", "*.example.com", "a b", "user@host", "host?x"} {
		if _, err := newLoopback([]string{bad}); err == nil || !strings.Contains(err.Error(), "allowed_hosts") {
			t.Errorf("allowed_hosts %q: %v, want an error naming allowed_hosts", bad, err)
		}
	}
	for _, good := range []string{"tools.example.com", "tools.example.com:8443", "[::1]:9080", "10.0.0.5"} {
		if _, err := newLoopback([]string{good}); err != nil {
			t.Errorf("allowed_hosts %q: %v", good, err)
		}
	}

}

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
		_, err := corsOrigins([]string{c.origin})
		if (err == nil) != c.ok {
			t.Errorf("origin %q: %v, want ok=%v", c.origin, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "must be scheme://host[:port]") {
			t.Errorf("origin %q: %v does not say the rule", c.origin, err)
		}
	}
}
