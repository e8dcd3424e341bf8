package caddymodule

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// mcpServerConfig is a gateway with one upstream MCP server, crm, at url,
// and a tool of its own; note varies the config, so that loading it again
// is a reload.
func mcpServerConfig(dir, url, note string) string {
	return testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			# %[3]s
			identity {
				issuer https://tools.test
			}
			ledger bolt %[1]s/ledger.db
			mcp_server crm %[2]s {
				prefix crm_
				identity
				header X-Api-Key {env.TOOLGATE_TEST_CRM_KEY}
				allow "user != 'mallory'"
				timeout 3s
			}
			tool crm_local {
				description "A tool of the gateway's own, beside the server's."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target url GET https://example.com/
			}
		}
	}
}`, dir, url, note)
}

// upstreamCall invokes tool as u_1 at in_1, with callID if not "".
func upstreamCall(t *testing.T, tc *caddytest.Tester, tool, input, callID string, thread bool) apitest.CardAnswer {
	t.Helper()
	body := `{"input":` + input + `,` + apitest.Who
	if callID != "" {
		body += `,"callId":"` + callID + `"`
	}
	if thread {
		body += `,` + apitest.ThreadCtx
	}
	status, a := client(tc).Call(t, "POST", "/tools/"+tool, body+`}`)
	if status != 200 {
		t.Fatalf("%s: status %d: %+v", tool, status, a)
	}
	return a
}

func listedTools(t *testing.T, tc *caddytest.Tester) map[string]string {
	t.Helper()
	_, body := client(tc).Get(t, base+"/tools")
	var list []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema jsontext.Value `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /tools: %v: %s", err, body)
	}
	out := map[string]string{}
	for _, tool := range list {
		out[tool.Name] = string(tool.InputSchema)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPServerBehindGateway puts an MCP server built with the official Go
// SDK behind the gateway and holds its tools to the gateway's rules.
func TestMCPServerBehindGateway(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_CRM_KEY", "k-123")
	up := upstreamtest.New()
	url := up.Serve(t)
	dir := dataDir(t)
	tc := caddytest.NewTester(t)
	initServer(tc, mcpServerConfig(dir, url, "first"))

	t.Run("listed under the prefix, with the server's schema", func(t *testing.T) {
		tools := listedTools(t, tc)
		for _, name := range []string{"crm_echo", "crm_create", "crm_whoami", "crm_approve", "crm_local"} {
			if _, ok := tools[name]; !ok {
				t.Errorf("%s not listed: %v", name, tools)
			}
		}
		if !strings.Contains(tools["crm_echo"], `"maxLength":100`) {
			t.Errorf("crm_echo's schema = %s", tools["crm_echo"])
		}
	})

	t.Run("identity verified against the gateway's JWKS", func(t *testing.T) {
		a := upstreamCall(t, tc, "crm_whoami", `{}`, "", false)
		token, ok := strings.CutPrefix(a.Content, "Bearer ")
		if a.IsError || !ok {
			t.Fatalf("whoami = %+v", a)
		}
		keys := client(tc).JWKSKeys(t)
		claims := jwt.MapClaims{}
		_, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("https://tools.test"), jwt.WithAudience("crm")).
			ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) { return keys[tok.Header["kid"].(string)], nil })
		if err != nil || claims["sub"] != "u_1" || claims["install"] != "in_1" {
			t.Fatalf("the token does not verify for crm: %v %v", err, claims)
		}
		h := up.Headers()
		if len(h) == 0 || h[len(h)-1].Get("X-Api-Key") != "k-123" {
			t.Errorf("the static header was not sent: %v", h)
		}
	})

	t.Run("a repeat reaches the server once", func(t *testing.T) {
		first := upstreamCall(t, tc, "crm_create", `{"name":"ada"}`, "once-1", false)
		again := upstreamCall(t, tc, "crm_create", `{"name":"ada"}`, "once-1", false)
		if first.Content != "created ada (run 1)" || again.Content != first.Content {
			t.Errorf("first %+v, again %+v", first, again)
		}
		if n := up.Runs("create"); n != 1 {
			t.Errorf("create ran %d times", n)
		}
	})

	t.Run("the server's allow expression", func(t *testing.T) {
		status, body := client(tc).Send(t, "POST", base+"/tools/crm_create", "application/json", `{"input":{"name":"x"},"identity":{"user":"mallory"}}`)
		if status != 403 || !strings.Contains(body, `"forbidden"`) {
			t.Errorf("mallory: %d %s", status, body)
		}
		if n := up.Runs("create"); n != 1 {
			t.Errorf("create ran %d times", n)
		}
	})

	t.Run("a schema violation sends nothing", func(t *testing.T) {
		a := upstreamCall(t, tc, "crm_echo", `{"text":"`+strings.Repeat("x", 101)+`"}`, "", false)
		if !a.IsError || !strings.Contains(a.Content, "maxLength") {
			t.Errorf("echo = %+v", a)
		}
		if a := upstreamCall(t, tc, "crm_echo", `{"text":"hi","extra":1}`, "", false); !a.IsError {
			t.Errorf("echo with an extra property = %+v", a)
		}
		if n := up.Runs("echo"); n != 0 {
			t.Errorf("echo ran %d times", n)
		}
	})

	t.Run("input_required resumed after a reload", func(t *testing.T) {
		a := upstreamCall(t, tc, "crm_approve", `{"item":"inv-7"}`, "appr-1", true)
		if a.Status != "action_required" || a.CardObj.Title != "Approve inv-7?" {
			t.Fatalf("approve = %+v", a)
		}
		// A new config: the gateway's calls and cards are in the ledger,
		// not in the config that paused them.
		initServer(tc, mcpServerConfig(dir, url, "second"))
		status, r := client(tc).Call(t, "POST", "/calls/appr-1/resume", `{"buttonId":"choice-0",`+apitest.Who+`}`)
		if status != 200 || r.IsError || r.Content != "approved inv-7" {
			t.Fatalf("resume: %d %+v", status, r)
		}
		if n := up.Runs("approve"); n != 2 {
			t.Errorf("approve ran %d times, want 2 (the ask, the answer)", n)
		}
	})

	t.Run("MCP clients get the server's output schema and structured content", func(t *testing.T) {
		cs := apitest.MCPClient{Endpoint: base + "/mcp"}.Session(t)
		tools := apitest.ListTools(t, cs)
		if tools["crm_echo"] == nil || tools["crm_echo"].OutputSchema == nil {
			t.Fatalf("crm_echo over MCP: %s", apitest.Dump(tools["crm_echo"]))
		}
		res := apitest.CallTool(t, cs, &sdk.CallToolParams{Name: "crm_echo", Arguments: map[string]any{"text": "hi"}, Meta: apitest.U1()})
		if res.IsError || apitest.ModelText(t, res) != "hi" || !strings.Contains(apitest.Dump(res.StructuredContent), `"echo":"hi"`) {
			t.Errorf("crm_echo over MCP: %s", apitest.Dump(res))
		}

		// An MCP Apps tool keeps its view, served under the gateway's name.
		ui, _ := tools["crm_board"].Meta["ui"].(map[string]any)
		view, _ := ui["resourceUri"].(string)
		if view != "ui://toolgate/upstream/crm/upstreamtest/board.html" || fmt.Sprint(ui["visibility"]) != "[model app]" {
			t.Fatalf("crm_board's _meta: %s", apitest.Dump(tools["crm_board"].Meta))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: view})
		if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != upstreamtest.BoardHTML || got.Contents[0].URI != view {
			t.Fatalf("reading the view: %v %s", err, apitest.Dump(got))
		}
		// Only the views the tools name: no other resource of the server.
		for _, uri := range []string{"ui://toolgate/upstream/crm/upstreamtest/secret.html", "ui://toolgate/upstream/other/upstreamtest/board.html"} {
			if got, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
				t.Errorf("read %s through the gateway: %s", uri, apitest.Dump(got))
			}
		}
	})

	t.Run("a list change is seen without a reload", func(t *testing.T) {
		time.Sleep(200 * time.Millisecond)
		up.AddTool("later")
		waitFor(t, "crm_later listed", func() bool { _, ok := listedTools(t, tc)["crm_later"]; return ok })
		if a := upstreamCall(t, tc, "crm_later", `{}`, "", false); a.Content != "later ran" {
			t.Errorf("later = %+v", a)
		}
	})

	metric := func(line string) bool {
		_, body := client(tc).Get(t, "http://localhost:2999/metrics")
		return strings.Contains(body, line+"\n")
	}
	t.Run("a server that goes away and comes back", func(t *testing.T) {
		if !metric(`caddy_toolgate_mcp_server_up{mcp_server="crm"} 1`) {
			t.Error("the server is not up in the metrics")
		}
		if !metric(`caddy_toolgate_calls_total{outcome="done",target_type="mcp",tool="crm_create"} 1`) {
			t.Error("crm_create's call is not counted")
		}
		if !metric(`caddy_toolgate_calls_total{outcome="done",target_type="mcp",tool="crm_later"} 1`) {
			t.Error("crm_later, listed after the load, is not counted")
		}
		up.Stop()
		a := upstreamCall(t, tc, "crm_echo", `{"text":"x"}`, "", false)
		if !a.IsError || !strings.Contains(a.Content, "mcp server crm") || strings.Contains(a.Content, "k-123") || strings.Contains(a.Content, "127.0.0.1") {
			t.Errorf("while down: %+v", a)
		}
		waitFor(t, "the server down in the metrics", func() bool { return metric(`caddy_toolgate_mcp_server_up{mcp_server="crm"} 0`) })
		up.Restart(t)
		waitFor(t, "a call after the restart", func() bool {
			return upstreamCall(t, tc, "crm_echo", `{"text":"back"}`, "", false).Content == "back"
		})
	})
}

