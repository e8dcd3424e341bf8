package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
)

const mcpEndpoint = base + "/mcp"

// mcpConfig is testConfig with one more manifest: a tool with MCP
// annotations. extra lines go into the toolgate block.
func mcpConfig(t *testing.T, upstream, dir string, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "annotated.json")
	m := `{"tools":[{"name":"annotated","displayName":"Annotated tool","description":"Has hints.","input_schema":{"type":"object","properties":{}},
"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},
"target":{"type":"app","component":"api","method":"GET","path":"/md"}}]}`
	if err := os.WriteFile(path, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, upstream, dir)
	inner := "toolgate {\n\t\t\tmanifest " + path + "\n"
	for _, e := range extra {
		inner += "\t\t\t" + e + "\n"
	}
	out := strings.Replace(cfg, "toolgate {\n", inner, 1)
	if out == cfg {
		t.Fatal("mcpConfig: no toolgate block to extend")
	}
	return out
}

func startMCPGateway(t *testing.T, extra ...string) (*caddytest.Tester, *apitest.Recorder) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	tc.InitServer(mcpConfig(t, rec.URL, dataDir(t), extra...), "caddyfile")
	return tc, rec
}

// bearer adds a caller token to every request of the MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type mcpClient struct {
	version     string // "" for the SDK's latest
	token       string
	elicit      func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	noRoundTrip bool // MultiRoundTripOptions{Disabled: true}
}

func (o mcpClient) connect(ctx context.Context) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{ElicitationHandler: o.elicit}
	if o.noRoundTrip {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, opts)
	hc := &http.Client{Timeout: 10 * time.Second}
	if o.token != "" {
		hc.Transport = bearer{o.token, http.DefaultTransport}
	}
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpEndpoint, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: o.version})
}

func (o mcpClient) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := o.connect(ctx)
	if err != nil {
		t.Fatalf("connect (version %q): %v", o.version, err)
	}
	t.Cleanup(func() { cs.Close() })
	want := o.version
	if want == "" {
		want = "2026-07-28"
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated protocol %q, want %q", got, want)
	}
	return cs
}

// u1 names the caller u_1/in_1. It is a fresh map each time: the SDK
// client writes its own keys (protocol version, client capabilities) into
// the _meta map it is given, so a map shared between clients would carry
// one client's capabilities into another's calls.
func u1() mcp.Meta {
	return mcp.Meta{"toolgate/identity": map[string]any{"user": "u_1", "install": "in_1"}}
}

func callTool(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("call %s: %v", p.Name, err)
	}
	return res
}

// texts returns the text items of a result.
func texts(res *mcp.CallToolResult) []*mcp.TextContent {
	var out []*mcp.TextContent
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc)
		}
	}
	return out
}

// modelText is the one text item without an audience: what the model reads.
func modelText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var found []string
	for _, c := range texts(res) {
		if c.Annotations == nil || len(c.Annotations.Audience) == 0 || slices.Contains(c.Annotations.Audience, "assistant") {
			found = append(found, c.Text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one text item for the model, got %q (result %s)", found, dump(res))
	}
	return found[0]
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}
