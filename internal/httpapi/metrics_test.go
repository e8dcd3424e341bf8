package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
)

// metricsServer serves gatewayOptions with the pages of pagesOptions, a
// tool no one may call, metrics on a registry of its own, and its log
// lines from info up in logs.
func metricsServer(t *testing.T, clientTimeout time.Duration) (*server, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	rec := apitest.NewRecorder(t)
	o := gatewayOptions(t, rec.URL)
	pages := pagesOptions(t)
	o.sources = append(o.sources, pages.sources[0], manifest.Source{Name: "policy", Tools: parseTools(t,
		`{"tools":[{"name":"denied","description":"No one.","input_schema":{"type":"object"},"allow":"false",
		"target":{"type":"app","component":"api","method":"GET","path":"/md"}}]}`)})
	o.api.Pages, o.api.PageOrigins = pages.api.Pages, pages.api.PageOrigins
	o.clientTimeout = clientTimeout

	reg := prometheus.NewPedanticRegistry()
	c := observe.NewCollectors()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	tools, err := manifest.Compile(o.sources, o.components)
	if err != nil {
		t.Fatal(err)
	}
	var labelled []observe.Tool
	for _, tool := range tools.List() {
		labelled = append(labelled, observe.Tool{Name: tool.Name, TargetType: tool.Target.Spec.Type})
	}
	o.observer = c.Observer("bolt", labelled)
	core, logs := observer.New(zapcore.InfoLevel)
	o.logger = zap.New(core)
	return startServer(t, o), reg, logs
}

