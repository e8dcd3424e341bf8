package gateway

import (
	"context"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/tracing"
)

// callMCP calls an mcp target's tool on its upstream server
// (dispatch.Executor's CallMCP). The arguments are the call's input as
// the client sent it, which the tool's schema has passed; a card's
// button sends its own input, which continues the call.
func (g *Gateway) callMCP(ctx context.Context, t *dispatch.Target, input any, call Call) dispatch.Outcome {
	c := dispatch.MCPCall{
		Tool: t.Spec.Tool, User: call.Identity.User, Install: call.Identity.Install,
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
	return out
}