// TestMCPServerLoadErrors: a server the gateway must not reach, or tools
// that clash, are config errors naming the server and the tools.
func TestMCPServerLoadErrors(t *testing.T) {
	up := upstreamtest.New()
	url := up.Serve(t)
	cfg := func(inner string) string {
		return testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	toolgate {
` + inner + `
	}
}`
	}
	for _, c := range []struct{ name, inner, want string }{
		{"http elsewhere", "mcp_server crm http://crm.example/mcp", `mcp server "crm": url "http://crm.example/mcp": http only to a loopback address`},
		{"clash", "mcp_server crm " + url + " {\nprefix crm_\n}\ntool crm_echo {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget url GET https://example.com/\n}",
			`mcp server crm: tool "crm_echo": the name is taken by a tool of inline tools`},
		{"undeclared", "tool t {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget mcp erp search\n}", `mcp server "erp" is not declared`},
		{"component name", "component crm http://127.0.0.1:1\nmcp_server crm " + url, `a component has the same name`},
		{"bad allow", "mcp_server crm " + url + " {\nallow \"user ==\"\n}", `mcp server "crm": allow:`},
	} {
		t.Run(c.name, func(t *testing.T) {
			caddytest.AssertLoadError(t, cfg(c.inner), "caddyfile", strings.ReplaceAll(c.want, `"`, `\"`))
		})
	}
}

