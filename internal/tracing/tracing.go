// Package tracing makes toolgate's spans and carries the W3C trace context
// to upstreams and pages. It sets nothing up: a span is made only under a
// span already in the context (Caddy's tracing handler puts one there, or
// any OpenTelemetry caller), with the tracer of that span's provider, so
// toolgate's spans go wherever the parent's go. Without one, nothing is
// recorded, nothing is sent, and nothing is allocated.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope names toolgate's tracer, as OpenTelemetry's instrumentation scope.
const Scope = "github.com/toolgate/toolgate"

// Span names.
const (
	CallSpan     = "toolgate.call"
	UpstreamSpan = "toolgate.upstream"
	// ResumeSpan is a card's answer, the rest of a call.
	ResumeSpan = "toolgate.resume"
	// LedgerSpan is followed by the operation: toolgate.ledger.create.
	LedgerSpan = "toolgate.ledger."
)

// Attribute keys of toolgate's own. The upstream span takes OpenTelemetry's
// HTTP names (http.request.method, server.address,
// http.response.status_code) as they are.
const (
	AttrTool       = "toolgate.tool"
	AttrTargetType = "toolgate.target_type"
	AttrMCPServer  = "toolgate.mcp_server"
	AttrStatus     = "toolgate.status"
	// AttrAction is how a card was answered: button, skip or cancel.
	AttrAction = "toolgate.action"
)

// Start starts a child span of the span in ctx, when there is one, and
// returns ctx holding it. Without one it returns ctx and nil: a caller
// checks for nil rather than call a no-op span, because starting even a
// no-op span stores it in a new context, an allocation on every call. For
// the same reason Start takes no options, which would be built (and
// allocated) before it could look: a caller sets attributes on the span
// it got.
//
// Only spans that belong to a trace count (a valid span context): one
// that is not sampled still gets children, which the SDK does not record,
// so that the traceparent sent on says "not sampled" and the upstream
// does not start a trace of its own.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	return start(ctx, name, trace.SpanKindInternal)
}

// StartClient is Start for a request to another service, a span of kind
// client.
func StartClient(ctx context.Context, name string) (context.Context, trace.Span) {
	return start(ctx, name, trace.SpanKindClient)
}

func start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithSpanKind(kind))
}

// traceContext is the W3C Trace Context format, traceparent and tracestate,
// the one every OpenTelemetry SDK reads by default. It is used on its own
// rather than the global propagator, which toolgate does not set up.
var traceContext propagation.TraceContext

// Inject sets h's traceparent and tracestate to the span in ctx. Any that h
// held are removed first, set or not: only the gateway's own span may be
// an upstream's parent, never a value from a tool's headers or its input.
func Inject(ctx context.Context, h http.Header) {
	// Canonical keys, as traceContext writes them (Header.Set).
	delete(h, "Traceparent")
	delete(h, "Tracestate")
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// Traceparent is the traceparent header value for the span in ctx, or ""
// when no span is there.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}
