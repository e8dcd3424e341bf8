package caddymodule

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/golang-jwt/jwt/v5"
)

// recorded is what the upstream saw of one request.
type recorded struct {
	Method string
	Path   string // escaped
	Query  string
	Header http.Header
	Body   []byte
}

// recorder is a loopback upstream that records each request and answers by
// path.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	last map[string]recorded
	seen int
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{last: map[string]recorded{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"ok","extra":"dropped"}`)
	})
	mux.HandleFunc("/api/bookmark", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":7,"title":"Go","url":"https://go.dev","tags":["lang"]}`)
	})
	mux.HandleFunc("/card/", func(w http.ResponseWriter, r *http.Request) {
		cards := map[string]string{
			"plain": `{"type":"action_required","title":"Send the email?","description":"To ada@example.com","elements":[
				{"type":"button","id":"approve","label":"Send","variant":"primary","input":{"content":"approved","markdown":"**approved**"}},
				{"type":"button","id":"reject","label":"Don't send","input":{"reason":"no","n":1}},
				{"type":"button","id":"run","label":"Run","input":{"id":"z9"},"target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"}}]}`,
			"device":    `{"type":"action_required","title":"Scan","assignee":{"computerId":"pc-7"},"elements":[{"type":"button","id":"scan","label":"Scan","input":{"content":"scanned"}}]}`,
			"dup":       `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A"},{"type":"button","id":"a","label":"B"}]}`,
			"badtarget": `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","target":{"type":"app","component":"nowhere","method":"GET","path":"/"}}]}`,
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, cards[strings.TrimPrefix(r.URL.Path, "/card/")])
	})
	mux.HandleFunc("/slowok", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"slow ok"}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "plain <b>text</b>")
	})
	mux.HandleFunc("/md", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"saved","markdown":"**saved**"}`)
	})
	mux.HandleFunc("/both", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","markdown":"m","embedUrl":"https://app.example/card/1"}`)
	})
	mux.HandleFunc("/relative-embed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","embedUrl":"/card/1"}`)
	})
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result":42}`)
	})
	mux.HandleFunc("/domain-error", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"not_found","error":"no bookmark b9"}`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for i := 0; i < 80; i++ { // 5 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly part")
		buf.Flush()
		conn.Close()
	})
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		key := r.URL.Path
		if strings.HasPrefix(key, "/items/") {
			key = "/items/"
		}
		if strings.HasPrefix(key, "/card/") {
			key = "/card/"
		}
		rec.last[key] = recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body}
		rec.seen++
		rec.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) get(t *testing.T, path string) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r, ok := rec.last[path]
	if !ok {
		t.Fatalf("upstream saw no request to %s", path)
	}
	return r
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen
}

const testSchema = "`" + `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}},"required":["id"],"additionalProperties":false}` + "`"

const emptySchema = "`" + `{"type":"object","properties":{},"additionalProperties":false}` + "`"

func testConfig(t *testing.T, upstream, dataDir string) string {
	manifestPath := filepath.Join(t.TempDir(), "tools.json")
	manifest := fmt.Sprintf(`{"tools":[{"name":"from_manifest","displayName":"From manifest","description":"A manifest tool.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/text"}},
{"name":"ext_text","description":"A url tool.","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"target":{"type":"url","method":"GET","url":"%s/text","query":{"q":"${input.q}"},"headers":{"X-Key":"${env.API_KEY}"},"component":"api"}}]}`, upstream)
	if err := os.WriteFile(manifestPath, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return testGlobals(dataDir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			manifest %[2]s
			component api %[1]s {
				env API_KEY secret-key
			}
			identity {
				issuer https://tools.test
				ttl 2m
			}
			ledger bolt %[3]s/ledger.db
			upstream_timeout 300ms
			max_response_size 1MiB
			max_request_size 64KiB
			tool save {
				description "Save an item."
				display_name "Save item"
				input_schema %[4]s
				target app api POST /items/${input.id}
				query n ${input.n}
				header X-Note ${input.note}
				body ${input}
			}
			tool get_item {
				description "Get an item."
				input_schema %[4]s
				target app api GET /items/${input.id}
			}
			tool typed_body {
				description "Typed body."
				input_schema %[4]s
				target app api PUT /items/x
				body `+"`"+`{"tags":"${input.tags}","n":"${input.n}","label":"id=${input.id} n=${input.n}","lit":"$${input.id}","key":"${env.API_KEY}"}`+"`"+`
			}
			tool md {
				description "Markdown."
				input_schema %[5]s
				target app api GET /md
			}
			tool both {
				description "Markdown and embed."
				input_schema %[5]s
				target app api GET /both
			}
			tool relative_embed {
				description "Bad embed."
				input_schema %[5]s
				target app api GET /relative-embed
			}
			tool no_content {
				description "JSON without content."
				input_schema %[5]s
				target app api GET /no-content
			}
			tool domain_error {
				description "Domain error."
				input_schema %[5]s
				target app api GET /domain-error
			}
			tool slow {
				description "Slow."
				input_schema %[5]s
				target app api GET /slow
			}
			tool big {
				description "Big."
				input_schema %[5]s
				target app api GET /big
			}
			tool cut {
				description "Cut."
				input_schema %[5]s
				target app api GET /cut
			}
			tool card {
				description "Answers a card."
				input_schema `+"`"+`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}`+"`"+`
				target app api GET /card/${input.kind}
			}
			tool slowok {
				description "Slow but fine."
				input_schema %[5]s
				target app api GET /slowok
			}
			tool ext {
				description "External."
				input_schema %[5]s
				target url POST %[1]s/md
			}
		}
	}
	respond "next handler" 200
}
`, upstream, manifestPath, dataDir, testSchema, emptySchema)
}

// dataDir makes a storage folder for Caddy. Caddy outlives the test that
// loaded a config (it keeps running until the next load), so the folder is
// removed by TestMain rather than by t.TempDir's cleanup.
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(testRoot, "data")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var testRoot string

// testGlobals is the global options block of the caddytest configs here:
// the admin endpoint and ports caddytest expects, a short grace period, no
// trust store, storage in dir, and any extra lines.
func testGlobals(dir string, extra ...string) string {
	var b strings.Builder
	b.WriteString("{\n\tadmin localhost:2999\n\thttp_port 9080\n\thttps_port 9443\n\tgrace_period 1ns\n\tskip_install_trust\n\tstorage file_system ")
	b.WriteString(dir)
	b.WriteString("\n")
	for _, e := range extra {
		b.WriteString("\t" + e + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func TestMain(m *testing.M) {
	var err error
	if testRoot, err = os.MkdirTemp("", "toolgate-test"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(testRoot)
	os.Exit(code)
}

const base = "http://127.0.0.1:9080/toolgate"

type answer struct {
	CallID   string `json:"callId"`
	Tool     string `json:"tool"`
	Status   string `json:"status"`
	IsError  bool   `json:"isError"`
	Content  string `json:"content"`
	Markdown string `json:"markdown"`
	EmbedURL string `json:"embedUrl"`
	Card     string `json:"card"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func invoke(t *testing.T, tc *caddytest.Tester, tool, body string, header ...string) (int, answer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("invoke %s: answer is not JSON: %q", tool, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("invoke %s: Content-Type %q", tool, ct)
	}
	return resp.StatusCode, a
}

const who = `"identity":{"user":"u_1","install":"in_1"}`

func startGateway(t *testing.T) (*caddytest.Tester, *recorder, string) {
	rec := newRecorder(t)
	dataDir := dataDir(t)
	tc := caddytest.NewTester(t)
	tc.InitServer(testConfig(t, rec.srv.URL, dataDir), "caddyfile")
	return tc, rec, dataDir
}

func TestInvokeAppTarget(t *testing.T) {
	tc, rec, _ := startGateway(t)

	status, a := invoke(t, tc, "save",
		`{"input":{"id":"a..b c","n":7,"note":"hi","tags":["x"]},"callId":"toolu_01","context":{"source":"thread","threadId":"th_1"},`+who+`}`,
		"Authorization", "Bearer caller-token", "Kazzle-Tool-Context", `{"source":"api"}`)
	if status != 200 || a.IsError || a.Content != "ok" || a.Status != "done" || a.CallID != "toolu_01" || a.Tool != "save" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/a..b%20c" {
		t.Errorf("upstream saw %s %s, want POST /items/a..b%%20c", got.Method, got.Path)
	}
	if got.Query != "n=7" {
		t.Errorf("query %q, want n=7", got.Query)
	}
	if got.Header.Get("X-Note") != "hi" {
		t.Errorf("X-Note %q", got.Header.Get("X-Note"))
	}
	if got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", got.Header.Get("Content-Type"))
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil || body["id"] != "a..b c" || body["n"] != float64(7) {
		t.Errorf("body %s", got.Body)
	}
	if ctx := got.Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"thread","threadId":"th_1"}` {
		t.Errorf("Kazzle-Tool-Context %q", ctx)
	}
	auth := got.Header.Get("Authorization")
	if auth == "Bearer caller-token" || !strings.HasPrefix(auth, "Bearer ") {
		t.Fatalf("Authorization %q: the caller's header went through or none was set", auth)
	}
	claims := verifyWithJWKS(t, tc, strings.TrimPrefix(auth, "Bearer "))
	if claims["iss"] != "https://tools.test" || claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("claims %v", claims)
	}
	if claims["aud"] != "api" {
		t.Errorf("aud %v, want the string api", claims["aud"])
	}
	iat, exp := claims["iat"].(float64), claims["exp"].(float64)
	if exp-iat != 120 {
		t.Errorf("exp-iat = %v, want the configured ttl 120", exp-iat)
	}

	// An api call gets the api context; a GET with no body sends none.
	status, a = invoke(t, tc, "get_item", `{"input":{"id":"b1"},`+who+`}`)
	if status != 200 || a.IsError || !strings.HasPrefix(a.CallID, "call_") {
		t.Fatalf("answer %d %+v", status, a)
	}
	got = rec.get(t, "/items/")
	if got.Method != "GET" || len(got.Body) != 0 || got.Header.Get("Content-Type") != "" {
		t.Errorf("GET sent a body or content type: %q %q", got.Body, got.Header.Get("Content-Type"))
	}
	if ctx := got.Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"api"}` {
		t.Errorf("Kazzle-Tool-Context %q", ctx)
	}
}

