package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/toolgate/toolgate/apptools"
)

const (
	testPublic = "http://127.0.0.1:8080/app"
	testKid    = "k1"
)

// env is the component behind a stand-in for toolgate: a JWKS server
// publishing one Ed25519 key, and tokens signed with it.
type env struct {
	srv   *httptest.Server
	key   ed25519.PrivateKey
	token string // u_1 at in_1, for this component
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvFor(t, "bookmarks")
}

// newEnvFor is newEnv for a component toolgate names component; its
// tokens are still for the audience bookmarks.
func newEnvFor(t *testing.T, component string) *env {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub),
		"kid": testKid, "alg": "EdDSA", "use": "sig",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	t.Cleanup(keys.Close)

	// As main does: the component's name in toolgate is its tokens' aud.
	v := apptools.NewVerifier(keys.URL+"/.well-known/jwks.json", "toolgate", component)
	srv := httptest.NewServer(newApp(testPublic+"/", component, v).routes())
	t.Cleanup(srv.Close)
	e := &env{srv: srv, key: priv}
	c := claims()
	c["aud"] = component
	e.token = sign(t, priv, c)
	return e
}

// claims are those toolgate signs for u_1 at in_1 calling this component.
func claims() jwt.MapClaims {
	now := time.Now().Unix()
	return jwt.MapClaims{"iss": "toolgate", "sub": "u_1", "install": "in_1", "aud": "bookmarks", "iat": now, "exp": now + 300}
}

func sign(t *testing.T, key ed25519.PrivateKey, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = testKid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type answer struct {
	status      int
	contentType string
	challenge   string // WWW-Authenticate
	body        string
}

// do calls the component as toolgate does, with a good token.
func (e *env) do(t *testing.T, method, path, body string) answer {
	t.Helper()
	return e.send(t, method, path, body, http.Header{"Authorization": {"Bearer " + e.token}})
}

// send calls the component with exactly the given headers.
func (e *env) send(t *testing.T, method, path, body string, header http.Header) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"), string(b)}
}

// decodeStrict decodes a JSON object and fails on any key outside want.
// wantInvalid checks a refusal of the body: 400, code invalid, and an
// error holding want.
func wantInvalid(t *testing.T, a answer, want string) {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 (body %s)", a.status, a.body)
	}
	m := decodeStrict(t, a, "code", "error")
	if m["code"] != "invalid" || !strings.Contains(m["error"], want) {
		t.Errorf("got %s, want code invalid and error holding %q", a.body, want)
	}
}

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

func (e *env) save(t *testing.T, body string) map[string]string {
	t.Helper()
	a := e.do(t, "POST", "/bookmarks", body)
	if a.status != http.StatusCreated {
		t.Fatalf("save %s: status %d, body %s", body, a.status, a.body)
	}
	return decodeStrict(t, a, "content", "markdown")
}

func TestSave(t *testing.T) {
	e := newEnv(t)
	m := e.save(t, `{"url":"https://go.dev","title":"Go","tags":["lang"]}`)
	if want := "Saved bookmark b1: Go (https://go.dev)"; m["content"] != want {
		t.Errorf("content %q, want %q", m["content"], want)
	}
	if want := "Saved **[Go](https://go.dev)**"; m["markdown"] != want {
		t.Errorf("markdown %q, want %q", m["markdown"], want)
	}
	m = e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`)
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
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantInvalid(t, e.do(t, "POST", "/bookmarks", tt.body), tt.want)
		})
	}
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "No bookmarks." {
		t.Errorf("an invalid save stored something: %q", a.body)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t)
	a := e.do(t, "GET", "/bookmarks", "")
	if a.status != http.StatusOK || a.contentType != "text/plain; charset=utf-8" || a.body != "No bookmarks." {
		t.Fatalf("empty list: %d %q %q", a.status, a.contentType, a.body)
	}
	// More than nine, so the order must be numeric, not by string.
	for i := 0; i < 11; i++ {
		tags := `["odd"]`
		if i%2 == 1 {
			tags = `["even"]`
		}
		e.save(t, `{"url":"https://example.com/`+string(rune('a'+i))+`","title":"T`+string(rune('a'+i))+`","tags":`+tags+`}`)
	}
	a = e.do(t, "GET", "/bookmarks", "")
	lines := strings.Split(strings.TrimSuffix(a.body, "\n"), "\n")
	if len(lines) != 11 || lines[0] != "b1 Ta https://example.com/a" || lines[10] != "b11 Tk https://example.com/k" {
		t.Errorf("list:\n%s", a.body)
	}
	a = e.do(t, "GET", "/bookmarks?tag=even", "")
	if want := "b2 Tb https://example.com/b\nb4 Td https://example.com/d\nb6 Tf https://example.com/f\nb8 Th https://example.com/h\nb10 Tj https://example.com/j\n"; a.body != want {
		t.Errorf("tag=even:\n%s\nwant:\n%s", a.body, want)
	}
	a = e.do(t, "GET", "/bookmarks?tag=none", "")
	if a.status != http.StatusOK || a.body != "No bookmarks." {
		t.Errorf("unknown tag: %d %q", a.status, a.body)
	}
}

func TestShow(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go","tags":["lang","google"]}`)
	a := e.do(t, "GET", "/bookmarks/b1", "")
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	m := decodeStrict(t, a, "content", "embedUrl")
	if want := "b1: Go (https://go.dev), tags: lang, google"; m["content"] != want {
		t.Errorf("content %q, want %q", m["content"], want)
	}
	if want := testPublic + "/bookmarks/b1/card?t="; !strings.HasPrefix(m["embedUrl"], want) {
		t.Errorf("embedUrl %q, want it to start %q", m["embedUrl"], want)
	}
}

// cardPath returns the path of a bookmark's card page, as its show
// answer's embedUrl gives it, for the caller whose token is given.
func (e *env) cardPath(t *testing.T, token, id string) string {
	t.Helper()
	a := e.send(t, "GET", "/bookmarks/"+id, "", http.Header{"Authorization": {"Bearer " + token}})
	m := decodeStrict(t, a, "content", "embedUrl")
	path, ok := strings.CutPrefix(m["embedUrl"], testPublic)
	if !ok {
		t.Fatalf("embedUrl %q is not below %s", m["embedUrl"], testPublic)
	}
	return path
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/bookmarks/b9", ""},
		{"DELETE", "/bookmarks/b9", ""},
		{"GET", "/bookmarks/b9/card", ""},
		{"POST", "/bookmarks/b9/share", `{"id":"b9","with":{"email":"x@example.com"}}`},
		{"POST", "/bookmarks/b9/open", `{"id":"b9","computerId":"laptop"}`},
	} {
		a := e.do(t, tt.method, tt.path, tt.body)
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
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	a := e.do(t, "DELETE", "/bookmarks/b1", "")
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	if m := decodeStrict(t, a, "content"); m["content"] != "Deleted b1." {
		t.Errorf("content %q", m["content"])
	}
	if a := e.do(t, "DELETE", "/bookmarks/b1", ""); a.status != http.StatusNotFound {
		t.Errorf("second delete: status %d, want 404", a.status)
	}
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "No bookmarks." {
		t.Errorf("list after delete: %q", a.body)
	}
}

