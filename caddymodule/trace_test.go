package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/go-json-experiment/json"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
)

// TestTracingDirective: behind Caddy's own tracing handler, the component
// gets a traceparent in the trace of the request's, as its caller sent it;
// on a route without tracing, the caller's traceparent goes no further.
// OTEL_TRACES_EXPORTER=none gives Caddy's tracer provider an exporter
// that sends nothing, so no collector is needed.
func TestTracingDirective(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	seen := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	}))
	defer up.Close()
	gateway := fmt.Sprintf(`toolgate {
			component api %s
			ledger off
			tool get_item {
				description "Get an item."
				input_schema %s
				target app api GET /items/${input.id}
			}
		}`, up.URL, testSchema)
	tc := caddytest.NewTester(t)
	initServer(tc, testGlobals(dataDir(t))+`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /traced/* {
		tracing {
			span toolgate
		}
		`+gateway+`
	}
	handle_path /plain/* {
		`+gateway+`
	}
}
`)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent := "00-" + traceID + "-00f067aa0ba902b7-01"
	call := func(prefix string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://127.0.0.1:9080"+prefix+"/tools/get_item",
			strings.NewReader(`{"input":{"id":"a"},"identity":{"user":"u_1"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", callerParent)
		resp, err := tc.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a struct {
			Content string `json:"content"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &a) != nil || a.Content != "ok" {
			t.Fatalf("%s: %d %s", prefix, resp.StatusCode, body)
		}
		return <-seen
	}

	got := call("/traced")
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != traceID || got == callerParent {
		t.Errorf("traced: the component got traceparent %q, want one of toolgate's spans in trace %s", got, traceID)
	}
	if got := call("/plain"); got != "" {
		t.Errorf("untraced: the caller's traceparent reached the component: %q", got)
	}
}

// BenchmarkInvokeTraced is BenchmarkInvoke with a sampled span in each
// request's context, on a provider that batches to an exporter that sends
// nothing, as Caddy's tracing handler would with a collector: the cost of
// toolgate's own spans and the traceparent. Compare it with BenchmarkInvoke
// in the same run.
func BenchmarkInvokeTraced(b *testing.B) {
	up := benchUpstream(b)
	h := benchHandler(b, up.URL, writeKey(b), false, zap.NewNop())
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tp.Tracer("bench")
	body := `{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}`
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		sctx, span := tracer.Start(context.Background(), "request")
		req := httptest.NewRequestWithContext(sctx, "POST", "/tools/get_item", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
		if err := h.ServeHTTP(w, req, nextHandler{}); err != nil {
			b.Fatal(err)
		}
		span.End()
		if w.Code != http.StatusOK || w.Body.Len() < 1024 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
