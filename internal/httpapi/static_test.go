package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/web"
)

// serve runs one request through the API in process.
func serve(api *API, method, target, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, r)
	return w
}

// The playground runs tools with whatever a runtime caller may do: in
// loopback mode it is served only by the loopback rules, and never framed.
func TestPlaygroundLoopback(t *testing.T) {
	api := newTestAPI(t, Config{})
	w := serve(api, "GET", "http://127.0.0.1:8080/playground", "127.0.0.1:5000")
	csp := w.Header().Get("Content-Security-Policy")
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
		w.Body.String() != string(web.Files["playground.html"].Body) {
		t.Fatalf("playground: %d %v", w.Code, w.Header())
	}
	for _, want := range []string{"script-src 'self';", "frame-ancestors 'none'", "default-src 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Errorf("Content-Security-Policy %q lets other script run", csp)
	}
	if w.Header().Get("X-Frame-Options") != "DENY" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("playground headers %v", w.Header())
	}

	for _, c := range []struct {
		name, target, remote string
		header               []string
	}{
		{"another machine", "http://127.0.0.1:8080/playground", "10.1.2.3:5000", nil},
		{"through a proxy", "http://127.0.0.1:8080/playground", "127.0.0.1:5000", []string{"X-Forwarded-For", "10.1.2.3"}},
		{"a rebound name", "http://evil.test:8080/playground", "127.0.0.1:5000", nil},
		{"another site", "http://127.0.0.1:8080/playground", "127.0.0.1:5000", []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		w := serve(api, "GET", c.target, c.remote, c.header...)
		if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "<") ||
			!strings.HasPrefix(w.Body.String(), "toolgate playground: ") {
			t.Errorf("%s: %d %q", c.name, w.Code, w.Body)
		}
	}
	if w := serve(api, "POST", "http://127.0.0.1:8080/playground", "127.0.0.1:5000"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /playground: %d", w.Code)
	}
}

// With callers, the playground is a static page for anyone: every call it
// makes needs a caller token, which the page does not have.
func TestPlaygroundCallers(t *testing.T) {
	callers, _, err := NewAuthenticators(&TokenConfig{Secret: "caller-secret-0123456789-abcdefghij-klm", Issuer: "https://runtime.test", Audience: "toolgate"}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, Config{Callers: callers})
	w := serve(api, "GET", "http://gw.example/playground", "10.1.2.3:5000")
	if w.Code != 200 || !strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("playground with callers: %d %v", w.Code, w.Header())
	}
	if w := serve(api, "GET", "http://gw.example/tools", "10.1.2.3:5000"); w.Code != http.StatusUnauthorized {
		t.Errorf("tools without a token: %d", w.Code)
	}
}

// The modules are code for any page: served with their entity tags, and
// CORS for the page origins, as client.js is.
func TestScripts(t *testing.T) {
	_, pages, err := NewAuthenticators(nil, &TokenConfig{Secret: apitest.PageSecret, Audience: "toolgate-pages"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, Config{Pages: pages, PageOrigins: []string{apitest.PageOrigin}})
	for _, name := range []string{"client.js", "card.js", "marked.js"} {
		f := web.Files[name]
		w := serve(api, "GET", "http://127.0.0.1/"+name, "10.1.2.3:5000", "Origin", apitest.PageOrigin)
		if w.Code != 200 || w.Body.String() != string(f.Body) || w.Header().Get("ETag") != f.ETag ||
			w.Header().Get("Content-Type") != "text/javascript; charset=utf-8" ||
			w.Header().Get("Access-Control-Allow-Origin") != apitest.PageOrigin ||
			w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", name, w.Code, w.Header())
		}
		if w := serve(api, "GET", "http://127.0.0.1/"+name, "10.1.2.3:5000", "If-None-Match", f.ETag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Errorf("%s revalidated: %d", name, w.Code)
		}
		if w := serve(api, "GET", "http://127.0.0.1/"+name, "10.1.2.3:5000", "Origin", "http://evil.test"); w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s from another origin: ACAO %q", name, w.Header().Get("Access-Control-Allow-Origin"))
		}
	}
	// Only the embedded files: a name beside them is not the API's.
	r := httptest.NewRequest("GET", "http://127.0.0.1/web.go", nil)
	if api.Serve(httptest.NewRecorder(), r) {
		t.Error("GET /web.go was served")
	}
}