func TestCard(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://example.com/?a=1&b=2","title":"<script>alert(1)</script>","tags":["x<y"]}`)
	// The browser loads the card with no token.
	a := e.send(t, "GET", e.cardPath(t, e.token, "b1"), "", nil)
	if a.status != http.StatusOK || a.contentType != "text/html; charset=utf-8" {
		t.Fatalf("card: %d %q", a.status, a.contentType)
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		`href="https://example.com/?a=1&amp;b=2"`,
		"x&lt;y",
		// The height follows the content, not only its first layout.
		"new ResizeObserver(postHeight).observe(document.documentElement)",
		`window.addEventListener("load", postHeight)`,
		"window.parent.postMessage({__kazzle_height: h}, \"*\")",
		// What grows: a details block, hidden until the button opens it.
		`<button type="button" id="toggle" aria-expanded="false" aria-controls="details">Show details</button>`,
		`<dl id="details" hidden>`,
		"<dt>Id</dt><dd>b1</dd>",
		"<dt>Tags</dt><dd>x&lt;y</dd>",
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("card does not hold %q:\n%s", want, a.body)
		}
	}
	if strings.Contains(a.body, "<script>alert(1)") {
		t.Errorf("card holds the title unescaped:\n%s", a.body)
	}
	// Saved a moment ago, in both forms.
	m := regexp.MustCompile(`<time datetime="([^"]+)">([^<]+)</time>`).FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("card has no saved time:\n%s", a.body)
	}
	saved, err := time.Parse(time.RFC3339, m[1])
	if err != nil || time.Since(saved) > time.Minute || time.Since(saved) < -time.Second {
		t.Errorf("saved %q (%v), want about now", m[1], err)
	}
	if want := saved.Format("2 Jan 2006 15:04 MST"); m[2] != want || !strings.HasSuffix(want, " UTC") {
		t.Errorf("saved shown as %q, want %q in UTC", m[2], want)
	}
}

// TestCardDetailsWithoutTags checks the details block of a bookmark with
// no tags says so rather than showing an empty row.
func TestCardDetailsWithoutTags(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	a := e.send(t, "GET", e.cardPath(t, e.token, "b1"), "", nil)
	if !strings.Contains(a.body, "<dt>Tags</dt><dd>none</dd>") || strings.Contains(a.body, `class="tag"`) {
		t.Errorf("card of an untagged bookmark:\n%s", a.body)
	}
}

func TestWhoami(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		context []string
		want    string
	}{
		{"thread", []string{`{"source":"thread","threadId":"t_1"}`}, "Tool context: thread t_1"},
		{"api", []string{`{"source":"api"}`}, "Tool context: api (no conversation)"},
		{"no context", nil, "Tool context: no Kazzle-Tool-Context header"},
		{"malformed context", []string{`{"source":"api","threadId":"t_1"}`},
			`Tool context: malformed Kazzle-Tool-Context header: an "api" context has no threadId`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.token}}
			if tt.context != nil {
				h["Kazzle-Tool-Context"] = tt.context
			}
			a := e.send(t, "GET", "/whoami", "", h)
			if a.status != http.StatusOK {
				t.Fatalf("status %d, body %s", a.status, a.body)
			}
			m := decodeStrict(t, a, "content")
			want := "Verified identity:\n  user: u_1\n  install: in_1\n  token expires: "
			if !strings.HasPrefix(m["content"], want) || !strings.HasSuffix(m["content"], "\n"+tt.want) {
				t.Errorf("content:\n%s\nwant %q ... %q", m["content"], want, tt.want)
			}
			// The token newEnv signed lives five minutes.
			line := strings.Split(m["content"], "\n")[3]
			exp, err := time.Parse(time.RFC3339, strings.TrimPrefix(line, "  token expires: "))
			if left := time.Until(exp); err != nil || left < 4*time.Minute || left > 5*time.Minute {
				t.Errorf("expiry line %q: %v, %v left", line, err, left)
			}
		})
	}

	c := claims()
	delete(c, "install")
	a := e.send(t, "GET", "/whoami", "", http.Header{"Authorization": {"Bearer " + sign(t, e.key, c)}})
	if m := decodeStrict(t, a, "content"); !strings.Contains(m["content"], "  install: (none)\n") {
		t.Errorf("no install:\n%s", m["content"])
	}
}