// value is one series' value, by its name and labels in order.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// Each outcome of a call, each refusal, a client tool answered and one
// timed out, and a card opened and answered three ways, are counted on
// the registry.
func TestMetricsAfterCalls(t *testing.T) {
	s, reg, logs := metricsServer(t, time.Second)
	invoke := func(tool, body string, want int) {
		t.Helper()
		if status, a := s.Call(t, "POST", "/tools/"+tool, body); status != want {
			t.Fatalf("%s: %d %+v", tool, status, a)
		}
	}
	invoke("md", `{"input":{},`+apitest.Who+`}`, 200)
	invoke("md", `{"input":{},"callId":"r_1",`+apitest.Who+`}`, 200)
	invoke("md", `{"input":{},"callId":"r_1",`+apitest.Who+`}`, 200) // a repeat is not run again
	invoke("domain_error", `{"input":{},`+apitest.Who+`}`, 200)
	invoke("denied", `{"input":{},`+apitest.Who+`}`, 403)
	for _, id := range []string{"c_btn", "c_skip", "c_cancel"} {
		invoke("card", `{"input":{"kind":"plain"},"callId":"`+id+`",`+apitest.ThreadCtx+`,`+apitest.Who+`}`, 200)
	}
	for id, body := range map[string]string{"c_btn": `"buttonId":"approve"`, "c_skip": `"action":"skip"`, "c_cancel": `"action":"cancel"`} {
		if status, a := s.Call(t, "POST", "/calls/"+id+"/resume", `{`+body+`,"identity":{"user":"u_1","install":"in_1"}}`); status != 200 {
			t.Fatalf("resume %s: %d %+v", id, status, a)
		}
	}
	if r := answerPage(t, s, "ct_1", `{"result":"here"}`); r.Status != 200 || r.A.IsError {
		t.Fatalf("client tool: %d %s", r.Status, r.Raw)
	}
	if r := apitest.WaitInvoke(t, s.InvokeAsync("where", `{"input":{},"callId":"ct_2",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)); !r.A.IsError {
		t.Fatalf("no page, yet: %d %s", r.Status, r.Raw)
	}

	// Refusals the API makes: a bad page token, a foreign Host without
	// callers, a body over max_request_size.
	if status, _ := s.Claim(t, "not-a-token", "ct_9"); status != 401 {
		t.Errorf("bad page token: %d", status)
	}
	if status, _ := s.Send(t, "POST", s.host("rebind.test")+"/tools/md", "application/json", `{"input":{}}`); status != 403 {
		t.Errorf("foreign Host: %d", status)
	}
	if status, _ := s.Send(t, "POST", s.URL+"/tools/md", "application/json", `{"input":{"x":"`+strings.Repeat("a", 65<<10)+`"}}`); status != 413 {
		t.Errorf("large body: %d", status)
	}

	const calls = "caddy_toolgate_calls_total"
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{calls, []string{"tool", "md", "target_type", "app", "outcome", "done"}, 2},
		{calls, []string{"tool", "domain_error", "outcome", "error"}, 1},
		{calls, []string{"tool", "denied", "outcome", "refused"}, 1},
		{calls, []string{"tool", "card", "outcome", "action_required"}, 3},
		{calls, []string{"tool", "where", "target_type", "kazzle", "outcome", "done"}, 1},
		{calls, []string{"tool", "where", "outcome", "error"}, 1},
		{"caddy_toolgate_call_duration_seconds", []string{"tool", "md"}, 2},
		{"caddy_toolgate_upstream_duration_seconds", []string{"tool", "md"}, 2},
		// The button's own input is its result: no upstream request.
		{"caddy_toolgate_upstream_duration_seconds", []string{"tool", "card"}, 3},
		{"caddy_toolgate_cards_total", []string{"event", "opened"}, 3},
		{"caddy_toolgate_cards_total", []string{"event", "button"}, 1},
		{"caddy_toolgate_cards_total", []string{"event", "skip"}, 1},
		{"caddy_toolgate_cards_total", []string{"event", "cancel"}, 1},
		{"caddy_toolgate_client_tool_events_total", []string{"event", "offered"}, 2},
		{"caddy_toolgate_client_tool_events_total", []string{"event", "claimed"}, 1},
		{"caddy_toolgate_client_tool_events_total", []string{"event", "answered"}, 1},
		{"caddy_toolgate_client_tool_events_total", []string{"event", "timed_out"}, 1},
		{"caddy_toolgate_client_tool_wait_seconds", nil, 2},
		{"caddy_toolgate_refusals_total", []string{"reason", "policy"}, 1},
		{"caddy_toolgate_refusals_total", []string{"reason", "auth"}, 1},
		{"caddy_toolgate_refusals_total", []string{"reason", "loopback"}, 1},
		{"caddy_toolgate_refusals_total", []string{"reason", "limits"}, 1},
		// Every invoke but the refused one: md three times, domain_error,
		// three cards, two client calls.
		{"caddy_toolgate_ledger_operations_total", []string{"backend", "bolt", "op", "create", "result", "ok"}, 9},
		{"caddy_toolgate_ledger_errors_total", []string{"backend", "bolt"}, 0},
	} {
		if got := value(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Each refusal has its line at info, with its reason and code.
	var refusals []string
	for _, l := range logs.FilterMessage("refused").All() {
		f := l.ContextMap()
		refusals = append(refusals, fmt.Sprint(l.Level, " ", f["reason"], " ", f["code"]))
	}
	if got, want := strings.Join(refusals, ", "), "info policy forbidden, info auth invalid_token, info loopback forbidden, info limits too_large"; got != want {
		t.Errorf("refusal lines: %s, want %s", got, want)
	}
	// Every label value is from the config or a fixed set: no user, call
	// id, thread or URL.
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		text := mf.String()
		for _, leak := range []string{"u_1", "in_1", "th_1", "r_1", "c_btn", "ct_1", "127.0.0.1", "rebind"} {
			if strings.Contains(text, `"`+leak) {
				t.Errorf("%s has a label %q", mf.GetName(), leak)
			}
		}
	}
}

// A ledger that fails is counted by backend, and the call refused with
// 503 runs nothing.
func TestMetricsLedgerError(t *testing.T) {
	s, reg, _ := metricsServer(t, time.Second)
	if err := s.ledger.Close(); err != nil {
		t.Fatal(err)
	}
	if status, a := s.Call(t, "POST", "/tools/md", `{"input":{},`+apitest.Who+`}`); status != 503 {
		t.Fatalf("closed ledger: %d %+v", status, a)
	}
	if got := value(t, reg, "caddy_toolgate_ledger_errors_total", "backend", "bolt"); got != 1 {
		t.Errorf("ledger errors %v, want 1", got)
	}
	if got := value(t, reg, "caddy_toolgate_calls_total", "tool", "md", "outcome", "done"); got != 0 {
		t.Errorf("calls %v after a ledger error, want 0", got)
	}
}

