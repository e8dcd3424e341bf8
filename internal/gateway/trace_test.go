package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// Values that identify a call or carry its data: no span may hold one.
const (
	secretUser    = "u_secretuser"
	secretInstall = "in_secretinstall"
	secretThread  = "th_secretthread"
	secretInput   = "inp-secret"
	secretResult  = "result-secret"
)

// traceRig is a gateway on a bolt ledger with an app, a url and a client
// tool, whose upstream tells each request's traceparent and bearer token.
type traceRig struct {
	gw   *Gateway
	seen chan http.Header
}

func newTraceRig(t *testing.T) *traceRig {
	t.Helper()
	rig := &traceRig{seen: make(chan http.Header, 10)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.seen <- r.Header.Clone()
		status := http.StatusOK
		if strings.HasPrefix(r.URL.Path, "/fail") {
			status = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"content":%q}`, secretResult)
	}))
	t.Cleanup(up.Close)
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := []byte(`{"type":"object","properties":{"id":{"type":"string"}}}`)
	set, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{
		{Name: "app_tool", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/items/${input.id}", Body: []byte(`"${input}"`)}},
		{Name: "url_tool", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "url", Method: "GET", URL: up.URL + "/search?q=${input.id}"}},
		{Name: "fail_tool", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/fail"}},
		{Name: "client_tool", Description: "d", InputSchema: schema, Target: dispatch.Spec{Type: "kazzle", Name: "where"}},
	}}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	rig.gw = boltGateway(t, set)
	rig.gw.clientWait = 5 * time.Second
	return rig
}

func traceCall(tool, callID string) Call {
	return Call{Tool: tool, CallID: callID, Input: jsontext.Value(`{"id":"` + secretInput + `"}`),
		Origin: Origin{Source: SourceThread, ThreadID: secretThread}, Identity: Identity{User: secretUser, Install: secretInstall}}
}

// traced runs f under a parent span of a provider of its own, as Caddy's
// tracing handler would, and returns the parent and the spans ended.
func traced(t *testing.T, f func(ctx context.Context)) (trace.Span, []sdktrace.ReadOnlySpan) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caddy")
	f(ctx)
	parent.End()
	return parent, rec.Ended()
}

// checkClean fails if any span's name, attributes, status or events hold
// a value that identifies the call or carries its data.
func checkClean(t *testing.T, spans []sdktrace.ReadOnlySpan, forbidden ...string) {
	t.Helper()
	for _, s := range spans {
		text := s.Name() + " " + s.Status().Description
		for _, kv := range s.Attributes() {
			text += " " + string(kv.Key) + "=" + kv.Value.Emit()
		}
		for _, e := range s.Events() {
			text += " " + e.Name
			for _, kv := range e.Attributes {
				text += " " + kv.Value.Emit()
			}
		}
		for _, f := range append(forbidden, secretUser, secretInstall, secretThread, secretInput, secretResult) {
			if f != "" && strings.Contains(text, f) {
				t.Errorf("span %s holds %q: %s", s.Name(), f, text)
			}
		}
	}
}

func spanNamed(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestCallSpans: under a span, an app or url call is a toolgate.call span
// with the ledger's and the upstream's spans as its children, all in the
// parent's trace; the upstream's traceparent is its span's. No span holds
// the user, the call id, the thread, the input, the token or the result.
func TestCallSpans(t *testing.T) {
	rig := newTraceRig(t)
	for _, c := range []struct{ tool, target string }{{"app_tool", "app"}, {"url_tool", "url"}} {
		t.Run(c.tool, func(t *testing.T) {
			callID := "call-secret-" + c.tool
			var h http.Header
			parent, spans := traced(t, func(ctx context.Context) {
				a, err := rig.gw.Invoke(ctx, traceCall(c.tool, callID))
				if err != nil || a.IsError {
					t.Fatalf("%+v, %v", a, err)
				}
				h = <-rig.seen
			})
			var got []string
			for _, s := range spans {
				got = append(got, s.Name())
			}
			want := "toolgate.ledger.create toolgate.upstream toolgate.ledger.update toolgate.call caddy"
			if strings.Join(got, " ") != want {
				t.Fatalf("spans %v, want %s", got, want)
			}
			call := spanNamed(spans, "toolgate.call")
			if call.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("toolgate.call's parent is %v, not the request's span", call.Parent().SpanID())
			}
			for _, s := range spans[:3] {
				if s.Parent().SpanID() != call.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
					t.Errorf("%s is not a child of toolgate.call in the parent's trace", s.Name())
				}
			}
			if a := attrs(call); a["toolgate.tool"] != c.tool || a["toolgate.target_type"] != c.target || a["toolgate.status"] != "done" || len(a) != 3 {
				t.Errorf("toolgate.call attributes %v", a)
			}
			if call.Status().Code == codes.Error {
				t.Errorf("a successful call's span has status %v", call.Status())
			}
			up := spanNamed(spans, "toolgate.upstream")
			want = "00-" + parent.SpanContext().TraceID().String() + "-" + up.SpanContext().SpanID().String() + "-01"
			if tp := h.Get("Traceparent"); tp != want {
				t.Errorf("the upstream got traceparent %q, want %q", tp, want)
			}
			checkClean(t, spans, callID, strings.TrimPrefix(h.Get("Authorization"), "Bearer "))

			// A repeat is answered from the ledger: its span shows no upstream.
			_, spans = traced(t, func(ctx context.Context) {
				if _, err := rig.gw.Invoke(ctx, traceCall(c.tool, callID)); err != nil {
					t.Fatal(err)
				}
			})
			if s := spanNamed(spans, "toolgate.upstream"); s != nil || spanNamed(spans, "toolgate.ledger.create") == nil {
				t.Errorf("a repeat's spans: %v", spans)
			}
		})
	}
}

// TestCallSpanStatus: an error result and a caller's mistake end the span
// as errors, the mistake described by its code only.
func TestCallSpanStatus(t *testing.T) {
	rig := newTraceRig(t)
	_, spans := traced(t, func(ctx context.Context) {
		a, err := rig.gw.Invoke(ctx, traceCall("fail_tool", "call-fail"))
		if err != nil || !a.IsError {
			t.Fatalf("%+v, %v", a, err)
		}
		<-rig.seen
	})
	call := spanNamed(spans, "toolgate.call")
	if call.Status().Code != codes.Error || attrs(call)["toolgate.status"] != "done" {
		t.Errorf("error result: status %v, attributes %v", call.Status(), attrs(call))
	}
	if up := spanNamed(spans, "toolgate.upstream"); up.Status().Code != codes.Error || attrs(up)["http.response.status_code"] != "500" {
		t.Errorf("upstream 500: status %v, attributes %v", up.Status(), attrs(up))
	}

	// The same call id with another input: refused, and the message,
	// which names the call id, is not in the span.
	_, spans = traced(t, func(ctx context.Context) {
		c := traceCall("fail_tool", "call-fail")
		c.Input = jsontext.Value(`{"id":"other"}`)
		if _, err := rig.gw.Invoke(ctx, c); err == nil {
			t.Fatal("a reused call id was not refused")
		}
	})
	call = spanNamed(spans, "toolgate.call")
	if call.Status().Code != codes.Error || call.Status().Description != "idempotency_key_reuse" || attrs(call)["toolgate.status"] != "refused" {
		t.Errorf("refused: status %v, attributes %v", call.Status(), attrs(call))
	}
	checkClean(t, spans, "call-fail")
}

// TestClientOfferTraceparent: a client tool's offer carries the call's
// traceparent under a span, so the page can join the trace, and none
// without.
func TestClientOfferTraceparent(t *testing.T) {
	rig := newTraceRig(t)
	stream, _, err := rig.gw.bridge.Open(clienttools.Thread{User: secretUser, Install: secretInstall, ID: secretThread}, "page token")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	offers := make(chan clienttools.Offer, 1)
	go func() {
		for o := range stream.C {
			offers <- o
			if err := rig.gw.bridge.Claim(clienttools.Thread{User: secretUser, Install: secretInstall, ID: secretThread}, o.CallID); err != nil {
				t.Error(err)
			}
			_ = rig.gw.bridge.Post(clienttools.Thread{User: secretUser, Install: secretInstall, ID: secretThread}, o.CallID, clienttools.Outcome{Result: jsontext.Value(`"` + secretResult + `"`)})
		}
	}()

	parent, spans := traced(t, func(ctx context.Context) {
		if a, err := rig.gw.Invoke(ctx, traceCall("client_tool", "call-client-1")); err != nil || a.Content != secretResult {
			t.Fatalf("%+v, %v", a, err)
		}
	})
	o := <-offers
	call := spanNamed(spans, "toolgate.call")
	want := "00-" + parent.SpanContext().TraceID().String() + "-" + call.SpanContext().SpanID().String() + "-01"
	if o.Traceparent != want {
		t.Errorf("offer traceparent %q, want the call span's %q", o.Traceparent, want)
	}
	if b, _ := json.Marshal(o); !strings.Contains(string(b), `"traceparent":"`+want+`"`) {
		t.Errorf("the offer's JSON %s has no traceparent", b)
	}
	if a := attrs(call); a["toolgate.target_type"] != "kazzle" {
		t.Errorf("attributes %v", a)
	}
	checkClean(t, spans, "call-client-1")

	if _, err := rig.gw.Invoke(context.Background(), traceCall("client_tool", "call-client-2")); err != nil {
		t.Fatal(err)
	}
	if o := <-offers; o.Traceparent != "" {
		t.Errorf("untraced offer has traceparent %q", o.Traceparent)
	}
	if b, _ := json.Marshal(clienttools.Offer{CallID: "c"}); strings.Contains(string(b), "traceparent") {
		t.Errorf("untraced offer's JSON %s names traceparent", b)
	}
}

// TestNoSpanNoTraceparent: without a span in the context, nothing is
// recorded and the upstream gets no traceparent.
func TestNoSpanNoTraceparent(t *testing.T) {
	rig := newTraceRig(t)
	if _, err := rig.gw.Invoke(context.Background(), traceCall("app_tool", "call-plain")); err != nil {
		t.Fatal(err)
	}
	if h := <-rig.seen; h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
		t.Errorf("untraced call sent traceparent %q tracestate %q", h.Get("Traceparent"), h.Get("Tracestate"))
	}
}

// TestResumeSpan: a card's answer is a toolgate.resume span with the tool,
// the action (never the button's id) and the status, whose button request
// is its toolgate.upstream child.
func TestResumeSpan(t *testing.T) {
	rig := newCardRig(t)
	if a := rig.invoke(t, "a_card", "own", "card-secret"); a.Status != StatusActionRequired {
		t.Fatalf("got %+v", a)
	}
	_, spans := traced(t, func(ctx context.Context) {
		r, err := rig.gw.Resume(ctx, ResumeRequest{CallID: "card-secret", Identity: rig.me, ButtonID: "go"})
		if err != nil || r.Status != StatusDone || r.IsError {
			t.Fatalf("resume: %+v, %v", r, err)
		}
	})
	resume := spanNamed(spans, "toolgate.resume")
	if resume == nil {
		t.Fatalf("no toolgate.resume in %v", spans)
	}
	if a := attrs(resume); a["toolgate.tool"] != "a_card" || a["toolgate.action"] != "button" || a["toolgate.status"] != "done" {
		t.Errorf("toolgate.resume attributes %v", a)
	}
	if up := spanNamed(spans, "toolgate.upstream"); up == nil || up.Parent().SpanID() != resume.SpanContext().SpanID() {
		t.Errorf("the button's request is not a child of toolgate.resume: %v", spans)
	}
	checkClean(t, spans, "card-secret", `"go"`, "z9", rig.me.User, rig.thread.ThreadID)

	_, spans = traced(t, func(ctx context.Context) {
		if _, err := rig.gw.Resume(ctx, ResumeRequest{CallID: "card-secret", Identity: rig.me, Action: ActionSkip}); err == nil {
			t.Fatal("a second, other answer was not refused")
		}
	})
	resume = spanNamed(spans, "toolgate.resume")
	if a := attrs(resume); a["toolgate.action"] != "skip" || a["toolgate.status"] != "refused" || resume.Status().Description != "conflict" {
		t.Errorf("refused resume: attributes %v, status %v", a, resume.Status())
	}
	checkClean(t, spans, "card-secret")
}