func TestInvokeTypedBodyAndURLTarget(t *testing.T) {
	tc, rec, _ := startGateway(t)

	status, a := invoke(t, tc, "typed_body", `{"input":{"id":"${env.API_KEY}","n":12345678901234567890,"tags":["a","b"]},`+who+`}`)
	if status != 200 || a.IsError {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.get(t, "/items/")
	want := `{"key":"secret-key","label":"id=${env.API_KEY} n=12345678901234567890","lit":"${input.id}","n":12345678901234567890,"tags":["a","b"]}`
	if string(got.Body) != want {
		t.Errorf("body\n got %s\nwant %s", got.Body, want)
	}

	// A url target: no identity token, no context header, env from its
	// component, query encoded.
	status, a = invoke(t, tc, "ext_text", `{"input":{"q":"a b&c=d"}}`, "Authorization", "Bearer caller")
	if status != 200 || a.IsError || a.Content != "plain <b>text</b>" || a.Card != "" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got = rec.get(t, "/text")
	if got.Header.Get("Authorization") != "" || got.Header.Get("Kazzle-Tool-Context") != "" {
		t.Errorf("url target got Authorization %q, context %q", got.Header.Get("Authorization"), got.Header.Get("Kazzle-Tool-Context"))
	}
	if got.Query != "q=a+b%26c%3Dd" || got.Header.Get("X-Key") != "secret-key" {
		t.Errorf("query %q, X-Key %q", got.Query, got.Header.Get("X-Key"))
	}
}

func TestInvokeNormalization(t *testing.T) {
	tc, rec, _ := startGateway(t)
	for _, c := range []struct {
		tool     string
		isError  bool
		content  string // substring
		markdown string
		embed    string
		card     string
	}{
		{tool: "md", content: "saved", markdown: "**saved**", card: "markdown"},
		{tool: "both", content: "c", markdown: "m", embed: "https://app.example/card/1", card: "embed"},
		{tool: "from_manifest", content: "plain <b>text</b>"},
		{tool: "ext", content: "saved", markdown: "**saved**", card: "markdown"},
		{tool: "relative_embed", isError: true, content: "embedUrl"},
		{tool: "no_content", isError: true, content: `"content"`},
		{tool: "domain_error", isError: true, content: "404 Not Found: not_found: no bookmark b9"},
		{tool: "slow", isError: true, content: "did not answer within 300ms"},
		{tool: "big", isError: true, content: "larger than max_response_size (1048576 bytes)"},
		{tool: "cut", isError: true, content: "connection broke"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			status, a := invoke(t, tc, c.tool, `{"input":{},`+who+`}`)
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			if a.IsError != c.isError || !strings.Contains(a.Content, c.content) ||
				a.Markdown != c.markdown || a.EmbedURL != c.embed || a.Card != c.card {
				t.Errorf("got %+v", a)
			}
		})
	}
	_ = rec
}