// The call line has its fields; the identity token the target got, the
// input and the result never reach the log, at any level.
func TestCallLogLine(t *testing.T) {
	const inputValue, resultValue = "input-value-5d1c", "result-value-8e2f"
	var auth string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"content":"` + resultValue + `"}`))
	}))
	t.Cleanup(upstream.Close)
	core, logs := observer.New(zapcore.DebugLevel)
	s := startServer(t, options{
		sources: []manifest.Source{{Name: "t", Tools: parseTools(t, `{"tools":[{"name":"echo","description":"Echo.",
			"input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"POST","path":"/echo","body":"${input}"}}]}`)}},
		components: map[string]*dispatch.Component{"api": component(t, "api", upstream.URL, map[string]string{"K": "env-secret-77"})},
		logger:     zap.New(core),
		observer:   observe.Nop,
	})
	for range 2 {
		if status, a := s.Call(t, "POST", "/tools/echo", `{"input":{"v":"`+inputValue+`"},"callId":"call_log_1",`+apitest.Who+`}`); status != 200 || a.Content != resultValue {
			t.Fatalf("echo: %d %+v", status, a)
		}
	}
	if !strings.HasPrefix(auth, "Bearer ") {
		t.Fatalf("the target got no identity token: %q", auth)
	}
	lines := logs.FilterMessage("tool call").All()
	if len(lines) != 2 {
		t.Fatalf("%d call lines, want 2 (the call and its repeat)", len(lines))
	}
	for i, ledgerOutcome := range []string{"new", "replayed"} {
		l := lines[i]
		f := l.ContextMap()
		if l.Level != zapcore.InfoLevel || f["call_id"] != "call_log_1" || f["tool"] != "echo" || f["target_type"] != "app" ||
			f["status"] != "done" || f["is_error"] != false || f["ledger"] != ledgerOutcome {
			t.Errorf("line %d: %v %v", i, l.Level, f)
		}
		if _, ok := f["duration"].(time.Duration); !ok {
			t.Errorf("line %d: duration %v", i, f["duration"])
		}
	}
	if f := lines[0].ContextMap(); f["upstream_status"] != int64(200) {
		t.Errorf("upstream_status %v (%T)", f["upstream_status"], f["upstream_status"])
	}
	token := strings.TrimPrefix(auth, "Bearer ")
	for _, l := range logs.All() {
		text := l.Message
		for k, v := range l.ContextMap() {
			text += fmt.Sprintf(" %s=%v", k, v)
		}
		for _, secret := range []string{token, inputValue, resultValue, "env-secret-77", "u_1"} {
			if strings.Contains(text, secret) {
				t.Errorf("log line %q holds %q", l.Message, secret)
			}
		}
	}
}

// An MCP session is counted open from its initialization until it
// closes; every tools/call is counted, the sessionless revision's too,
// and runs through the gateway's counted path.
func TestMetricsMCP(t *testing.T) {
	s, reg, _ := metricsServer(t, time.Second)
	const sessions, mcpCalls = "caddy_toolgate_mcp_sessions", "caddy_toolgate_mcp_calls_total"
	// The SDK may handle a notification after answering it: wait a little.
	settled := func(want float64) float64 {
		deadline := time.Now().Add(5 * time.Second)
		for value(t, reg, sessions) != want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		return value(t, reg, sessions)
	}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: "2025-11-25"}.Session(t)
	if got := settled(1); got != 1 {
		t.Errorf("sessions %v with one open, want 1", got)
	}
	apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Meta: apitest.U1()})
	stateless := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	apitest.CallTool(t, stateless, &mcp.CallToolParams{Name: "md", Meta: apitest.U1()})
	if got := value(t, reg, mcpCalls); got != 2 {
		t.Errorf("mcp calls %v, want 2", got)
	}
	if got := value(t, reg, "caddy_toolgate_calls_total", "tool", "md", "outcome", "done"); got != 2 {
		t.Errorf("md calls %v, want 2", got)
	}
	if got := value(t, reg, sessions); got != 1 {
		t.Errorf("sessions %v after a sessionless call, want 1", got)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if got := settled(0); got != 0 {
		t.Errorf("sessions %v after closing, want 0", got)
	}
}