// TestToolsNeedAVerifiedToken calls every tool endpoint with tokens toolgate
// would not send, and checks each is refused before its handler runs.
func TestToolsNeedAVerifiedToken(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)

	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	with := func(k string, v any) jwt.MapClaims { c := claims(); c[k] = v; return c }
	tokens := []struct {
		name, auth, challenge string
	}{
		{"missing", "", "Bearer"},
		{"not bearer", "Basic dTpw", "Bearer"},
		{"garbage", "Bearer garbage", `Bearer error="invalid_token"`},
		{"forged: another key, same kid", "Bearer " + sign(t, otherKey, claims()), `Bearer error="invalid_token"`},
		{"another component's", "Bearer " + sign(t, e.key, with("aud", "notes")), `Bearer error="invalid_token"`},
		{"another issuer's", "Bearer " + sign(t, e.key, with("iss", "someone-else")), `Bearer error="invalid_token"`},
		{"expired", "Bearer " + sign(t, e.key, with("exp", time.Now().Add(-time.Hour).Unix())), `Bearer error="invalid_token"`},
	}
	calls := []struct{ method, path, body string }{
		{"POST", "/bookmarks", `{"url":"https://evil.example","title":"Evil"}`},
		{"GET", "/bookmarks", ""},
		{"GET", "/bookmarks/b1", ""},
		{"DELETE", "/bookmarks/b1", ""},
		{"POST", "/bookmarks/clear", ""},
		{"POST", "/bookmarks/clear/confirm", ""},
		{"POST", "/bookmarks/b1/share", `{"id":"b1","with":{"email":"x@example.com"}}`},
		{"POST", "/bookmarks/b1/open", `{"id":"b1","computerId":"laptop"}`},
		{"GET", "/whoami", ""},
	}
	for _, tok := range tokens {
		for _, c := range calls {
			t.Run(tok.name+"/"+c.method+" "+c.path, func(t *testing.T) {
				h := http.Header{"Kazzle-Tool-Context": {`{"source":"api"}`}}
				if tok.auth != "" {
					h.Set("Authorization", tok.auth)
				}
				a := e.send(t, c.method, c.path, c.body, h)
				if a.status != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401 (body %s)", a.status, a.body)
				}
				if a.challenge != tok.challenge {
					t.Errorf("WWW-Authenticate %q, want %q", a.challenge, tok.challenge)
				}
				if m := decodeStrict(t, a, "code", "error"); m["code"] != "unauthorized" || m["error"] == "" {
					t.Errorf("body %s", a.body)
				}
				if strings.Contains(a.body, "go.dev") || strings.Contains(a.body, "u_1") {
					t.Errorf("a refusal shows data: %s", a.body)
				}
			})
		}
	}

	// No refused POST saved and no refused DELETE or clear deleted: b1 is alone,
	// and the next id is still b2.
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "b1 Go https://go.dev\n" {
		t.Errorf("refused calls changed the bookmarks:\n%s", a.body)
	}
	if m := e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`); !strings.HasPrefix(m["content"], "Saved bookmark b2: ") {
		t.Errorf("refused saves took ids: %q", m["content"])
	}
}

// TestNoTokenNeeded checks the two endpoints toolgate does not call with a
// token: the url target's ping and the card page the browser loads. A
// token, even a bad one, changes nothing there.
func TestNoTokenNeeded(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	card := e.cardPath(t, e.token, "b1")
	for _, h := range []http.Header{nil, {"Authorization": {"Bearer garbage"}}} {
		a := e.send(t, "GET", "/ping", "", h)
		if a.status != http.StatusOK || a.contentType != "text/plain; charset=utf-8" || a.body != "pong" {
			t.Errorf("ping with %v: %d %q %q", h, a.status, a.contentType, a.body)
		}
		a = e.send(t, "GET", card, "", h)
		if a.status != http.StatusOK || a.contentType != "text/html; charset=utf-8" || !strings.Contains(a.body, "https://go.dev") {
			t.Errorf("card with %v: %d %q", h, a.status, a.contentType)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	if a := e.do(t, "PUT", "/bookmarks", `{}`); a.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT /bookmarks: status %d, want 405", a.status)
	}
}

// Kazzle-Tool-Context headers toolgate sends.
const (
	threadContext = `{"source":"thread","threadId":"th_1"}`
	apiContext    = `{"source":"api"}`
)

// call calls the component with a good token and the given tool context;
// no context sends no header.
func (e *env) call(t *testing.T, method, path, context string) answer {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + e.token}}
	if context != "" {
		h.Set("Kazzle-Tool-Context", context)
	}
	return e.send(t, method, path, "", h)
}

// decodeCard decodes an action-required card strictly: a key outside the
// card's shape fails.
func decodeCard(t *testing.T, a answer) apptools.Card {
	t.Helper()
	if a.status != http.StatusOK || a.contentType != "application/json" {
		t.Fatalf("card answer: %d %q, body %s", a.status, a.contentType, a.body)
	}
	var c apptools.Card
	if err := json.Unmarshal([]byte(a.body), &c, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("card %s: %v", a.body, err)
	}
	return c
}

// compactJSON is s without insignificant space, for comparing JSON texts.
func compactJSON(t *testing.T, s []byte) string {
	t.Helper()
	v := jsontext.Value(bytes.Clone(s))
	if err := v.Compact(); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return string(v)
}

func TestClearAsksOnAThread(t *testing.T) {
	e := newEnv(t)
	for _, b := range []string{
		`{"url":"https://go.dev","title":"Go"}`,
		`{"url":"https://caddyserver.com","title":"Caddy"}`,
		`{"url":"https://www.rust-lang.org","title":"Rust"}`,
		`{"url":"https://ziglang.org","title":"Zig"}`,
	} {
		e.save(t, b)
	}
	a := e.call(t, "POST", "/bookmarks/clear", threadContext)
	c := decodeCard(t, a)
	if c.Type != "action_required" || c.Title != "Delete all 4 bookmarks?" || c.Assignee != nil {
		t.Errorf("card %s", a.body)
	}
	if want := `This deletes "Go", "Caddy", "Rust" and 1 more. It cannot be undone.`; c.Description != want {
		t.Errorf("description %q, want %q", c.Description, want)
	}
	if len(c.Elements) != 2 {
		t.Fatalf("%d buttons, want 2: %s", len(c.Elements), a.body)
	}
	del, keep := c.Elements[0], c.Elements[1]
	if del.Type != "button" || del.ID != "delete" || del.Label != "Delete all" || del.Variant != "danger" || del.Input != nil {
		t.Errorf("delete button %+v", del)
	}
	if got, want := compactJSON(t, del.Target),
		`{"type":"app","component":"bookmarks","method":"POST","path":"/bookmarks/clear/confirm"}`; got != want {
		t.Errorf("delete target %s, want %s", got, want)
	}
	if keep.Type != "button" || keep.ID != "keep" || keep.Label != "Keep them" || keep.Variant != "" || keep.Target != nil {
		t.Errorf("keep button %+v", keep)
	}
	if got := compactJSON(t, keep.Input); got != `{"content":"Kept all bookmarks."}` {
		t.Errorf("keep input %s", got)
	}

	// Asking deletes nothing.
	if a := e.do(t, "GET", "/bookmarks", ""); strings.Count(a.body, "\n") != 4 {
		t.Errorf("the card deleted bookmarks:\n%s", a.body)
	}
}

// TestClearNamesAFew checks the card's title and description for one to
// four bookmarks: up to three are named, the rest counted.
func TestClearNamesAFew(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ save, title, description string }{
		{`{"url":"https://go.dev","title":"Go \"the language\""}`,
			"Delete the only bookmark?", `This deletes "Go \"the language\"". It cannot be undone.`},
		{`{"url":"https://caddyserver.com","title":"Caddy"}`,
			"Delete all 2 bookmarks?", `This deletes "Go \"the language\"" and "Caddy". It cannot be undone.`},
		{`{"url":"https://www.rust-lang.org","title":"Rust"}`,
			"Delete all 3 bookmarks?", `This deletes "Go \"the language\"", "Caddy" and "Rust". It cannot be undone.`},
		{`{"url":"https://ziglang.org","title":"Zig"}`,
			"Delete all 4 bookmarks?", `This deletes "Go \"the language\"", "Caddy", "Rust" and 1 more. It cannot be undone.`},
	} {
		e.save(t, tt.save)
		c := decodeCard(t, e.call(t, "POST", "/bookmarks/clear", threadContext))
		if c.Title != tt.title || c.Description != tt.description {
			t.Errorf("card %q / %q, want %q / %q", c.Title, c.Description, tt.title, tt.description)
		}
	}
}

// TestClearTargetsItsComponent checks the delete button names the
// component by the name toolgate knows it under (-audience), not a fixed one.
func TestClearTargetsItsComponent(t *testing.T) {
	e := newEnvFor(t, "links")
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	c := decodeCard(t, e.call(t, "POST", "/bookmarks/clear", threadContext))
	var target map[string]string
	if err := json.Unmarshal(c.Elements[0].Target, &target); err != nil || target["component"] != "links" {
		t.Errorf("target %s (%v), want component links", c.Elements[0].Target, err)
	}
}

// wantNeedsAThread checks that a route answering a card, sent with no
// conversation to ask in (an api context, none, a malformed one), answers
// 409 confirmation_required with want as its error.
func wantNeedsAThread(t *testing.T, send func(t *testing.T, context string) answer, want string) {
	t.Helper()
	for _, tt := range []struct{ name, context string }{
		{"api", apiContext},
		{"no context", ""},
		{"malformed context", `{"source":"thread"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := send(t, tt.context)
			if a.status != http.StatusConflict {
				t.Fatalf("status %d, want 409 (body %s)", a.status, a.body)
			}
			m := decodeStrict(t, a, "code", "error")
			if m["code"] != "confirmation_required" || m["error"] != want {
				t.Errorf("body %s", a.body)
			}
		})
	}
}

