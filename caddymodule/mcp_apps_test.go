package caddymodule

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
)

// TestCaddyfileUI: a tool block's `ui on | off` is the manifest's "ui";
// anything else, a repeat, or ui on a url tool is an error naming the tool
// and its line; the card answer tool's name is reserved.
func TestCaddyfileUI(t *testing.T) {
	tool := func(extra ...string) []string {
		return append([]string{api, "tool t {", "description d", `input_schema {"type":"object"}`, "target app api GET /x"}, append(extra, "}")...)
	}
	for _, c := range []struct {
		lines []string
		want  string // the tool's "ui" member, or "" for none
	}{
		{tool(), ""},
		{tool("ui off"), `"ui":false`},
		{tool("ui on"), `"ui":true`},
	} {
		h, err := parseToolgate(c.lines...)
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		b, _ := json.Marshal(h.Tools[0])
		if c.want == "" && strings.Contains(string(b), `"ui"`) || c.want != "" && !strings.Contains(string(b), c.want) {
			t.Errorf("%q parsed to %s, want %q", c.lines, b, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"not on or off", tool("ui false"), "tool t: want: ui on | off, at Testfile:7"},
		{"no argument", tool("ui"), "wrong argument count or unexpected line ending after 'ui', at Testfile:7"},
		{"two arguments", tool("ui on off"), "wrong argument count"},
		{"repeated", tool("ui on", "ui off"), "tool t: ui already specified"},
		{"on a url tool", []string{api, "tool t {", "description d", `input_schema {"type":"object"}`, "target url GET https://x.example/", "ui on", "}"},
			`Testfile:3: tool "t": ui: only an app target shows in the MCP Apps view`},
		{"the card answer tool's name", []string{api, "tool toolgate_card_answer {", "description d", `input_schema {"type":"object"}`, "target app api GET /x", "}"},
			`Testfile:3: tool "toolgate_card_answer": name "toolgate_card_answer" is reserved`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseToolgate(c.lines...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// appsSession connects an MCP client that declares the MCP Apps extension
// (and no elicitation) to the gateway at version ("" for the SDK's latest,
// served statelessly).
func appsSession(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}})
	client := mcp.NewClient(&mcp.Implementation{Name: "apps-host", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpEndpoint, HTTPClient: &http.Client{Timeout: 10 * time.Second}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPApps runs MCP Apps end to end in Caddy: an Apps client sees the
// view on app tools (not on a `ui off` one), reads the view, gets answers
// as structuredContent, and answers a card from the view, which reaches
// the button's target once; a plain client sees none of it.
func TestMCPApps(t *testing.T) {
	_, rec := startMCPGateway(t, "tool quiet {\n\t\t\t\tdescription Quiet.\n\t\t\t\tinput_schema `{\"type\":\"object\"}`\n\t\t\t\ttarget app api GET /both\n\t\t\t\tui off\n\t\t\t}",
		"mcp {\n\t\t\t\tembed_origins https://Site.Example\n\t\t\t}")
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("version "+version, func(t *testing.T) {
			apps := appsSession(t, version)
			plain := apitest.MCPClient{Endpoint: mcpEndpoint, Version: version}.Session(t)

			tools := apitest.ListTools(t, apps)
			if m := apitest.Dump(tools["both"].Meta); m != `{"ui":{"resourceUri":"ui://toolgate/card"},"ui/resourceUri":"ui://toolgate/card"}` {
				t.Errorf("both: _meta %s", m)
			}
			for _, name := range []string{"quiet", "ext"} {
				if tools[name] == nil || tools[name].Meta != nil {
					t.Errorf("%s: %s", name, apitest.Dump(tools[name]))
				}
			}
			if tools["toolgate_card_answer"] == nil {
				t.Error("toolgate_card_answer is not listed to the Apps client")
			}
			plainTools := apitest.ListTools(t, plain)
			if plainTools["toolgate_card_answer"] != nil || plainTools["both"].Meta != nil || len(plainTools) != len(tools)-1 {
				t.Errorf("the plain client's list: %d tools, both %s", len(plainTools), apitest.Dump(plainTools["both"]))
			}

			read, err := apps.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://toolgate/card"})
			if err != nil {
				t.Fatal(err)
			}
			if c := read.Contents[0]; len(read.Contents) != 1 || c.MIMEType != "text/html;profile=mcp-app" || !strings.Contains(c.Text, "<html") ||
				apitest.Dump(c.Meta) != `{"ui":{"csp":{"connectDomains":[],"frameDomains":["`+rec.URL+`","https://site.example"],"resourceDomains":[]},"prefersBorder":true}}` {
				t.Errorf("resources/read: %s", apitest.Dump(read))
			}

			res := apitest.CallTool(t, apps, &mcp.CallToolParams{Name: "both", Arguments: map[string]any{}, Meta: apitest.U1()})
			sc, _ := res.StructuredContent.(map[string]any)
			if sc["status"] != "done" || sc["embedUrl"] != "https://app.example/card/1" || sc["card"] != "embed" || len(res.Content) != 2 {
				t.Errorf("both for the view: %s", apitest.Dump(res))
			}
			res = apitest.CallTool(t, apps, &mcp.CallToolParams{Name: "quiet", Arguments: map[string]any{}, Meta: apitest.U1()})
			if res.StructuredContent != nil || len(res.Content) != 3 {
				t.Errorf("quiet (ui off) is a plain result: %s", apitest.Dump(res))
			} else if link, ok := res.Content[2].(*mcp.ResourceLink); !ok || link.URI != "https://app.example/card/1" {
				t.Errorf("quiet's embed: %s", apitest.Dump(res.Content[2]))
			}

			// A card, answered from the view: its button's target once.
			res = apitest.CallTool(t, apps, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{"kind": "plain"}, Meta: apitest.U1()})
			state, _ := res.Meta["toolgate/state"].(string)
			sc, _ = res.StructuredContent.(map[string]any)
			if res.IsError || state == "" || sc["status"] != "action_required" || !strings.Contains(apitest.ModelText(t, res), `"Send the email?"`) {
				t.Fatalf("card for the view: %s", apitest.Dump(res))
			}
			before := rec.Count()
			press := &mcp.CallToolParams{Name: "toolgate_card_answer", Arguments: map[string]any{"state": state, "button": "run"}, Meta: apitest.U1()}
			res = apitest.CallTool(t, apps, press)
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["status"] != "done" || apitest.ModelText(t, res) != "ok" {
				t.Fatalf("pressing run: %s", apitest.Dump(res))
			}
			got := rec.Get(t, "/items/")
			if n := rec.Count() - before; n != 1 || got.Method != "POST" || got.Path != "/items/z9" || !strings.Contains(got.Header.Get("Kazzle-Tool-Context"), `"source":"thread"`) {
				t.Errorf("the button's target: %d requests, the last %s %s context %s", n, got.Method, got.Path, got.Header.Get("Kazzle-Tool-Context"))
			}
			press.Meta = apitest.U1()
			res = apitest.CallTool(t, apps, press)
			if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "already used") || rec.Count()-before != 1 {
				t.Errorf("pressed again: %s, %d requests", apitest.Dump(res), rec.Count()-before)
			}
			// The plain client is not offered the tool.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "toolgate_card_answer", Arguments: map[string]any{"state": state, "button": "run"}, Meta: apitest.U1()}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("the plain client called toolgate_card_answer: %v", err)
			}
		})
	}
}

// TestMCPEmbedOriginsLoadError: an embed origin that is not one fails the
// load, naming the option, before it could reach a host's CSP.
func TestMCPEmbedOriginsLoadError(t *testing.T) {
	rec := apitest.NewRecorder(t)
	cfg := mcpConfig(t, rec.URL, dataDir(t), "mcp {\n\t\t\t\tembed_origins https://*.example.com\n\t\t\t}")
	caddytest.AssertLoadError(t, cfg, "caddyfile", `mcp: embed_origins: embed origin \"https://*.example.com\" must be scheme://host[:port]`)
}
