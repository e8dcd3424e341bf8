package gateway

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/result"
)

// fakeMCP is an upstream MCP server that records its calls and answers
// a card for the tool "ask" until a call continues it.
type fakeMCP struct {
	identity bool
	evil     bool // the card has a button that calls another tool
	mu       sync.Mutex
	calls    []dispatch.MCPCall
}

func (s *fakeMCP) Name() string        { return "crm" }
func (s *fakeMCP) SendsIdentity() bool { return s.identity }
func (s *fakeMCP) Connection() string  { return "" }
func (s *fakeMCP) Call(_ context.Context, c dispatch.MCPCall) dispatch.Outcome {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	if c.Tool == "ask" && c.Continue == nil {
		evil := ""
		if s.evil {
			evil = `,{"type":"button","id":"evil","label":"Evil","target":{"type":"mcp","server":"crm","tool":"delete","continue":true}}`
		}
		return dispatch.Outcome{Card: []byte(`{"type":"action_required","title":"Sure?","elements":[` +
			`{"type":"button","id":"yes","label":"Yes","input":{"arguments":{"n":1},"answer":"yes"},"target":{"type":"mcp","server":"crm","tool":"ask","continue":true}}` + evil + `]}`)}
	}
	if c.Continue != nil {
		return dispatch.Outcome{Result: result.Result{Content: "continued " + string(c.Continue)}}
	}
	return dispatch.Outcome{Result: result.Result{Content: "ran " + c.Tool + " " + string(c.Arguments)}, Upstream: 200}
}

func (s *fakeMCP) recorded() []dispatch.MCPCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dispatch.MCPCall(nil), s.calls...)
}

func newMCPGateway(t *testing.T, srv *fakeMCP) *Gateway {
	t.Helper()
	schema := jsontext.Value(`{"type":"object","properties":{"n":{"type":"number","maximum":10},"s":{"type":"string"}},"additionalProperties":false}`)
	tools := []manifest.Tool{
		{Name: "crm_run", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "mcp", Server: "crm", Tool: "run"}},
		{Name: "crm_ask", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "mcp", Server: "crm", Tool: "ask"}},
		{Name: "crm_mapped", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "mcp", Server: "crm", Tool: "run",
			Result: `{"content": "mapped: " + body.content, "isError": body.isError}`}},
	}
	set, err := manifest.CompileIn([]manifest.Source{{Name: "test", Tools: tools}}, dispatch.Env{Servers: map[string]dispatch.MCPServer{"crm": srv}})
	if err != nil {
		t.Fatal(err)
	}
	return boltGateway(t, set)
}

// boltGateway serves set with a bolt ledger of its own.
func boltGateway(t testing.TB, set *manifest.Set) *Gateway {
	t.Helper()
	led, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	key, _ := identity.GenerateKey()
	return New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20), Ledger: led})
}

// TestMCPTarget: an mcp target's call sends the input as the schema
// checked it, once per call id; a server sent identity needs a user.
func TestMCPTarget(t *testing.T) {
	srv := &fakeMCP{}
	gw := newMCPGateway(t, srv)
	me := Identity{User: "u_1", Install: "in_1"}
	ctx := context.Background()

	// Written anew: the duplicate member read once, the number kept exact.
	a, err := gw.Invoke(ctx, Call{Tool: "crm_run", CallID: "c1", Identity: me, Input: []byte(`{"n": 1.50, "s": "<x>"}`)})
	if err != nil || a.IsError {
		t.Fatalf("invoke: %v %+v", err, a)
	}
	again, err := gw.Invoke(ctx, Call{Tool: "crm_run", CallID: "c1", Identity: me, Input: []byte(`{"n": 1.50, "s": "<x>"}`)})
	if err != nil || again.Content != a.Content {
		t.Fatalf("repeat: %v %+v", err, again)
	}
	calls := srv.recorded()
	if len(calls) != 1 {
		t.Fatalf("the server was called %d times", len(calls))
	}
	c := calls[0]
	if c.Tool != "run" || string(c.Arguments) != `{"n":1.50,"s":"\u003cx\u003e"}` || c.User != "u_1" || c.Install != "in_1" || c.IdempotencyKey != dispatch.IdempotencyKey("u_1", "in_1", "c1") || c.Continue != nil {
		t.Errorf("sent %+v (arguments %s)", c, c.Arguments)
	}
	// A schema violation sends nothing.
	if a, err := gw.Invoke(ctx, Call{Tool: "crm_run", Identity: me, Input: []byte(`{"n": 11}`)}); err != nil || !a.IsError {
		t.Errorf("n 11: %v %+v", err, a)
	}
	if n := len(srv.recorded()); n != 1 {
		t.Errorf("the server was called %d times after a refused input", n)
	}

	// A result expression reads the tool's result.
	if a, err := gw.Invoke(ctx, Call{Tool: "crm_mapped", Identity: me, Input: []byte(`{"n":2}`)}); err != nil || a.IsError || a.Content != `mapped: ran run {"n":2}` {
		t.Errorf("mapped: %v %+v", err, a)
	}

	srv.identity = true
	if _, err := gw.Invoke(ctx, Call{Tool: "crm_run", Input: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), "identity.user is required") {
		t.Errorf("no user, identity on: %v", err)
	}
}

