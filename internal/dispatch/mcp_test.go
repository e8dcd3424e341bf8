package dispatch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
)

// fakeServer is an upstream MCP server that is never called.
type fakeServer struct {
	name       string
	identity   bool
	connection string
}

func (s fakeServer) Name() string        { return s.name }
func (s fakeServer) SendsIdentity() bool { return s.identity }
func (s fakeServer) Connection() string  { return s.connection }
func (s fakeServer) Call(context.Context, dispatch.MCPCall) dispatch.Outcome {
	panic("not called")
}

func testServers() map[string]dispatch.MCPServer {
	return map[string]dispatch.MCPServer{
		"crm":  fakeServer{name: "crm"},
		"mail": fakeServer{name: "mail", identity: true},
	}
}

// TestMCPTargets: an mcp target names a declared server and a tool, and
// nothing an HTTP target takes.
func TestMCPTargets(t *testing.T) {
	env := dispatch.Env{Components: testComponents(t), Servers: testServers()}
	for _, c := range []struct {
		name string
		spec dispatch.Spec
		err  string // "" compiles
	}{
		{"ok", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "search"}, ""},
		{"no server", dispatch.Spec{Type: "mcp", Tool: "search"}, "server is required"},
		{"no tool", dispatch.Spec{Type: "mcp", Server: "crm"}, "tool is required"},
		{"undeclared", dispatch.Spec{Type: "mcp", Server: "erp", Tool: "x"}, `mcp server "erp" is not declared`},
		{"url", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x", URL: "https://x.example/"}, "only server, tool and result"},
		{"headers", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x", Headers: map[string]string{"X": "y"}}, "only server, tool and result"},
		{"component", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x", Component: "api"}, "only server, tool and result"},
		{"continue", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x", Continue: true}, "continue is the gateway's"},
		{"result without a compiler", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x", Result: "body.content"}, "cannot be compiled here"},
		{"app with server", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Server: "crm"}, "server and tool are for mcp targets"},
		{"url with tool", dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/", Tool: "x"}, "server and tool are for mcp targets"},
		{"kazzle with server", dispatch.Spec{Type: "kazzle", Name: "x", Server: "crm"}, "only name may be set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := dispatch.Compile(c.spec, env)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Compile: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Compile: %v, want %q", err, c.err)
			}
		})
	}
}

// TestMCPNeedsUser: a call needs a user when its server is sent identity.
func TestMCPNeedsUser(t *testing.T) {
	env := dispatch.Env{Servers: testServers()}
	for server, want := range map[string]bool{"crm": false, "mail": true} {
		tgt, err := dispatch.Compile(dispatch.Spec{Type: "mcp", Server: server, Tool: "x"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if tgt.NeedsUser() != want {
			t.Errorf("%s: NeedsUser = %v, want %v", server, tgt.NeedsUser(), want)
		}
	}
}

// TestMCPCardButtons: a card answered by an mcp target has buttons that
// only continue that target's call; nothing a card holds sends anything
// else, to another server, tool, component or URL.
func TestMCPCardButtons(t *testing.T) {
	comps := testComponents(t)
	owner, err := dispatch.Compile(dispatch.Spec{Type: "mcp", Server: "crm", Tool: "create"}, dispatch.Env{Servers: testServers()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := dispatch.CompileCardButton(jsontext.Value(`{"type":"mcp","server":"crm","tool":"create","continue":true}`), owner)
	if err != nil {
		t.Fatalf("the gateway's own button: %v", err)
	}
	if b.Server != owner.Server || !b.Spec.Continue || b.Kind().Name() != "mcp" {
		t.Errorf("button target = %+v", b.Spec)
	}
	for _, raw := range []string{
		`{"type":"mcp","server":"crm","tool":"create"}`,
		`{"type":"mcp","server":"crm","tool":"delete","continue":true}`,
		`{"type":"mcp","server":"mail","tool":"create","continue":true}`,
		`{"type":"mcp","server":"crm","tool":"create","continue":true,"url":"http://127.0.0.1:2019/load"}`,
		`{"type":"app","component":"api","method":"POST","path":"/x"}`,
		`{"type":"url","method":"POST","url":"http://127.0.0.1:2019/load"}`,
		`{"type":"kazzle","name":"where"}`,
		`{"type":"mcp","server":"crm","tool":"create","continue":true,"extra":1}`,
	} {
		if _, err := dispatch.CompileCardButton(jsontext.Value(raw), owner); err == nil {
			t.Errorf("button %s compiled for an mcp card", raw)
		}
	}
	// An app's card cannot hold a button that calls an MCP server.
	app, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, dispatch.Env{Components: comps})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.CompileCardButton(jsontext.Value(`{"type":"mcp","server":"crm","tool":"create","continue":true}`), app); err == nil {
		t.Error("an app's card ran an mcp button")
	}
	url, err := dispatch.Compile(dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/"}, dispatch.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.CompileCardButton(jsontext.Value(`{"type":"app","component":"api","method":"GET","path":"/x"}`), url); err == nil {
		t.Error("a url target's card ran a button")
	}
}
