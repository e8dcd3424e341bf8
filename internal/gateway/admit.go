package gateway

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
)

// CheckOrigin validates a call context, filling the default.
func CheckOrigin(c *Origin) error {
	switch c.Source {
	case "":
		if c.ThreadID != "" {
			return badRequest("invalid_context", `context: threadId needs "source": "thread"`)
		}
		c.Source = SourceAPI
	case SourceAPI:
		if c.ThreadID != "" {
			return badRequest("invalid_context", `context: an "api" call has no threadId`)
		}
	case SourceThread:
		if c.ThreadID == "" {
			return badRequest("invalid_context", `context: a "thread" call needs a threadId`)
		}
		// A thread id is stored with the call, keys the page's waiting
		// calls and goes out in Kazzle-Tool-Context: bounded as identities.
		if err := checkIdentityPart(c.ThreadID); err != nil {
			return badRequest("invalid_context", "context: threadId %v", err)
		}
	default:
		return badRequest("invalid_context", "context: source %q is not thread or api", c.Source)
	}
	return nil
}

// admitClientCall turns away a new client tool call over a pages limit
// (pending calls per thread, per user, or in all) before anything is
// recorded, so that the same call id may be tried again later. A repeat of
// a call already recorded is answered as usual, waiting or recorded.
func (g *Gateway) admitClientCall(ctx context.Context, tool *manifest.Compiled, call Call) error {
	if !tool.Target.Kind().InPage() || call.Origin.Source != SourceThread {
		return nil
	}
	err := g.bridge.Admit(clientThread(call))
	if err == nil {
		return nil
	}
	if _, gerr := g.ledger.Get(ctx, ledger.Key(call.Identity.User, call.Identity.Install, call.CallID)); gerr == nil {
		return nil
	}
	return &RequestError{Code: "too_many_client_calls", kind: ErrTooMany,
		Msg: fmt.Sprintf("client tool %s: %v; try again later", tool.Target.Spec.Name, err)}
}

// clientThread is whose pages see a client tool call: its user's thread
// in its installation.
func clientThread(call Call) clienttools.Thread {
	return clienttools.Thread{User: call.Identity.User, Install: call.Identity.Install, ID: call.Origin.ThreadID}
}

// Allowed evaluates the tool's allow policy for a call; input may be nil.
// A policy that fails to evaluate denies.
func (g *Gateway) Allowed(tool *manifest.Compiled, call Call, input any) (bool, error) {
	if tool.Policy == nil {
		return true, nil
	}
	env, err := policyEnv(tool.Policy, tool, call, input)
	if err != nil {
		return false, err
	}
	return tool.Policy.Eval(env)
}

// Visible returns the tools the caller may call, for the tool list. The
// input is not known yet: a policy that needs it and fails without it
// keeps its tool listed, and is enforced when the call comes.
func (g *Gateway) Visible(call Call) []*manifest.Compiled {
	if call.Origin.Source == "" {
		call.Origin.Source = SourceAPI
	}
	var out []*manifest.Compiled
	for _, t := range g.Tools().List() {
		if ok, err := g.Allowed(t, call, nil); ok || err != nil {
			out = append(out, t)
		}
	}
	return out
}
