package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const testPublic = "http://127.0.0.1:8080/app"

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(newApp(testPublic + "/").routes())
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status      int
	contentType string
	body        string
}

func do(t *testing.T, srv *httptest.Server, method, path, body string, header http.Header) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// decodeStrict decodes a JSON object and fails on any key outside want.
func decodeStrict(t *testing.T, a answer, want ...string) map[string]string {
	t.Helper()
	if a.contentType != "application/json" {
		t.Fatalf("content type %q, want application/json (body %s)", a.contentType, a.body)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(a.body), &m); err != nil {
		t.Fatalf("body %s: %v", a.body, err)
	}
	for k := range m {
		if !slices.Contains(want, k) {
			t.Errorf("unexpected key %q in %s", k, a.body)
		}
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("missing key %q in %s", k, a.body)
		}
	}
	return m
}

func save(t *testing.T, srv *httptest.Server, body string) map[string]string {
	t.Helper()
	a := do(t, srv, "POST", "/bookmarks", body, nil)
	if a.status != http.StatusCreated {
		t.Fatalf("save %s: status %d, body %s", body, a.status, a.body)
	}
	return decodeStrict(t, a, "content", "markdown")
}

func TestSave(t *testing.T) {
	srv := newTestServer(t)
	m := save(t, srv, `{"url":"https://go.dev","title":"Go","tags":["lang"]}`)
	if want := "Saved bookmark b1: Go (https://go.dev)"; m["content"] != want {
		t.Errorf("content %q, want %q", m["content"], want)
	}
	if want := "Saved **[Go](https://go.dev)**"; m["markdown"] != want {
		t.Errorf("markdown %q, want %q", m["markdown"], want)
	}
	m = save(t, srv, `{"url":"https://caddyserver.com","title":"Caddy"}`)
	if !strings.HasPrefix(m["content"], "Saved bookmark b2: ") {
		t.Errorf("second bookmark: content %q, want id b2", m["content"])
	}
}

func TestSaveInvalid(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not json", `{`, "JSON object"},
		{"unknown field", `{"url":"https://go.dev","title":"Go","x":1}`, "unknown field"},
		{"no url", `{"title":"Go"}`, "url is required"},
		{"relative url", `{"url":"/docs","title":"Go"}`, "absolute http(s) URL"},
		{"javascript url", `{"url":"javascript:alert(1)","title":"Go"}`, "absolute http(s) URL"},
		{"no title", `{"url":"https://go.dev"}`, "title is required"},
		{"blank title", `{"url":"https://go.dev","title":"  "}`, "title is required"},
	}
	srv := newTestServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, srv, "POST", "/bookmarks", tt.body, nil)
			if a.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 (body %s)", a.status, a.body)
			}
			m := decodeStrict(t, a, "code", "error")
			if m["code"] != "invalid" || !strings.Contains(m["error"], tt.want) {
				t.Errorf("got %s, want code invalid and error holding %q", a.body, tt.want)
			}
		})
	}
	if a := do(t, srv, "GET", "/bookmarks", "", nil); a.body != "No bookmarks." {
		t.Errorf("an invalid save stored something: %q", a.body)
	}
}

func TestList(t *testing.T) {
	srv := newTestServer(t)
	a := do(t, srv, "GET", "/bookmarks", "", nil)
	if a.status != http.StatusOK || a.contentType != "text/plain; charset=utf-8" || a.body != "No bookmarks." {
		t.Fatalf("empty list: %d %q %q", a.status, a.contentType, a.body)
	}
	// More than nine, so the order must be numeric, not by string.
	for i := 0; i < 11; i++ {
		tags := `["odd"]`
		if i%2 == 1 {
			tags = `["even"]`
		}
		save(t, srv, `{"url":"https://example.com/`+string(rune('a'+i))+`","title":"T`+string(rune('a'+i))+`","tags":`+tags+`}`)
	}
	a = do(t, srv, "GET", "/bookmarks", "", nil)
	lines := strings.Split(strings.TrimSuffix(a.body, "\n"), "\n")
	if len(lines) != 11 || lines[0] != "b1 Ta https://example.com/a" || lines[10] != "b11 Tk https://example.com/k" {
		t.Errorf("list:\n%s", a.body)
	}
	a = do(t, srv, "GET", "/bookmarks?tag=even", "", nil)
	if want := "b2 Tb https://example.com/b\nb4 Td https://example.com/d\nb6 Tf https://example.com/f\nb8 Th https://example.com/h\nb10 Tj https://example.com/j\n"; a.body != want {
		t.Errorf("tag=even:\n%s\nwant:\n%s", a.body, want)
	}
	a = do(t, srv, "GET", "/bookmarks?tag=none", "", nil)
	if a.status != http.StatusOK || a.body != "No bookmarks." {
		t.Errorf("unknown tag: %d %q", a.status, a.body)
	}
}

