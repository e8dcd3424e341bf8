package apitest

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// AnnotatedManifest is a tools.json with one tool, annotated, that has MCP
// annotations and answers like md.
const AnnotatedManifest = `{"tools":[{"name":"annotated","displayName":"Annotated tool","description":"Has hints.","input_schema":{"type":"object","properties":{}},
"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},
"target":{"type":"app","component":"api","method":"GET","path":"/md"}}]}`

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

// MCPClient is how an MCP SDK client connects to the gateway.
type MCPClient struct {
	Endpoint    string // the gateway's /mcp URL
	Version     string // "" for the SDK's latest
	Token       string // a caller token, sent as a bearer; none if ""
	Elicit      func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	NoRoundTrip bool // MultiRoundTripOptions{Disabled: true}
}

// Connect opens a session.
func (o MCPClient) Connect(ctx context.Context) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{ElicitationHandler: o.Elicit}
	if o.NoRoundTrip {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, opts)
	hc := &http.Client{Timeout: 10 * time.Second}
	if o.Token != "" {
		hc.Transport = bearer{o.Token, http.DefaultTransport}
	}
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: o.Endpoint, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: o.Version})
}

// Session connects within 10 s, checks the negotiated protocol version,
// and closes the session when the test ends.
func (o MCPClient) Session(t testing.TB) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := o.Connect(ctx)
	if err != nil {
		t.Fatalf("connect (version %q): %v", o.Version, err)
	}
	t.Cleanup(func() { cs.Close() })
	want := o.Version
	if want == "" {
		want = "2026-07-28"
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated protocol %q, want %q", got, want)
	}
	return cs
}

// U1 names the caller u_1/in_1. It is a fresh map each time: the SDK
// client writes its own keys (protocol version, client capabilities) into
// the _meta map it is given, so a map shared between clients would carry
// one client's capabilities into another's calls.
func U1() mcp.Meta {
	return mcp.Meta{"toolgate/identity": map[string]any{"user": "u_1", "install": "in_1"}}
}

// CallTool calls a tool within 10 s, failing the test on a protocol error.
func CallTool(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("call %s: %v", p.Name, err)
	}
	return res
}

// Texts returns the text items of a result.
func Texts(res *mcp.CallToolResult) []*mcp.TextContent {
	var out []*mcp.TextContent
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc)
		}
	}
	return out
}

// ModelText is the one text item without an audience: what the model reads.
func ModelText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	var found []string
	for _, c := range Texts(res) {
		if c.Annotations == nil || len(c.Annotations.Audience) == 0 || slices.Contains(c.Annotations.Audience, "assistant") {
			found = append(found, c.Text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one text item for the model, got %q (result %s)", found, Dump(res))
	}
	return found[0]
}

// Dump is v as JSON, for failure messages.
func Dump(v any) string {
	b, _ := json.Marshal(v, jsonread.Legacy)
	return string(b)
}

// ListTools lists the tools within 10 s, by name.
func ListTools(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
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

// MCPInitialize is an MCP initialize request, as the first a client sends.
const MCPInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// PostMCPInitialize posts MCPInitialize to endpoint with client, with the
// bearer token if any, and returns the answer with its body read.
func PostMCPInitialize(t testing.TB, client *http.Client, endpoint, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(MCPInitialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
