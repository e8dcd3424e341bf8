package gateway

import (
	"context"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/tracing"
)

// outcome is what running a tool gave: a result, or a card.
type outcome struct {
	res  result.Result
	card jsontext.Value
	// upstream is the target's HTTP status; 0 when none answered.
	upstream int
	// connect is set with the gateway's connect card (card).
	connect *ledger.Connect
}

// execute validates the input and runs the tool's target the way its
// kind says. ctx runs it; caller is the caller's request, which only a
// call run in the page heeds.
func (g *Gateway) execute(ctx, caller context.Context, tool *manifest.Compiled, call Call, input any, inputErr error) outcome {
	if res, ok := checkInput(tool, input, inputErr); !ok {
		return outcome{res: res}
	}
	kind := tool.Target.Kind()
	out := kind.Execute(tool.Target, &runner{g: g, ctx: ctx, caller: caller, call: call, input: input})
	if out.Connect != "" {
		return g.connectCard(ctx, call, out)
	}
	if out.Card == nil {
		return outcome{res: out.Result, upstream: out.Upstream}
	}
	if !kind.AnswersCards() {
		return outcome{res: result.Failure("the target answered an action-required card: %v", result.ErrCardNotFromApp), upstream: out.Upstream}
	}
	if call.Origin.Source != SourceThread {
		return outcome{res: result.Failure("the handler answered an action-required card to an api call; a handler must answer a domain error when no person is in the conversation"), upstream: out.Upstream}
	}
	card, err := checkCard(tool.Target, out.Card)
	if err != nil {
		return outcome{res: result.Failure("the handler answered an %v", err), upstream: out.Upstream}
	}
	return outcome{res: out.Result, card: card, upstream: out.Upstream}
}

// checkInput is the error result of an input that did not decode or
// does not match the tool's schema; ok when it does.
func checkInput(tool *manifest.Compiled, input any, inputErr error) (result.Result, bool) {
	if inputErr != nil {
		return result.Failure("invalid input: %v", inputErr), false
	}
	if err := tool.ValidateInput(input); err != nil {
		return result.Failure("%v", err), false
	}
	return result.Result{}, true
}

// runner is the gateway's dispatch.Executor for one call: ctx sends it,
// caller is the caller's request, which a call run in the page heeds.
type runner struct {
	g           *Gateway
	ctx, caller context.Context
	call        Call
	input       any
}

func (r *runner) Send(t *dispatch.Target, how dispatch.Sending) dispatch.Outcome {
	tokens, fail, ok := r.g.tokens(r.ctx, t.Connections(), r.call)
	if !ok {
		return fail
	}
	return r.g.send(r.ctx, t, r.input, r.call, how, tokens)
}

func (r *runner) CallMCP(t *dispatch.Target) dispatch.Outcome {
	tokens, fail, ok := r.g.tokens(r.ctx, t.Connections(), r.call)
	if !ok {
		return fail
	}
	return r.g.callMCP(r.ctx, t, r.input, r.call, tokens)
}

func (r *runner) RunInPage(t *dispatch.Target) dispatch.Outcome {
	return dispatch.Outcome{Result: r.g.runInPage(r.caller, t, r.call)}
}

// runInPage offers a client tool call to the pages of its thread and waits
// for one to answer, at most the client tool timeout. ctx is the caller's:
// when the caller goes away while no page of the thread is streaming, the
// call is dropped and frees its place (its result says so); while one is,
// the wait goes on and the page's answer is still recorded.
func (g *Gateway) runInPage(ctx context.Context, t *dispatch.Target, call Call) result.Result {
	if call.Origin.Source != SourceThread {
		return result.Failure("client tools need a thread")
	}
	offer := clienttools.Offer{CallID: call.CallID, Name: t.Spec.Name, Input: compactInput(call.Input), Traceparent: tracing.Traceparent(ctx)}
	g.obs.ClientTool(observe.ClientOffered, 0)
	offered := g.clock.Now()
	out, err := g.bridge.Run(ctx, clientThread(call), offer, g.clientWait)
	switch {
	case errors.Is(err, clienttools.ErrTimeout):
		g.obs.ClientTool(observe.ClientTimedOut, g.clock.Now().Sub(offered))
		return result.Failure("client tool timed out")
	case errors.Is(err, clienttools.ErrCallerGone):
		g.obs.ClientTool(observe.ClientDropped, g.clock.Now().Sub(offered))
		return result.Failure("client tool %s was not run: %v", t.Spec.Name, err)
	case err != nil:
		return result.Failure("client tool %s: %v", t.Spec.Name, err)
	}
	g.obs.ClientTool(observe.ClientAnswered, g.clock.Now().Sub(offered))
	// A page's value is text for the model, even one shaped like a card:
	// it is never read as a card, so nothing pauses on it.
	return out.ToolResult()
}