func TestInvokeCallerMistakes(t *testing.T) {
	tc, rec, _ := startGateway(t)
	before := rec.count()
	for _, c := range []struct {
		name   string
		tool   string
		body   string
		status int
		code   string
	}{
		{"unknown tool", "nope", `{"input":{}}`, 404, "unknown_tool"},
		{"not JSON", "save", `{"input":`, 400, "malformed_envelope"},
		{"unknown field", "save", `{"input":{},"inputs":{}}`, 400, "malformed_envelope"},
		{"trailing data", "save", `{"input":{}} {}`, 400, "malformed_envelope"},
		{"trailing brace", "save", `{"input":{}}}`, 400, "malformed_envelope"},
		{"repeated member", "save", `{"input":{"id":"1"},"input":{"id":"2"},` + who + `}`, 400, "malformed_envelope"},
		{"name in another case", "save", `{"Input":{"id":"1"},` + who + `}`, 400, "malformed_envelope"},
		{"not an object", "save", `[{"input":{}}]`, 400, "malformed_envelope"},
		{"bad context", "save", `{"input":{"id":"1"},"context":{"source":"thread"},` + who + `}`, 400, "invalid_context"},
		{"unknown source", "save", `{"input":{"id":"1"},"context":{"source":"chat"},` + who + `}`, 400, "invalid_context"},
		{"no identity for app", "save", `{"input":{"id":"1"}}`, 400, "identity_required"},
		{"bad call id", "save", `{"input":{"id":"1"},"callId":"a b",` + who + `}`, 400, "invalid_call_id"},
		{"too large", "save", `{"input":{"id":"` + strings.Repeat("x", 70<<10) + `"}}`, 413, "too_large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, a := invoke(t, tc, c.tool, c.body)
			if status != c.status || a.Error == nil || a.Error.Code != c.code || a.Error.Message == "" {
				t.Errorf("got %d %+v", status, a.Error)
			}
		})
	}
	// Tool failures the model reads: 200 with isError.
	for _, c := range []struct {
		name, body, want string
	}{
		{"invalid input", `{"input":{"n":"seven"},` + who + `}`, "invalid input"},
		{"additional property", `{"input":{"id":"1","evil":true},` + who + `}`, "evil"},
		{"missing reference", `{"input":{"id":"1"},` + who + `}`, "reference ${input.n}"},
		{"header injection", `{"input":{"id":"1","n":1,"note":"a\r\nX-Evil: 1"},` + who + `}`, "CR, LF or NUL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, a := invoke(t, tc, "save", c.body)
			if status != 200 || !a.IsError || !strings.Contains(a.Content, c.want) {
				t.Errorf("got %d %+v", status, a)
			}
		})
	}
	if n := rec.count(); n != before {
		t.Errorf("the upstream saw %d requests for calls that must never reach it", n-before)
	}
}