// TestClearNeedsAThread checks that a call with no conversation to ask in
// gets a domain error and deletes nothing.
func TestClearNeedsAThread(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	wantNeedsAThread(t, func(t *testing.T, context string) answer {
		return e.call(t, "POST", "/bookmarks/clear", context)
	}, "clearing bookmarks needs a person to confirm; call it from a conversation")
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "b1 Go https://go.dev\n" {
		t.Errorf("an api clear changed the bookmarks:\n%s", a.body)
	}
}

func TestClearNothing(t *testing.T) {
	e := newEnv(t)
	for _, context := range []string{threadContext, apiContext} {
		a := e.call(t, "POST", "/bookmarks/clear", context)
		if a.status != http.StatusOK {
			t.Fatalf("%s: status %d, body %s", context, a.status, a.body)
		}
		if m := decodeStrict(t, a, "content"); m["content"] != "There are no bookmarks to clear." {
			t.Errorf("%s: content %q", context, m["content"])
		}
	}
}

func TestClearConfirm(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`)
	a := e.call(t, "POST", "/bookmarks/clear/confirm", threadContext)
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	if m := decodeStrict(t, a, "content"); m["content"] != "Deleted all 2 bookmarks." {
		t.Errorf("content %q", m["content"])
	}
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "No bookmarks." {
		t.Errorf("list after clear: %q", a.body)
	}
	// Pressed twice (toolgate would not: it records the first answer), it
	// deletes nothing more and says so.
	a = e.call(t, "POST", "/bookmarks/clear/confirm", threadContext)
	if m := decodeStrict(t, a, "content"); a.status != http.StatusOK || m["content"] != "There were no bookmarks left to delete." {
		t.Errorf("second confirm: %d %s", a.status, a.body)
	}

	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	a = e.call(t, "POST", "/bookmarks/clear/confirm", threadContext)
	if m := decodeStrict(t, a, "content"); m["content"] != "Deleted the only bookmark." {
		t.Errorf("one bookmark: %s", a.body)
	}
}

// TestManifest checks tools.json against the component: every app target
// names this component and a route it serves, and clear_bookmarks is
// declared as the quick start expects.
func TestManifest(t *testing.T) {
	data, err := os.ReadFile("tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Tools []struct {
			Name        string         `json:"name"`
			DisplayName string         `json:"displayName"`
			Description string         `json:"description"`
			InputSchema jsontext.Value `json:"input_schema"`
			Target      struct {
				Type      string            `json:"type"`
				Component string            `json:"component"`
				Method    string            `json:"method"`
				Path      string            `json:"path"`
				Query     map[string]string `json:"query"`
				Body      jsontext.Value    `json:"body"`
				Name      string            `json:"name"`
			} `json:"target"`
			Annotations map[string]bool `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(data, &m, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	mux := newApp(testPublic, "bookmarks", apptools.NewVerifier("http://127.0.0.1:1/jwks", "toolgate", "bookmarks")).routes().(*http.ServeMux)
	// The playground's test drives share_bookmark by these property names,
	// and open_on_device's computerId is the card's assignee. The schemas
	// are what toolgate-tools writes for tools.ts: Zod's own email pattern
	// beside "format": "email" (so that the gateway refuses what Zod
	// refuses), "default" before "type", and the .describe() texts.
	exact := map[string]struct{ displayName, method, path, schema string }{
		"share_bookmark": {"Share bookmark", "POST", "/bookmarks/${input.id}/share",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{` +
				`"id":{"type":"string","pattern":"^b[0-9]+$","description":"The bookmark's id, such as \"b1\"."},` +
				`"with":{"type":"object","properties":{` +
				`"email":{"type":"string","format":"email","pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$","description":"The recipient's email address."},` +
				`"note":{"description":"A short note to the recipient, only if the user gives one.","type":"string","maxLength":200}},` +
				`"required":["email"],"additionalProperties":false,"description":"Whom to share with."},` +
				`"permission":{"default":"view","description":"What the recipient may do.","type":"string","enum":["view","comment"]},` +
				`"expiresInDays":{"description":"How many days the share lasts; leave out for no expiry.","type":"integer","minimum":1,"maximum":90},` +
				`"notify":{"description":"Whether to email the recipient now.","type":"boolean"}},` +
				`"required":["id","with"],"additionalProperties":false}`},
		"open_on_device": {"Open on device", "POST", "/bookmarks/${input.id}/open",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{` +
				`"id":{"type":"string","pattern":"^b[0-9]+$","description":"The bookmark's id, such as \"b1\"."},` +
				`"computerId":{"type":"string","minLength":1,"maxLength":64,"description":"The device to open it on, such as \"laptop\"."}},` +
				`"required":["id","computerId"],"additionalProperties":false}`},
	}
	seen := false
	for _, tool := range m.Tools {
		if want, ok := exact[tool.Name]; ok {
			delete(exact, tool.Name)
			tg := tool.Target
			if tool.DisplayName != want.displayName || tool.Description == "" || tg.Method != want.method || tg.Path != want.path ||
				string(tg.Body) != `"${input}"` || tg.Query != nil || tool.Annotations != nil {
				t.Errorf("%s: %+v", tool.Name, tool)
			}
			if got := compactJSON(t, tool.InputSchema); got != want.schema {
				t.Errorf("%s: input_schema\n%s\nwant\n%s", tool.Name, got, want.schema)
			}
		}
		tg := tool.Target
		if tg.Type == "kazzle" {
			// Run by the example page, which the page test covers.
			if tg.Name != "read_draft" {
				t.Errorf("%s: client tool %q, want read_draft", tool.Name, tg.Name)
			}
			continue
		}
		if tg.Type != "app" || tg.Component != "bookmarks" {
			t.Errorf("%s: target %s of component %q, want app of bookmarks", tool.Name, tg.Type, tg.Component)
			continue
		}
		path := strings.ReplaceAll(tg.Path, "${input.id}", "b1")
		if _, pattern := mux.Handler(httptest.NewRequest(tg.Method, path, nil)); pattern == "" {
			t.Errorf("%s: %s %s is not a route of the component", tool.Name, tg.Method, path)
		}
		if tool.Name != "clear_bookmarks" {
			continue
		}
		seen = true
		if tool.DisplayName != "Clear bookmarks" || !strings.Contains(tool.Description, "confirm") ||
			tg.Method != "POST" || tg.Path != "/bookmarks/clear" || tg.Body != nil || tg.Query != nil {
			t.Errorf("clear_bookmarks: %+v", tool)
		}
		if got := compactJSON(t, tool.InputSchema); got != `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{},"additionalProperties":false}` {
			t.Errorf("clear_bookmarks: input_schema %s", got)
		}
		if len(tool.Annotations) != 1 || !tool.Annotations["destructiveHint"] {
			t.Errorf("clear_bookmarks: annotations %v, want destructiveHint only", tool.Annotations)
		}
	}
	if !seen {
		t.Error("no clear_bookmarks tool")
	}
	for name := range exact {
		t.Errorf("no %s tool", name)
	}
}

