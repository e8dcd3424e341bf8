package dispatch

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// TypeMCP is the wire name of an mcp target: a tool of an upstream MCP
// server declared in the config (mcp_server), called with tools/call.
const TypeMCP = "mcp"

// MCPServer is an upstream MCP server as its targets reach it. The
// gateway's config declares it; internal/upstream implements it.
type MCPServer interface {
	// Name is the server's name in the config: the audience of the
	// identity tokens it is sent, and how logs and errors name it.
	Name() string
	// SendsIdentity reports whether its calls carry the user's identity
	// token, and so must name a user.
	SendsIdentity() bool
	// Connection names the connection whose token, the calling user's,
	// each call carries as Authorization: Bearer; "" for none.
	Connection() string
	// Call runs one tools/call and maps its answer: a result, or a card
	// built from the server's input requests, whose buttons continue the
	// call (MCPCall.Continue).
	Call(ctx context.Context, c MCPCall) Outcome
}

// MCPCall is one tools/call of an mcp target.
type MCPCall struct {
	// Tool is the tool's name on the server (without the prefix).
	Tool string
	// Arguments are the call's input, as validated.
	Arguments jsontext.Value
	// Continue is a card's answer: the input a card button of this
	// target holds, which names the responses to the server's input
	// requests and the state to send back. Nil for a first call.
	Continue jsontext.Value
	// User and Install are who the call acts for.
	User, Install string
	// IdempotencyKey names the call for the server's own idempotency
	// (_meta), as IdempotencyKey makes it: one key a call, another for
	// another user's call of the same id.
	IdempotencyKey string
	// Traceparent is the call's W3C trace context, sent in _meta.
	Traceparent string
	// Token is the user's access token of the server's Connection.
	Token string
}

type mcpKind struct{}

func (mcpKind) Name() string { return TypeMCP }

// NeedsUser is false for the kind: a server configured to send identity
// needs one (Target.NeedsUser).
func (mcpKind) NeedsUser() bool    { return false }
func (mcpKind) InPage() bool       { return false }
func (mcpKind) AnswersCards() bool { return true }
func (mcpKind) ShowsUI() bool      { return false }

func (mcpKind) compile(t *Target, env Env) error {
	s := t.Spec
	if s.Server == "" {
		return fmt.Errorf("mcp target: server is required")
	}
	if s.Tool == "" {
		return fmt.Errorf("mcp target: tool is required")
	}
	if s.Component != "" || s.Method != "" || s.Path != "" || s.URL != "" || s.Query != nil || s.Headers != nil || s.Body != nil || s.Name != "" || s.Operation != nil {
		return fmt.Errorf("mcp target: only server, tool and result may be set; the server's tool takes the input as its arguments")
	}
	if s.Continue {
		return fmt.Errorf("mcp target: continue is the gateway's, for the buttons of the cards it builds")
	}
	srv, ok := env.Servers[s.Server]
	if !ok {
		return fmt.Errorf("mcp target: mcp server %q is not declared", s.Server)
	}
	t.Server = srv
	if name := srv.Connection(); name != "" {
		t.conns = []string{name}
	}
	if s.Result != "" {
		if env.Results == nil {
			return fmt.Errorf("mcp target: a result expression cannot be compiled here")
		}
		var err error
		if t.Mapping, err = env.Results(s.Result); err != nil {
			return fmt.Errorf("mcp target: %w", err)
		}
	}
	return nil
}

func (mcpKind) Execute(t *Target, x Executor) Outcome { return x.CallMCP(t) }

func (mcpKind) Describe(t *Target) string {
	return "mcp server " + t.Spec.Server + " tool " + t.Spec.Tool
}

// compileMCPButton compiles a button of a card answered by the mcp
// target owner. The gateway builds those cards from the server's input
// requests, and each button only answers them: it continues owner's call,
// on owner's server and tool, and nothing else.
func compileMCPButton(s Spec, owner *Target) (*Target, error) {
	want := Spec{Type: TypeMCP, Server: owner.Spec.Server, Tool: owner.Spec.Tool, Continue: true}
	if s.Type != want.Type || s.Server != want.Server || s.Tool != want.Tool || !s.Continue ||
		s.Component != "" || s.Method != "" || s.Path != "" || s.URL != "" || s.Query != nil || s.Headers != nil || s.Body != nil || s.Name != "" || s.Result != "" {
		return nil, fmt.Errorf("target: a button of mcp server %q's card only answers its input request on tool %q", owner.Spec.Server, owner.Spec.Tool)
	}
	return &Target{Spec: want, kind: mcpKind{}, Server: owner.Server, conns: owner.conns}, nil
}