// TestMCPTargetCard: the server's card pauses the call; a button
// continues it with the button's input; a button that would call another
// tool is refused before anything is sent.
func TestMCPTargetCard(t *testing.T) {
	srv := &fakeMCP{evil: true}
	gw := newMCPGateway(t, srv)
	me := Identity{User: "u_1", Install: "in_1"}
	thread := Origin{Source: SourceThread, ThreadID: "th_1"}
	ctx := context.Background()

	// The server's card has a button that calls another tool: refused.
	a, err := gw.Invoke(ctx, Call{Tool: "crm_ask", CallID: "k1", Identity: me, Origin: thread, Input: []byte(`{"n":1}`)})
	if err != nil || a.Status != StatusDone || !a.IsError || !strings.Contains(a.Content, `button "evil"`) {
		t.Fatalf("a card with a foreign button: %v %+v", err, a)
	}

	// Through the API, with no person to answer: an error result.
	if a, err := gw.Invoke(ctx, Call{Tool: "crm_ask", CallID: "k2", Identity: me, Input: []byte(`{"n":1}`)}); err != nil || !a.IsError {
		t.Errorf("a card to an api call: %v %+v", err, a)
	}
}

// TestMCPTargetResume: a card whose buttons only continue the call is
// kept; pressing one sends its input as the continuation.
func TestMCPTargetResume(t *testing.T) {
	srv := &fakeMCP{}
	gw := newMCPGateway(t, srv)
	me := Identity{User: "u_1", Install: "in_1"}
	ctx := context.Background()
	a, err := gw.Invoke(ctx, Call{Tool: "crm_ask", CallID: "k1", Identity: me, Origin: Origin{Source: SourceThread, ThreadID: "th_1"}, Input: []byte(`{"n":1}`)})
	if err != nil || a.Status != StatusActionRequired {
		t.Fatalf("ask: %v %+v", err, a)
	}
	r, err := gw.Resume(ctx, ResumeRequest{CallID: "k1", Identity: me, ButtonID: "yes"})
	if err != nil || r.Content != `continued {"answer":"yes","arguments":{"n":1}}` {
		t.Fatalf("resume: %v %+v", err, r)
	}
	calls := srv.recorded()
	if len(calls) != 2 || calls[1].IdempotencyKey != dispatch.IdempotencyKey("u_1", "in_1", "k1/yes") || calls[1].User != "u_1" {
		t.Errorf("calls = %+v", calls)
	}
}

// TestSetTools: the tools served change at once, and the listeners hear
// of each change in order.
func TestSetTools(t *testing.T) {
	gw := newMCPGateway(t, &fakeMCP{})
	var heard []int
	gw.OnToolsChange(func(s *manifest.Set) { heard = append(heard, len(s.List())) })
	gw.OnToolsChange(func(s *manifest.Set) { heard = append(heard, -len(s.List())) })
	empty, err := manifest.CompileIn(nil, dispatch.Env{})
	if err != nil {
		t.Fatal(err)
	}
	old := gw.Tools()
	gw.SetTools(empty)
	if _, err := gw.Invoke(context.Background(), Call{Tool: "crm_run", Input: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), "no tool named") {
		t.Errorf("a tool no longer served: %v", err)
	}
	gw.SetTools(old)
	if len(heard) != 4 || heard[0] != 0 || heard[1] != 0 || heard[2] != 3 || heard[3] != -3 {
		t.Errorf("heard %v", heard)
	}
}
