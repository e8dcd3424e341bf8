package tracing

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestStart: a child is made with the parent's own provider, which no
// global setup points at; with no parent nothing is made.
func TestStart(t *testing.T) {
	if ctx, span := Start(context.Background(), "x"); span != nil || ctx != context.Background() {
		t.Errorf("a span %v was made without a parent", span)
	}
	if tp := Traceparent(context.Background()); tp != "" {
		t.Errorf("traceparent %q without a span", tp)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	ctx, child := Start(ctx, "child")
	if child == nil {
		t.Fatal("no child under a parent")
	}
	want := "00-" + child.SpanContext().TraceID().String() + "-" + child.SpanContext().SpanID().String() + "-01"
	if got := Traceparent(ctx); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	h := http.Header{}
	Inject(ctx, h)
	if h.Get("Traceparent") != want {
		t.Errorf("injected %v, want traceparent %q", h, want)
	}
	child.End()
	parent.End()
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "child" || spans[0].InstrumentationScope().Name != Scope ||
		spans[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("recorded %v", spans)
	}
}

// TestStartAllocs: without a parent, Start and Inject allocate nothing,
// the cost of tracing on every call of a gateway that does not trace.
func TestStartAllocs(t *testing.T) {
	ctx := context.Background()
	h := http.Header{"Content-Type": {"application/json"}}
	if n := testing.AllocsPerRun(100, func() {
		_, span := Start(ctx, CallSpan)
		if span != nil {
			t.Fatal("span")
		}
		Inject(ctx, h)
	}); n != 0 {
		t.Errorf("%v allocations without a span, want 0", n)
	}
}
