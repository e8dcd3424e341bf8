package gateway

import (
	"context"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/tracing"
)

// callMCP calls an mcp target's tool on its upstream server
// (dispatch.Executor's CallMCP). The arguments are the call's input as
// the client sent it, which the tool's schema has passed; a card's
// button sends its own input, which continues the call.
//
// tokens are the user's access tokens of the server's connection.
func (g *Gateway) callMCP(ctx context.Context, t *dispatch.Target, input any, call Call, tokens map[string]string) dispatch.Outcome {
	c := dispatch.MCPCall{
		Tool: t.Spec.Tool, User: call.Identity.User, Install: call.Identity.Install, Token: tokens[t.Server.Connection()],
		IdempotencyKey: dispatch.IdempotencyKey(call.Identity.User, call.Identity.Install, call.CallID),
		Traceparent:    tracing.Traceparent(ctx),
	}
	if input == nil {
		input = map[string]any{}
	}
	raw, err := json.Marshal(input, jsonread.Legacy)
	if err != nil {
		return dispatch.Outcome{Result: result.Failure("the arguments cannot be sent: %v", err)}
	}
	if t.Spec.Continue {
		c.Continue = raw
	} else {
		c.Arguments = raw
	}
	sent := g.clock.Now()
	out := t.Server.Call(ctx, c)
	g.obs.Upstream(call.Tool, g.clock.Now().Sub(sent))
	if len(tokens) > 0 {
		out.Result = redactResult(out.Result, tokens)
		out.Card = redactBody(out.Card, tokens)
	}
	if t.Mapping != nil && out.Card == nil && out.Upstream != 0 {
		out.Result = mapMCP(t.Mapping, out.Result)
	}
	return out
}

// mcpAnswer is an MCP tool's result as a result expression reads it: body
// of a 200 answer.
type mcpAnswer struct {
	Content           string         `json:"content"`
	StructuredContent jsontext.Value `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError"`
}

// mapMCP maps an MCP tool's result through a result expression. An error
// result that says what failed on the way (the server unreachable, too
// large) stays as it is: there is no answer to map.
func mapMCP(m *result.Mapping, r result.Result) result.Result {
	body, err := json.Marshal(mcpAnswer{Content: r.Content, StructuredContent: r.Structured, IsError: r.IsError})
	if err != nil {
		return result.Failure("the result cannot be mapped: %v", err)
	}
	return m.Apply(http.StatusOK, http.Header{"Content-Type": {"application/json"}}, body)
}