// TestPage checks the example page and the page tokens it asks for: one
// is minted only for the user the page's session signed in.
func TestPage(t *testing.T) {
	secret := []byte(devPageSecret)
	a := newApp(testPublic, "bookmarks", apptools.NewVerifier("http://127.0.0.1:1/jwks", "toolgate", "bookmarks")).
		withPage(pageConfig{toolgate: "http://127.0.0.1:8080/toolgate", secret: secret, user: "u_1", install: "in_1"})
	h := a.routes()

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/page?thread=th_1", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `const toolgate = "http://127.0.0.1:8080/toolgate";`) ||
		!strings.Contains(w.Body.String(), "<toolgate-client>") {
		t.Errorf("page: %d\n%s", w.Code, w.Body)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != sessionCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("page set cookies %v, want one HttpOnly SameSite=Strict session", cookies)
	}
	session := cookies[0]

	tokenFor := func(query string, cookie *http.Cookie) (*httptest.ResponseRecorder, jwt.MapClaims) {
		t.Helper()
		r := httptest.NewRequest("GET", "/page-token?"+query, nil)
		if cookie != nil {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			return w, nil
		}
		var got struct {
			Token   string `json:"token"`
			User    string `json:"user"`
			Install string `json:"install"`
			Thread  string `json:"thread"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("page-token: %s", w.Body)
		}
		claims := jwt.MapClaims{}
		if _, err := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("toolgate-pages"), jwt.WithIssuer("bookmarks")).
			ParseWithClaims(got.Token, claims, func(*jwt.Token) (any, error) { return secret, nil }); err != nil {
			t.Fatalf("page token does not verify: %v", err)
		}
		if got.User != claims["sub"] || got.Install != claims["install"] || got.Thread != claims["thread"] {
			t.Errorf("answer names %s/%s, token %v", got.User, got.Thread, claims)
		}
		return w, claims
	}

	if _, claims := tokenFor("thread=th_1", session); claims["sub"] != "u_1" || claims["install"] != "in_1" || claims["thread"] != "th_1" {
		t.Errorf("claims %v", claims)
	}
	// A user or installation named in the request changes nothing.
	if _, claims := tokenFor("thread=th_1&user=u_2&sub=u_2&install=in_2", session); claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("a request naming u_2 of in_2 got a token for %v of %v", claims["sub"], claims["install"])
	}
	// No session, or one this process did not sign, gets no token.
	forged := *session
	forged.Value = strings.TrimSuffix(session.Value, session.Value[len(session.Value)-4:]) + "AAAA"
	other, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"aud": sessionAudience, "sub": "u_2", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*http.Cookie{
		"no cookie":                   nil,
		"tampered":                    &forged,
		"signed with the page secret": {Name: sessionCookie, Value: other},
		"a page token":                {Name: sessionCookie, Value: mustToken(t, secret)},
	} {
		if w, _ := tokenFor("thread=th_1", c); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"code":"unauthorized"`) {
			t.Errorf("%s: page-token %d %s, want 401", name, w.Code, w.Body)
		}
	}
	for _, bad := range []string{"", "a b", "x/../y", strings.Repeat("t", 65)} {
		if w, _ := tokenFor("thread="+url.QueryEscape(bad), session); w.Code != 400 {
			t.Errorf("thread %q: %d", bad, w.Code)
		}
	}
}

// mustToken mints a page token as /page-token does, for u_2.
func mustToken(t *testing.T, secret []byte) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "bookmarks", "aud": "toolgate-pages", "sub": "u_2", "thread": "th_1", "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokenFor signs a token for user at install, for this component.
func (e *env) tokenFor(t *testing.T, user, install string) string {
	t.Helper()
	c := claims()
	c["sub"], c["install"] = user, install
	return sign(t, e.key, c)
}

// as calls the component with the given token and the thread context.
func (e *env) as(t *testing.T, token, method, path, body string) answer {
	t.Helper()
	return e.send(t, method, path, body, http.Header{"Authorization": {"Bearer " + token}, "Kazzle-Tool-Context": {threadContext}})
}

