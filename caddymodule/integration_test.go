package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/toolgate/toolgate/internal/apitest"
)

// The test schemas as Caddyfile tokens.
const (
	testSchema  = "`" + apitest.TestSchema + "`"
	emptySchema = "`" + apitest.EmptySchema + "`"
)

func testConfig(t *testing.T, upstream, dataDir string) string {
	manifestPath := filepath.Join(t.TempDir(), "tools.json")
	manifest := apitest.Manifest(upstream)
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

// client sends requests to the gateway the tester serves at base.
func client(tc *caddytest.Tester) apitest.Client {
	return apitest.Client{HTTP: tc.Client, Base: base}
}

// initServer loads cfg (a Caddyfile) into the test Caddy, as
// tc.InitServer does, and then waits for the servers of the config it
// replaced to stop taking connections: Caddy's load returns once their
// shutdowns have started, "but the scheduler might still pause them right
// before calling Shutdown()" (caddyhttp.App.Stop), and a request accepted
// by such a server in that moment fails with EOF, as TestManifestTypeScript
// and TestDirectiveCallers each did once on a busy machine. Fresh
// connections to the site until three in a row are answered take whatever
// a late old server still accepts; the client's idle connections, which
// were the old servers', are dropped.
func initServer(tc *caddytest.Tester, cfg string) {
	tc.InitServer(cfg, "caddyfile")
	settle(tc)
}

// settle waits for the site at 127.0.0.1:9080 to answer three fresh
// connections in a row (at most two seconds), and drops tc's idle ones.
func settle(tc *caddytest.Tester) {
	tc.Client.CloseIdleConnections()
	probe := func() bool {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:9080", time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(conn, "GET /.settle HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
	deadline := time.Now().Add(2 * time.Second)
	for ok := 0; ok < 3 && time.Now().Before(deadline); {
		if probe() {
			ok++
		} else {
			// Refused or cut: no busy loop while the servers change.
			ok = 0
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func startGateway(t *testing.T) (*caddytest.Tester, *apitest.Recorder, string) {
	rec := apitest.NewRecorder(t)
	dataDir := dataDir(t)
	tc := caddytest.NewTester(t)
	initServer(tc, testConfig(t, rec.URL, dataDir))
	return tc, rec, dataDir
}

func TestLoadErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tools":[{"name":"ok","description":"d","input_schema":{"type":"object"},"target":{"type":"app","component":"nope","method":"GET","path":"/"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := func(inner string) string { return loadErrorConfig(t, inner) }
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
	broken := strings.Replace(testConfig(t, rec.URL, dir), "target app api GET /md", "target app nowhere GET /md", 1)
	caddytest.AssertLoadError(t, broken, "caddyfile", `tool \"md\": target: app target: component \"nowhere\" is not declared`)
	status, a := client(tc).Invoke(t, "md", `{"input":{},`+apitest.Who+`}`)
	if status != 200 || a.IsError || a.Markdown != "**saved**" {
		t.Errorf("after a failed reload: %d %+v", status, a)
	}
}

// loadErrorConfig is a site whose toolgate block has a component api
// (on a port nothing answers) and the lines inner, for the tests of what
// a config load refuses.
func loadErrorConfig(t *testing.T, inner string) string {
	return testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	toolgate {
		component api http://127.0.0.1:1
` + inner + `
	}
}`
}
