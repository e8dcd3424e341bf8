package outbound_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/outbound"
)

// TestUpstreamSpan: under a span, a request is a toolgate.upstream child
// span whose traceparent the upstream gets, with the method, the host and
// the status and nothing of the path or query, and a 4xx its Error; without one, no traceparent
// goes out, not even one a tool's headers set.
func TestUpstreamSpan(t *testing.T) {
	got := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer up.Close()
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := "00-11111111111111111111111111111111-2222222222222222-01"
	target, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}",
		Query: map[string]string{"q": "${input.id}"}, Headers: map[string]string{"Traceparent": forged, "Tracestate": "k=v"}}, dispatch.Env{Components: map[string]*dispatch.Component{"api": comp}})
	if err != nil {
		t.Fatal(err)
	}
	client := outbound.NewClient(time.Second, 1024)
	defer client.CloseIdleConnections()
	send := func(ctx context.Context) http.Header {
		t.Helper()
		req, err := target.Request(ctx, map[string]any{"id": "secret-id"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil || resp.Status != http.StatusTeapot {
			t.Fatalf("%+v, %v", resp, err)
		}
		return <-got
	}

	t.Run("no span", func(t *testing.T) {
		h := send(context.Background())
		if v, ok := h["Traceparent"]; ok {
			t.Errorf("traceparent %q sent without a span", v)
		}
		if v, ok := h["Tracestate"]; ok {
			t.Errorf("tracestate %q sent without a span", v)
		}
	})

	t.Run("span", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
		h := send(ctx)
		parent.End()

		spans := rec.Ended()
		if len(spans) != 2 || spans[0].Name() != "toolgate.upstream" {
			t.Fatalf("spans %v, want toolgate.upstream then parent", names(spans))
		}
		s := spans[0]
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("upstream span's parent %v kind %v", s.Parent().SpanID(), s.SpanKind())
		}
		want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if tp := h.Get("Traceparent"); tp != want {
			t.Errorf("upstream got traceparent %q, want the upstream span's %q (not the tool's %q)", tp, want, forged)
		}
		if v, ok := h["Tracestate"]; ok {
			t.Errorf("the tool's tracestate %q passed through", v)
		}
		attrs := attrMap(s.Attributes())
		host := strings.Split(strings.TrimPrefix(up.URL, "http://"), ":")[0]
		for k, v := range map[string]string{"http.request.method": "GET", "server.address": host, "http.response.status_code": "418"} {
			if attrs[k] != v {
				t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
			}
		}
		for k, v := range attrs {
			if strings.Contains(v, "secret-id") || strings.Contains(v, "/items") {
				t.Errorf("attribute %s = %q holds the path or the input", k, v)
			}
		}
		if s.Status().Code != codes.Error || s.Status().Description != "" {
			t.Errorf("a 418 to a client span: status %v, want Error as OpenTelemetry's HTTP rules say", s.Status())
		}
	})

	t.Run("failure", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
		req, err := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/x?token=secret", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Do(req); err == nil {
			t.Fatal("port 1 answered")
		}
		parent.End()
		s := rec.Ended()[0]
		if s.Status().Code != codes.Error || s.Status().Description != "unreachable" {
			t.Errorf("status %+v, want Error unreachable", s.Status())
		}
	})
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