// TestBookmarksPerUser checks that each verified user (and installation)
// sees, changes and clears only their own bookmarks.
func TestBookmarksPerUser(t *testing.T) {
	e := newEnv(t)
	u2 := e.tokenFor(t, "u_2", "in_1")
	u1elsewhere := e.tokenFor(t, "u_1", "in_2")
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`)

	for name, tok := range map[string]string{"another user": u2, "the same user in another install": u1elsewhere} {
		t.Run(name, func(t *testing.T) {
			if a := e.as(t, tok, "GET", "/bookmarks", ""); a.body != "No bookmarks." {
				t.Errorf("list: %q", a.body)
			}
			for _, m := range []string{"GET", "DELETE"} {
				if a := e.as(t, tok, m, "/bookmarks/b1", ""); a.status != http.StatusNotFound || !strings.Contains(a.body, "no bookmark b1") {
					t.Errorf("%s b1: %d %s", m, a.status, a.body)
				}
			}
			for path, body := range map[string]string{
				"/bookmarks/b1/share": `{"id":"b1","with":{"email":"x@example.com"}}`,
				"/bookmarks/b1/open":  `{"id":"b1","computerId":"laptop"}`,
			} {
				if a := e.as(t, tok, "POST", path, body); a.status != http.StatusNotFound || !strings.Contains(a.body, "no bookmark b1") {
					t.Errorf("POST %s: %d %s", path, a.status, a.body)
				}
			}
			if a := e.as(t, tok, "POST", "/bookmarks/clear", ""); a.status != http.StatusOK || !strings.Contains(a.body, "There are no bookmarks to clear.") {
				t.Errorf("clear: %d %s", a.status, a.body)
			}
			if a := e.as(t, tok, "POST", "/bookmarks/clear/confirm", ""); a.status != http.StatusOK || !strings.Contains(a.body, "no bookmarks left") {
				t.Errorf("clear confirm: %d %s", a.status, a.body)
			}
		})
	}

	// u_2's own bookmarks count from b1 and stay u_2's.
	a := e.as(t, u2, "POST", "/bookmarks", `{"url":"https://example.com/u2","title":"Mine"}`)
	if a.status != http.StatusCreated || !strings.Contains(a.body, "Saved bookmark b1: Mine") {
		t.Fatalf("u_2 save: %d %s", a.status, a.body)
	}
	if a := e.as(t, u2, "GET", "/bookmarks/b1", ""); !strings.Contains(a.body, "b1: Mine") {
		t.Errorf("u_2 show b1: %s", a.body)
	}
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "b1 Go https://go.dev\nb2 Caddy https://caddyserver.com\n" {
		t.Errorf("u_1's list after the others acted:\n%s", a.body)
	}
	if a := e.do(t, "GET", "/bookmarks/b1", ""); !strings.Contains(a.body, "b1: Go") {
		t.Errorf("u_1 show b1: %s", a.body)
	}
	if a := e.as(t, e.token, "POST", "/bookmarks/clear/confirm", ""); !strings.Contains(a.body, "Deleted all 2 bookmarks.") {
		t.Errorf("u_1 clear: %s", a.body)
	}
	if a := e.as(t, u2, "GET", "/bookmarks", ""); a.body != "b1 Mine https://example.com/u2\n" {
		t.Errorf("u_1's clear touched u_2's:\n%s", a.body)
	}
}

// TestCardCapability checks that a card page shows a bookmark only to a
// URL this component handed out for it: an id alone, another bookmark's
// URL or a tampered one get the same 404 as an unknown id.
func TestCardCapability(t *testing.T) {
	e := newEnv(t)
	u2 := e.tokenFor(t, "u_2", "in_1")
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`)
	if a := e.as(t, u2, "POST", "/bookmarks", `{"url":"https://example.com/u2","title":"Mine"}`); a.status != http.StatusCreated {
		t.Fatalf("u_2 save: %d %s", a.status, a.body)
	}
	card1 := e.cardPath(t, e.token, "b1")
	card2 := e.cardPath(t, e.token, "b2")
	u2card := e.cardPath(t, u2, "b1")
	if a := e.send(t, "GET", card1, "", nil); a.status != http.StatusOK || !strings.Contains(a.body, "https://go.dev") {
		t.Errorf("u_1's card: %d %s", a.status, a.body)
	}
	if a := e.send(t, "GET", u2card, "", nil); a.status != http.StatusOK || !strings.Contains(a.body, "https://example.com/u2") || strings.Contains(a.body, "go.dev") {
		t.Errorf("u_2's card of its b1: %d %s", a.status, a.body)
	}
	_, tok2, _ := strings.Cut(card2, "?")
	for name, path := range map[string]string{
		"id alone":                 "/bookmarks/b1/card",
		"empty token":              "/bookmarks/b1/card?t=",
		"another bookmark's token": "/bookmarks/b1/card?" + tok2,
		"tampered token":           card1[:len(card1)-3] + "AAA",
		"token of a deleted bookmark": func() string {
			e.do(t, "DELETE", "/bookmarks/b2", "")
			return card2
		}(),
	} {
		a := e.send(t, "GET", path, "", nil)
		if a.status != http.StatusNotFound || !strings.Contains(a.body, `"code":"not_found"`) {
			t.Errorf("%s: %d %s, want 404 not_found", name, a.status, a.body)
		}
	}
}

// TestSaveMarkdownEscapes checks that the save answer's markdown, rendered
// by a CommonMark (GFM) renderer, holds exactly one link, to the saved
// http(s) URL, with the title as its text: a title cannot add an image
// (which the card would fetch), a link or HTML.
func TestSaveMarkdownEscapes(t *testing.T) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	tests := []struct {
		name, title, url string
		wantHref         string
		wantText         string // the link's text as rendered
	}{
		{"plain", "Go", "https://go.dev", "https://go.dev", "Go"},
		{"image", "![x](https://evil.example/leak?d=secret)", "https://go.dev", "https://go.dev", "![x](https://evil.example/leak?d=secret)"},
		{"image by reference", "![x][1]\n\n[1]: https://evil.example/leak", "https://go.dev", "https://go.dev", "![x][1]  [1]: https://evil.example/leak"},
		{"link", "[click](javascript:alert(1))", "https://go.dev", "https://go.dev", "[click](javascript:alert(1))"},
		{"closes the link", "a](https://evil.example) [b", "https://go.dev", "https://go.dev", "a](https://evil.example) [b"},
		{"html", `<img src=x onerror=alert(1)>`, "https://go.dev", "https://go.dev", "&lt;img src=x onerror=alert(1)&gt;"},
		{"autolink", "<https://evil.example>", "https://go.dev", "https://go.dev", "&lt;https://evil.example&gt;"},
		{"new block", "a\n\n![x](https://evil.example/leak)", "https://go.dev", "https://go.dev", "a  ![x](https://evil.example/leak)"},
		{"code and emphasis", "`x` *y* _z_ \\", "https://go.dev", "https://go.dev", "`x` *y* _z_ \\"},
		{"url closes the destination", "T", "https://go.dev/a) ![x](https://evil.example/leak", "https://go.dev/a%29%20%21%5Bx%5D%28https://evil.example/leak", "T"},
		{"url with angle brackets", "T", `https://go.dev/?q=<a>"'`, "https://go.dev/?q=%3Ca%3E%22%27", "T"},
	}
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"url": tt.url, "title": tt.title})
			m := e.save(t, string(body))
			var out bytes.Buffer
			if err := md.Convert([]byte(m["markdown"]), &out); err != nil {
				t.Fatal(err)
			}
			html := out.String()
			want := `<p>Saved <strong><a href="` + tt.wantHref + `">` + tt.wantText + "</a></strong></p>\n"
			if html != want {
				t.Errorf("markdown %q renders\n%s\nwant\n%s", m["markdown"], html, want)
			}
		})
	}
}

// TestMarkdownLinkSchemes checks that only an http(s) URL becomes a link,
// even if a caller skipped save's own check.
func TestMarkdownLinkSchemes(t *testing.T) {
	for _, u := range []string{"javascript:alert(1)", "data:text/html,<b>x</b>", "//evil.example/x", "/relative", "mailto:a@b.c", "https://", "%zz"} {
		if got := markdownLink("T!", u); got != `T\!` {
			t.Errorf("markdownLink(T!, %q) = %q, want the escaped title alone", u, got)
		}
	}
	if got := markdownLink("T", "HTTPS://go.dev"); got != "[T](https://go.dev)" {
		t.Errorf("upper-case scheme: %q", got)
	}
}

