package gateway

import (
	"time"

	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/tracing"
)

// startCall starts a call's toolgate.call span under the span in ctx, if
// there is one (see tracing.Start). Its attributes are bounded, as metric
// labels are: a tool is declared in config, and no user, call id, thread,
// input or result is ever set on a span.
func startCall(ctx context.Context, tool *manifest.Compiled) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, tracing.CallSpan)
	if span != nil {
		span.SetAttributes(attribute.String(tracing.AttrTool, tool.Name), attribute.String(tracing.AttrTargetType, tool.Target.Kind().Name()))
		if s := tool.Target.Spec.Server; s != "" {
			span.SetAttributes(attribute.String(tracing.AttrMCPServer, s))
		}
	}
	return ctx, span
}

// endCall ends a call's span with how the call ended: the answer's status,
// with the span status Error for an error result; "refused" for a caller's
// mistake, described by its code, which is fixed text, never its message,
// which may name the call id; "error" for a failure of the gateway.
func endCall(span trace.Span, a *Answer, err error) {
	var re *RequestError
	switch {
	case err == nil:
		span.SetAttributes(attribute.String(tracing.AttrStatus, a.Status))
		if a.IsError {
			span.SetStatus(codes.Error, "")
		}
	case errors.As(err, &re):
		span.SetAttributes(attribute.String(tracing.AttrStatus, "refused"))
		span.SetStatus(codes.Error, re.Code)
	default:
		span.SetAttributes(attribute.String(tracing.AttrStatus, "error"))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// startResume starts the toolgate.resume span of a card's answer, whose
// toolgate.action is "button", "skip" or "cancel": never the button's id,
// which the component's card chose.
func startResume(ctx context.Context, req ResumeRequest) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, tracing.ResumeSpan)
	if span != nil {
		action := "button"
		switch {
		case req.ButtonID != "":
		case req.Action == ActionSkip, req.Action == ActionCancel:
			action = req.Action
		default:
			action = "invalid"
		}
		span.SetAttributes(attribute.String(tracing.AttrAction, action))
	}
	return ctx, span
}

// endResume is endCall for a resume, whose tool is known once its call is
// found: the tool the ledger recorded, which was declared when it ran.
func endResume(span trace.Span, a *Answer, err error) {
	if a != nil {
		span.SetAttributes(attribute.String(tracing.AttrTool, a.Tool))
	}
	endCall(span, a, err)
}

// tracedLedger records each operation of its ledger as a span,
// toolgate.ledger.create, get, update or wait, under the span in the
// operation's context. It sets no attribute: a key holds the user.
type tracedLedger struct{ ledger.Ledger }

// traceLedger wraps l in a tracedLedger, but for a ledger that records
// nothing (ledger.Off), whose operations are worth no span.
func traceLedger(l ledger.Ledger) ledger.Ledger {
	if !l.Records() {
		return l
	}
	return tracedLedger{l}
}

func (l tracedLedger) Create(ctx context.Context, c *ledger.Call) (*ledger.Call, bool, error) {
	ctx, span := tracing.Start(ctx, tracing.LedgerSpan+"create")
	existing, created, err := l.Ledger.Create(ctx, c)
	endLedger(span, err)
	return existing, created, err
}

func (l tracedLedger) Get(ctx context.Context, key string) (*ledger.Call, error) {
	ctx, span := tracing.Start(ctx, tracing.LedgerSpan+"get")
	c, err := l.Ledger.Get(ctx, key)
	endLedger(span, err)
	return c, err
}

func (l tracedLedger) Update(ctx context.Context, c *ledger.Call, from ledger.State) (*ledger.Call, error) {
	ctx, span := tracing.Start(ctx, tracing.LedgerSpan+"update")
	cur, err := l.Ledger.Update(ctx, c, from)
	endLedger(span, err)
	return cur, err
}

func (l tracedLedger) Wait(ctx context.Context, key string, state ledger.State) (*ledger.Call, error) {
	ctx, span := tracing.Start(ctx, tracing.LedgerSpan+"wait")
	c, err := l.Ledger.Wait(ctx, key, state)
	endLedger(span, err)
	return c, err
}

func (l tracedLedger) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	ctx, span := tracing.Start(ctx, tracing.LedgerSpan+"spend")
	fresh, err := l.Ledger.Spend(ctx, id, until)
	endLedger(span, err)
	return fresh, err
}

// endLedger ends a ledger span. A missing call or a lost compare and swap
// is an answer the gateway acts on, not a failure; the rest are failures,
// described by the kind alone: a ledger's message names its file or its
// address and the call's key.
func endLedger(span trace.Span, err error) {
	if span == nil {
		return
	}
	switch {
	case err == nil, errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrConflict):
	case errors.Is(err, ledger.ErrUnavailable):
		span.SetStatus(codes.Error, "unavailable")
	case errors.Is(err, ledger.ErrCorrupt):
		span.SetStatus(codes.Error, "corrupt")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// A Wait that ran out: settle decides what that means.
		span.SetStatus(codes.Error, "ended")
	default:
		span.SetStatus(codes.Error, "error")
	}
	span.End()
}