func TestShow(t *testing.T) {
	srv := newTestServer(t)
	save(t, srv, `{"url":"https://go.dev","title":"Go","tags":["lang","google"]}`)
	a := do(t, srv, "GET", "/bookmarks/b1", "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	m := decodeStrict(t, a, "content", "embedUrl")
	if want := "b1: Go (https://go.dev), tags: lang, google"; m["content"] != want {
		t.Errorf("content %q, want %q", m["content"], want)
	}
	if want := testPublic + "/bookmarks/b1/card"; m["embedUrl"] != want {
		t.Errorf("embedUrl %q, want %q", m["embedUrl"], want)
	}
}

func TestNotFound(t *testing.T) {
	srv := newTestServer(t)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/bookmarks/b9"},
		{"DELETE", "/bookmarks/b9"},
		{"GET", "/bookmarks/b9/card"},
	} {
		a := do(t, srv, tt.method, tt.path, "", nil)
		if a.status != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404", tt.method, tt.path, a.status)
			continue
		}
		m := decodeStrict(t, a, "code", "error")
		if m["code"] != "not_found" || m["error"] != "no bookmark b9" {
			t.Errorf("%s %s: %s", tt.method, tt.path, a.body)
		}
	}
}

func TestDelete(t *testing.T) {
	srv := newTestServer(t)
	save(t, srv, `{"url":"https://go.dev","title":"Go"}`)
	a := do(t, srv, "DELETE", "/bookmarks/b1", "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	if m := decodeStrict(t, a, "content"); m["content"] != "Deleted b1." {
		t.Errorf("content %q", m["content"])
	}
	if a := do(t, srv, "DELETE", "/bookmarks/b1", "", nil); a.status != http.StatusNotFound {
		t.Errorf("second delete: status %d, want 404", a.status)
	}
	if a := do(t, srv, "GET", "/bookmarks", "", nil); a.body != "No bookmarks." {
		t.Errorf("list after delete: %q", a.body)
	}
}

func TestCard(t *testing.T) {
	srv := newTestServer(t)
	save(t, srv, `{"url":"https://example.com/?a=1&b=2","title":"<script>alert(1)</script>","tags":["x<y"]}`)
	a := do(t, srv, "GET", "/bookmarks/b1/card", "", nil)
	if a.status != http.StatusOK || a.contentType != "text/html; charset=utf-8" {
		t.Fatalf("card: %d %q", a.status, a.contentType)
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		`href="https://example.com/?a=1&amp;b=2"`,
		"x&lt;y",
		"__kazzle_height: document.documentElement.scrollHeight",
		"window.parent.postMessage",
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("card does not hold %q:\n%s", want, a.body)
		}
	}
	if strings.Contains(a.body, "<script>alert(1)") {
		t.Errorf("card holds the title unescaped:\n%s", a.body)
	}
}

func TestWhoami(t *testing.T) {
	srv := newTestServer(t)
	enc := base64.RawURLEncoding.EncodeToString
	token := enc([]byte(`{"alg":"EdDSA","typ":"JWT"}`)) + "." +
		enc([]byte(`{"sub":"u_1","install":"in_1","iss":"toolgate","aud":["bookmarks"],"exp":1700000000}`)) + ".sig"

	a := do(t, srv, "GET", "/whoami", "", http.Header{
		"Authorization":       {"Bearer " + token},
		"Kazzle-Tool-Context": {`{"source":"api"}`},
	})
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	m := decodeStrict(t, a, "content")
	for _, want := range []string{
		"not verified",
		"user (sub): u_1",
		"install: in_1",
		"aud: bookmarks",
		"exp: 2023-11-14T22:13:20Z",
		`Kazzle-Tool-Context: {"source":"api"}`,
	} {
		if !strings.Contains(m["content"], want) {
			t.Errorf("content does not hold %q:\n%s", want, m["content"])
		}
	}

	a = do(t, srv, "GET", "/whoami", "", nil)
	m = decodeStrict(t, a, "content")
	if !strings.Contains(m["content"], "No Authorization header") || !strings.Contains(m["content"], "No Kazzle-Tool-Context header") {
		t.Errorf("no headers:\n%s", m["content"])
	}

	a = do(t, srv, "GET", "/whoami", "", http.Header{"Authorization": {"Bearer not-a-jwt"}})
	if m = decodeStrict(t, a, "content"); !strings.Contains(m["content"], "does not decode") {
		t.Errorf("bad token:\n%s", m["content"])
	}
}

func TestPing(t *testing.T) {
	srv := newTestServer(t)
	a := do(t, srv, "GET", "/ping", "", nil)
	if a.status != http.StatusOK || a.contentType != "text/plain; charset=utf-8" || a.body != "pong" {
		t.Errorf("ping: %d %q %q", a.status, a.contentType, a.body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	srv := newTestServer(t)
	if a := do(t, srv, "PUT", "/bookmarks", `{}`, nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT /bookmarks: status %d, want 405", a.status)
	}
}