func TestShare(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	tests := []struct {
		name, body  string
		content, md string
	}{
		{"everything", `{"id":"b1","with":{"email":"x@example.com"},"permission":"view","expiresInDays":7,"notify":true}`,
			"Shared b1 (Go) with x@example.com: view, expires in 7 days, notified",
			"Shared **[Go](https://go.dev)** with [x@example.com](mailto:x@example.com) (view)"},
		{"only the email", `{"id":"b1","with":{"email":"x@example.com"}}`,
			"Shared b1 (Go) with x@example.com: view",
			"Shared **[Go](https://go.dev)** with [x@example.com](mailto:x@example.com) (view)"},
		{"no id in the body", `{"with":{"email":"x@example.com"}}`,
			"Shared b1 (Go) with x@example.com: view",
			"Shared **[Go](https://go.dev)** with [x@example.com](mailto:x@example.com) (view)"},
		{"comment, one day, not notified, a note",
			`{"id":"b1","with":{"email":"ana.m+go@mail.example.org","note":"For Friday's \"talk\"."},"permission":"comment","expiresInDays":1,"notify":false}`,
			`Shared b1 (Go) with ana.m+go@mail.example.org: comment, expires in 1 day, not notified, note: "For Friday's \"talk\"."`,
			"Shared **[Go](https://go.dev)** with [ana.m+go@mail.example.org](mailto:ana.m+go@mail.example.org) (comment)"},
		{"longest note and expiry", `{"id":"b1","with":{"email":"x@example.com","note":"` + strings.Repeat("é", 200) + `"},"expiresInDays":90}`,
			`Shared b1 (Go) with x@example.com: view, expires in 90 days, note: "` + strings.Repeat("é", 200) + `"`,
			"Shared **[Go](https://go.dev)** with [x@example.com](mailto:x@example.com) (view)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.do(t, "POST", "/bookmarks/b1/share", tt.body)
			if a.status != http.StatusOK {
				t.Fatalf("status %d, body %s", a.status, a.body)
			}
			m := decodeStrict(t, a, "content", "markdown")
			if m["content"] != tt.content {
				t.Errorf("content\n%s\nwant\n%s", m["content"], tt.content)
			}
			if m["markdown"] != tt.md {
				t.Errorf("markdown\n%s\nwant\n%s", m["markdown"], tt.md)
			}
		})
	}
	// Sharing keeps nothing and changes nothing.
	if a := e.do(t, "GET", "/bookmarks", ""); a.body != "b1 Go https://go.dev\n" {
		t.Errorf("list after sharing:\n%s", a.body)
	}
}

func TestShareInvalid(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not json", `{`, "JSON object"},
		{"unknown field", `{"id":"b1","with":{"email":"x@example.com"},"x":1}`, `unknown field "x"`},
		{"unknown field in with", `{"id":"b1","with":{"email":"x@example.com","cc":"y@example.com"}}`, `unknown field "cc"`},
		{"with not an object", `{"id":"b1","with":"x@example.com"}`, "JSON object"},
		{"no with", `{"id":"b1"}`, "with.email is required"},
		{"no email", `{"id":"b1","with":{"note":"hi"}}`, "with.email is required"},
		{"display name", `{"id":"b1","with":{"email":"X <x@example.com>"}}`, "plain address"},
		{"quoted local part", `{"id":"b1","with":{"email":"\"a b\"@example.com"}}`, "plain address"},
		{"address literal", `{"id":"b1","with":{"email":"x@[127.0.0.1]"}}`, "plain address"},
		{"closes a link", `{"id":"b1","with":{"email":"x@example.com) [y](javascript:alert(1)"}}`, "plain address"},
		{"two addresses", `{"id":"b1","with":{"email":"x@example.com,y@example.com"}}`, "plain address"},
		{"header", `{"id":"b1","with":{"email":"x@example.com?bcc=y@example.com"}}`, "plain address"},
		{"line break", `{"id":"b1","with":{"email":"x@example.com\nBcc: y@example.com"}}`, "plain address"},
		{"no domain", `{"id":"b1","with":{"email":"x@"}}`, "plain address"},
		{"too long", `{"id":"b1","with":{"email":"` + strings.Repeat("x", 250) + `@e.io"}}`, "plain address"},
		{"note too long", `{"id":"b1","with":{"email":"x@example.com","note":"` + strings.Repeat("é", 201) + `"}}`, "at most 200 characters"},
		{"permission", `{"id":"b1","with":{"email":"x@example.com"},"permission":"edit"}`, `permission "edit"`},
		{"expiry zero", `{"id":"b1","with":{"email":"x@example.com"},"expiresInDays":0}`, "from 1 to 90"},
		{"expiry too long", `{"id":"b1","with":{"email":"x@example.com"},"expiresInDays":91}`, "from 1 to 90"},
		{"expiry not an integer", `{"id":"b1","with":{"email":"x@example.com"},"expiresInDays":1.5}`, "JSON object"},
		{"notify not a boolean", `{"id":"b1","with":{"email":"x@example.com"},"notify":"yes"}`, "JSON object"},
		{"another id", `{"id":"b2","with":{"email":"x@example.com"}}`, `id "b2" does not match the path's "b1"`},
	}
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	e.save(t, `{"url":"https://caddyserver.com","title":"Caddy"}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantInvalid(t, e.do(t, "POST", "/bookmarks/b1/share", tt.body), tt.want)
		})
	}
}

// TestShareMarkdownEscapes checks that the share answer's markdown,
// rendered by a CommonMark (GFM) renderer, holds exactly two links, the
// bookmark's and a mailto link to the address as given, whatever
// characters the address may hold.
func TestShareMarkdownEscapes(t *testing.T) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	tests := []struct {
		name, email string
		wantHref    string // after mailto:
		wantText    string // the link's text as rendered
	}{
		{"plain", "x@example.com", "x@example.com", "x@example.com"},
		{"emphasis", "*a*_b_@example.com", "%2Aa%2A_b_@example.com", "*a*_b_@example.com"},
		{"code", "`a`@example.com", "%60a%60@example.com", "`a`@example.com"},
		{"quote", "o'brien@example.com", "o%27brien@example.com", "o'brien@example.com"},
		{"percent", "a%41@example.com", "a%2541@example.com", "a%41@example.com"},
		{"fragment", "a#b@example.com", "a%23b@example.com", "a#b@example.com"},
		{"query", "a?b=c@example.com", "a%3Fb=c@example.com", "a?b=c@example.com"},
		{"entity", "a&amp@example.com", "a&amp;amp@example.com", "a&amp;amp@example.com"},
		{"braces and bang", "{a}|!b~@example.com", "%7Ba%7D%7C%21b~@example.com", "{a}|!b~@example.com"},
	}
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"![x](https://evil.example/leak)"}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"id": "b1", "with": map[string]string{"email": tt.email}})
			a := e.do(t, "POST", "/bookmarks/b1/share", string(body))
			if a.status != http.StatusOK {
				t.Fatalf("status %d, body %s", a.status, a.body)
			}
			m := decodeStrict(t, a, "content", "markdown")
			var out bytes.Buffer
			if err := md.Convert([]byte(m["markdown"]), &out); err != nil {
				t.Fatal(err)
			}
			want := `<p>Shared <strong><a href="https://go.dev">![x](https://evil.example/leak)</a></strong> with ` +
				`<a href="mailto:` + tt.wantHref + `">` + tt.wantText + "</a> (view)</p>\n"
			if out.String() != want {
				t.Errorf("markdown %q renders\n%s\nwant\n%s", m["markdown"], out.String(), want)
			}
		})
	}
}

