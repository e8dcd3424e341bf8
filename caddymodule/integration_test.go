package caddymodule

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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