// <toolgate-card> on a page origin polls and resumes the call it shows,
// with a caller token: with callers, those two paths answer CORS for the
// page origins, and only for them.
func TestCallsCORS(t *testing.T) {
	callers, pages, err := NewAuthenticators(&TokenConfig{Secret: "calls-cors-caller-secret-0123456789abcdef", Issuer: "https://runtime.test", Audience: "toolgate"},
		&TokenConfig{Secret: apitest.PageSecret, Audience: "toolgate-pages"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, Config{Callers: callers, Pages: pages, PageOrigins: []string{apitest.PageOrigin}})
	const local = "127.0.0.1:5000"
	w := serve(api, "OPTIONS", "http://127.0.0.1/calls/c1/resume", local, "Origin", apitest.PageOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != apitest.PageOrigin ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("resume preflight: %d %v", w.Code, w.Header())
	}
	// The answer, here "no token", is readable by the page.
	w = serve(api, "GET", "http://127.0.0.1/calls/c1", local, "Origin", apitest.PageOrigin)
	if w.Code != 401 || w.Header().Get("Access-Control-Allow-Origin") != apitest.PageOrigin {
		t.Errorf("status from the page origin: %d %v", w.Code, w.Header())
	}
	for _, c := range []struct{ method, target string }{
		{"OPTIONS", "http://127.0.0.1/calls/c1/resume"},
		{"OPTIONS", "http://127.0.0.1/calls/c1"},
		{"GET", "http://127.0.0.1/calls/c1?user=u_1"},
	} {
		w := serve(api, c.method, c.target, local, "Origin", "http://evil.test", "Access-Control-Request-Method", "POST")
		if w.Header().Get("Access-Control-Allow-Origin") != "" || w.Code == 204 {
			t.Errorf("%s %s from another origin: %d %v", c.method, c.target, w.Code, w.Header())
		}
	}
	// The invoke path stays without CORS: a page origin's script cannot
	// read what a tool answers.
	w = serve(api, "OPTIONS", "http://127.0.0.1/tools/save", local, "Origin", apitest.PageOrigin, "Access-Control-Request-Method", "POST")
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("invoke preflight: %v", w.Header())
	}
}

// TestCallsCORSLoopback: without callers the envelope names any user, so
// a page origin gets no CORS on a call's status or resume: its scripts can
// neither read another user's call nor send the JSON resume (the browser
// sends no POST whose preflight failed), and the GET itself is refused.
// The page endpoints keep theirs: they need a page token.
func TestCallsCORSLoopback(t *testing.T) {
	_, pages, err := NewAuthenticators(nil, &TokenConfig{Secret: apitest.PageSecret, Audience: "toolgate-pages"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, Config{Pages: pages, PageOrigins: []string{apitest.PageOrigin}})
	const local = "127.0.0.1:5000"
	for _, c := range []struct{ method, target string }{
		{"OPTIONS", "http://127.0.0.1/calls/c1/resume"},
		{"OPTIONS", "http://127.0.0.1/calls/c1"},
		{"GET", "http://127.0.0.1/calls/c1?user=u_1"},
		{"POST", "http://127.0.0.1/calls/c1/resume?user=u_1"},
	} {
		w := serve(api, c.method, c.target, local, "Origin", apitest.PageOrigin, "Access-Control-Request-Method", "POST")
		if w.Header().Get("Access-Control-Allow-Origin") != "" || w.Code == 204 {
			t.Errorf("%s %s from a page origin: %d %v", c.method, c.target, w.Code, w.Header())
		}
		if c.method != "OPTIONS" && w.Code != 403 {
			t.Errorf("%s %s from a page origin: %d, want 403", c.method, c.target, w.Code)
		}
	}
	w := serve(api, "OPTIONS", "http://127.0.0.1/client/calls/c1/claim", local, "Origin", apitest.PageOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != apitest.PageOrigin {
		t.Errorf("claim preflight: %d %v", w.Code, w.Header())
	}
}