// TestOpenAsksTheDevice checks the card open_on_device answers on a
// thread: assigned to the device named, with the bookmark as a link.
func TestOpenAsksTheDevice(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	e.save(t, `{"url":"https://example.com/a)b","title":"*Bold* [x](javascript:alert(1))"}`)
	tests := []struct {
		name, path, body string
		title, desc      string
		opened           string
	}{
		{"plain", "/bookmarks/b1/open", `{"id":"b1","computerId":"laptop"}`,
			"Open “Go” on laptop?", "Opens [Go](https://go.dev) in a browser on laptop.", "Opened b1 on laptop."},
		{"markup in the title and the device", "/bookmarks/b2/open", `{"id":"b2","computerId":"<b>*pc*</b>"}`,
			"Open “*Bold* [x](javascript:alert(1))” on <b>*pc*</b>?",
			`Opens [\*Bold\* \[x\]\(javascript:alert\(1\)\)](https://example.com/a%29b) in a browser on \<b\>\*pc\*\</b\>.`,
			"Opened b2 on <b>*pc*</b>."},
		{"no id in the body", "/bookmarks/b1/open", `{"computerId":"Ana’s phone"}`,
			"Open “Go” on Ana’s phone?", "Opens [Go](https://go.dev) in a browser on Ana’s phone.", "Opened b1 on Ana’s phone."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.as(t, e.token, "POST", tt.path, tt.body)
			c := decodeCard(t, a)
			if c.Type != "action_required" || c.Title != tt.title || c.Description != tt.desc {
				t.Errorf("card %q / %q, want %q / %q", c.Title, c.Description, tt.title, tt.desc)
			}
			var device struct {
				ComputerID string `json:"computerId"`
			}
			json.Unmarshal([]byte(tt.body), &device)
			if c.Assignee == nil || c.Assignee.ComputerID != device.ComputerID {
				t.Errorf("assignee %+v, want %q", c.Assignee, device.ComputerID)
			}
			if len(c.Elements) != 2 {
				t.Fatalf("%d buttons, want 2: %s", len(c.Elements), a.body)
			}
			open, later := c.Elements[0], c.Elements[1]
			if open.Type != "button" || open.ID != "open" || open.Label != "Open" || open.Variant != "primary" || open.Target != nil {
				t.Errorf("open button %+v", open)
			}
			var input map[string]string
			if err := json.Unmarshal(open.Input, &input); err != nil || len(input) != 1 || input["content"] != tt.opened {
				t.Errorf("open input %s, want content %q", open.Input, tt.opened)
			}
			if later.Type != "button" || later.ID != "later" || later.Label != "Not now" || later.Variant != "" || later.Target != nil {
				t.Errorf("later button %+v", later)
			}
			if got := compactJSON(t, later.Input); got != `{"content":"Not opened."}` {
				t.Errorf("later input %s", got)
			}
		})
	}
}

// TestOpenDescriptionRenders checks the card's description, rendered as
// the card renders markdown, links the bookmark and nothing else.
func TestOpenDescriptionRenders(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"![x](https://evil.example/leak)"}`)
	c := decodeCard(t, e.as(t, e.token, "POST", "/bookmarks/b1/open", `{"id":"b1","computerId":"[pc](https://evil.example) <img src=x onerror=alert(1)>"}`))
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(c.Description), &out); err != nil {
		t.Fatal(err)
	}
	want := `<p>Opens <a href="https://go.dev">![x](https://evil.example/leak)</a> in a browser on ` +
		"[pc](https://evil.example) &lt;img src=x onerror=alert(1)&gt;.</p>\n"
	if out.String() != want {
		t.Errorf("description %q renders\n%s\nwant\n%s", c.Description, out.String(), want)
	}
}

func TestOpenInvalid(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not json", `{`, "JSON object"},
		{"unknown field", `{"id":"b1","computerId":"laptop","x":1}`, `unknown field "x"`},
		{"no computerId", `{"id":"b1"}`, "computerId is required"},
		{"empty computerId", `{"id":"b1","computerId":""}`, "computerId is required"},
		{"too long", `{"id":"b1","computerId":"` + strings.Repeat("é", 65) + `"}`, "at most 64 characters"},
		{"line break", `{"id":"b1","computerId":"laptop\nphone"}`, "control characters or line breaks"},
		{"line separator", `{"id":"b1","computerId":"laptop\u2028phone"}`, "control characters or line breaks"},
		{"nul", `{"id":"b1","computerId":"laptop\u0000"}`, "control characters or line breaks"},
		{"another id", `{"id":"b2","computerId":"laptop"}`, `id "b2" does not match the path's "b1"`},
	}
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantInvalid(t, e.as(t, e.token, "POST", "/bookmarks/b1/open", tt.body), tt.want)
		})
	}
	// The longest name is fine.
	if a := e.as(t, e.token, "POST", "/bookmarks/b1/open", `{"id":"b1","computerId":"`+strings.Repeat("é", 64)+`"}`); a.status != http.StatusOK {
		t.Errorf("64 characters: %d %s", a.status, a.body)
	}
}

// TestOpenNeedsAThread checks that a call with no conversation to ask in
// gets a domain error, as clear_bookmarks does.
func TestOpenNeedsAThread(t *testing.T) {
	e := newEnv(t)
	e.save(t, `{"url":"https://go.dev","title":"Go"}`)
	wantNeedsAThread(t, func(t *testing.T, context string) answer {
		h := http.Header{"Authorization": {"Bearer " + e.token}}
		if context != "" {
			h.Set("Kazzle-Tool-Context", context)
		}
		return e.send(t, "POST", "/bookmarks/b1/open", `{"id":"b1","computerId":"laptop"}`, h)
	}, "opening a bookmark on a device needs a person there to confirm; call it from a conversation")
}