func TestToolsListJWKSAndNext(t *testing.T) {
	tc, _, dataDir := startGateway(t)

	resp, err := tc.Client.Get(base + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	var list []struct {
		Name        string          `json:"name"`
		DisplayName string          `json:"displayName"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("tools: %v: %s", err, body)
	}
	byName := map[string]int{}
	for i, l := range list {
		byName[l.Name] = i
	}
	if len(list) != 16 {
		t.Errorf("listed %d tools, want 16", len(list))
	}
	if s := list[byName["save"]]; s.DisplayName != "Save item" || s.Description != "Save an item." || !bytes.Contains(s.InputSchema, []byte(`"required":["id"]`)) {
		t.Errorf("save listed as %+v", s)
	}
	if s := list[byName["md"]]; s.DisplayName != "md" {
		t.Errorf("displayName default: %q", s.DisplayName)
	}

	tc.AssertGetResponse("http://127.0.0.1:9080/elsewhere", 200, "next handler")
	tc.AssertGetResponse(base+"/unowned", 200, "next handler")
	req, _ := http.NewRequest(http.MethodDelete, base+"/tools", nil)
	r := tc.AssertResponseCode(req, 405)
	if r.Header.Get("Allow") != "GET" {
		t.Errorf("Allow %q", r.Header.Get("Allow"))
	}

	// The generated key is kept in storage: a reload serves the same one.
	kid := jwksKeys(t, tc)
	if len(kid) != 1 {
		t.Fatalf("jwks has %d keys", len(kid))
	}
	entries, _ := filepath.Glob(filepath.Join(dataDir, "toolgate", "identity", "*.pem"))
	if len(entries) != 1 {
		t.Errorf("storage holds %v", entries)
	}
	rec2 := newRecorder(t)
	tc.InitServer(testConfig(t, rec2.srv.URL, dataDir), "caddyfile")
	kid2 := jwksKeys(t, tc)
	for k := range kid {
		if _, ok := kid2[k]; !ok {
			t.Errorf("after reload the key %s is gone: %v", k, kid2)
		}
	}
}

func jwksKeys(t *testing.T, tc *caddytest.Tester) map[string]ed25519.PublicKey {
	t.Helper()
	resp, err := tc.Client.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Cache-Control") == "" {
		t.Error("jwks has no Cache-Control")
	}
	var set struct {
		Keys []struct {
			Kty, Crv, X, Kid, Alg string
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" {
			t.Errorf("jwk %+v", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("jwk x %q", k.X)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out
}

func verifyWithJWKS(t *testing.T, tc *caddytest.Tester, token string) jwt.MapClaims {
	t.Helper()
	keys := jwksKeys(t, tc)
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("https://tools.test"), jwt.WithAudience("api")).
		ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
			kid, _ := tok.Header["kid"].(string)
			k, ok := keys[kid]
			if !ok {
				return nil, fmt.Errorf("kid %q not in the JWKS", kid)
			}
			return k, nil
		})
	if err != nil {
		t.Fatalf("identity token does not verify against the served JWKS: %v", err)
	}
	return claims
}

func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tc := caddytest.NewTester(t)
	tc.InitServer(testConfig(t, "http://"+addr, dataDir(t)), "caddyfile")
	status, a := invoke(t, tc, "md", `{"input":{},`+who+`}`)
	if status != 200 || !a.IsError || !strings.Contains(a.Content, "could not be reached") {
		t.Errorf("got %d %+v", status, a)
	}
}

func TestLoadErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tools":[{"name":"ok","description":"d","input_schema":{"type":"object"},"target":{"type":"app","component":"nope","method":"GET","path":"/"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := func(inner string) string {
		return testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	toolgate {
		component api http://127.0.0.1:1
` + inner + `
	}
}`
	}
	for _, c := range []struct{ name, inner, want string }{
		{"broken manifest", "manifest " + bad, `manifest ` + bad + `: tool "ok": target: app target: component "nope" is not declared`},
		{"missing manifest", "manifest /nonexistent/tools.json", "manifest /nonexistent/tools.json"},
		{"authorization header", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /\nheader authorization x\n}", `Caddyfile:13: tool "t": target: app target: header "authorization" belongs to the gateway`},
		{"bad name", "tool t.x {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /\n}", `tool "t.x": name`},
		{"bad schema", "tool t {\ndescription d\ninput_schema `{\"type\":\"array\"}`\ntarget app api GET /\n}", `tool "t": input_schema: the top level must be "type": "object"`},
		{"origin from input", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget url GET https://${input.host}/\n}", `may not fill the scheme, host or port`},
		{"unknown env", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /${env.NOPE}\n}", `declares no env NOPE`},
		{"never resolves", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}`\ntarget app api GET /${input.id}\n}", `${input.id} can never resolve`},
		{"duplicate", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /\n}\ntool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /\n}", `duplicate name`},
		{"unknown subdirective", "frobnicate", "unrecognized subdirective frobnicate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The admin API answers the error inside JSON.
			caddytest.AssertLoadError(t, cfg(c.inner), "caddyfile", strings.ReplaceAll(c.want, `"`, `\"`))
		})
	}
}

// TestBrokenReloadChangesNothing loads a good config, then a broken one:
// the load fails naming the tool, and the running gateway keeps serving.
func TestBrokenReloadChangesNothing(t *testing.T) {
	tc, rec, dir := startGateway(t)
	broken := strings.Replace(testConfig(t, rec.srv.URL, dir), "target app api GET /md", "target app nowhere GET /md", 1)
	caddytest.AssertLoadError(t, broken, "caddyfile", `tool \"md\": target: app target: component \"nowhere\" is not declared`)
	status, a := invoke(t, tc, "md", `{"input":{},`+who+`}`)
	if status != 200 || a.IsError || a.Markdown != "**saved**" {
		t.Errorf("after a failed reload: %d %+v", status, a)
	}
}