// TestMCPServerTypeScriptStdio puts the TypeScript example server
// (examples/mcp/contacts-server.mjs, the official TypeScript SDK) behind
// the gateway over stdio, started by the gateway itself.
func TestMCPServerTypeScriptStdio(t *testing.T) {
	root, _ := filepath.Abs("..")
	script := filepath.Join(root, "examples", "mcp", "contacts-server.mjs")
	if _, err := os.Stat(filepath.Join(root, "examples", "mcp", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("examples/mcp has no node_modules: run npm ci there")
		}
		t.Skip("examples/mcp has no node_modules (npm ci there)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	dir := dataDir(t)
	cfg := testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			ledger bolt %[1]s/ledger.db
			mcp_server contacts command %[2]s %[3]s {
				tools search_contacts create_contact
				timeout 10s
			}
		}
	}
}`, dir, node, script)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)
	tools := listedTools(t, tc)
	var names []string
	for name := range tools {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"create_contact", "search_contacts"}) {
		t.Fatalf("tools = %v", names)
	}
	a := upstreamCall(t, tc, "search_contacts", `{"query":"ada"}`, "", false)
	if a.IsError || !strings.Contains(a.Content, "Ada Lovelace") {
		t.Errorf("search = %+v", a)
	}
	first := upstreamCall(t, tc, "create_contact", `{"name":"Grace","email":"grace@example.com"}`, "ts-1", false)
	again := upstreamCall(t, tc, "create_contact", `{"name":"Grace","email":"grace@example.com"}`, "ts-1", false)
	if first.IsError || !strings.Contains(first.Content, "(run 1)") || again.Content != first.Content {
		t.Errorf("create: first %+v, again %+v", first, again)
	}
	if bad := upstreamCall(t, tc, "create_contact", `{"name":"Grace","email":"not an email"}`, "", false); !bad.IsError || !strings.Contains(bad.Content, "email") {
		t.Errorf("a bad email = %+v", bad)
	}
	if next := upstreamCall(t, tc, "create_contact", `{"name":"Alan","email":"alan2@example.com"}`, "", false); !strings.Contains(next.Content, "(run 2)") {
		t.Errorf("the next create = %+v; a refused input must not have run", next)
	}
}
