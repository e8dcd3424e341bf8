package caddymodule

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/redistest"
)

type cardAnswer struct {
	answer
	CardObj struct {
		Title    string `json:"title"`
		Elements []struct {
			ID string `json:"id"`
		} `json:"elements"`
	}
}

func call(t *testing.T, tc *caddytest.Tester, method, path, body string) (int, cardAnswer) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a cardAnswer
	if err := json.Unmarshal(raw, &a.answer); err != nil {
		// "card" is an object here, which answer's Card string cannot hold.
		var loose map[string]json.RawMessage
		if json.Unmarshal(raw, &loose) != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, raw)
		}
		_ = json.Unmarshal(loose["callId"], &a.CallID)
		_ = json.Unmarshal(loose["status"], &a.Status)
		_ = json.Unmarshal(loose["tool"], &a.Tool)
		_ = json.Unmarshal(loose["card"], &a.CardObj)
	}
	return resp.StatusCode, a
}

const thread = `"context":{"source":"thread","threadId":"th_1"}`

func TestAtMostOnce(t *testing.T) {
	tc, rec, _ := startGateway(t)

	before := rec.count()
	status, a := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"once_1",`+who+`}`)
	if status != 200 || a.Content != "saved" {
		t.Fatalf("first: %d %+v", status, a)
	}
	status, b := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"once_1",`+who+`}`)
	if status != 200 || b.answer != a.answer {
		t.Errorf("repeat: %d %+v, want the recorded %+v", status, b, a)
	}
	if n := rec.count() - before; n != 1 {
		t.Errorf("the target ran %d times for one call id", n)
	}
	if got := rec.get(t, "/md").Header.Get("Idempotency-Key"); got != "once_1" {
		t.Errorf("Idempotency-Key %q", got)
	}
	// Another caller may use the same call id: keys are per caller.
	if status, _ := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"once_1","identity":{"user":"u_2"}}`); status != 200 || rec.count()-before != 2 {
		t.Errorf("another caller's call id: %d, target ran %d times", status, rec.count()-before)
	}
	// The same call id with another input is a misuse.
	status, e := call(t, tc, "POST", "/tools/get_item", `{"input":{"id":"x"},"callId":"once_1",`+who+`}`)
	if status != 422 || e.Error == nil || e.Error.Code != "idempotency_key_reuse" {
		t.Errorf("reuse: %d %+v", status, e.Error)
	}

	// Concurrent repeats of one call id: one run, every caller the same answer.
	before = rec.count()
	var wg sync.WaitGroup
	answers := make([]cardAnswer, 5)
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, answers[i] = call(t, tc, "POST", "/tools/slowok", `{"input":{},"callId":"once_2",`+who+`}`)
		}(i)
	}
	wg.Wait()
	for i, a := range answers {
		if a.Content != "slow ok" || a.Status != "done" {
			t.Errorf("caller %d got %+v", i, a)
		}
	}
	if n := rec.count() - before; n != 1 {
		t.Errorf("concurrent repeats ran the target %d times", n)
	}

	status, g := call(t, tc, "GET", "/calls/once_2?user=u_1&install=in_1", "")
	if status != 200 || g.Content != "slow ok" || g.Status != "done" {
		t.Errorf("GET /calls: %d %+v", status, g)
	}
	if status, _ := call(t, tc, "GET", "/calls/once_2?user=u_9", ""); status != 404 {
		t.Errorf("another caller's call: %d, want 404", status)
	}
}

func TestCardFlow(t *testing.T) {
	tc, rec, _ := startGateway(t)

	// On an api call a card is an error result.
	status, a := call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},`+who+`}`)
	if status != 200 || !a.IsError || !strings.Contains(a.Content, "api call") {
		t.Errorf("api card: %d %+v", status, a)
	}
	// Invalid cards are error results.
	for kind, want := range map[string]string{"dup": "used twice", "badtarget": `component "nowhere"`} {
		status, a := call(t, tc, "POST", "/tools/card", `{"input":{"kind":"`+kind+`"},`+thread+`,`+who+`}`)
		if status != 200 || !a.IsError || !strings.Contains(a.Content, want) {
			t.Errorf("%s card: %d %+v", kind, status, a)
		}
	}

	// A thread call pauses on the card.
	status, a = call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c1",`+thread+`,`+who+`}`)
	if status != 200 || a.Status != "action_required" || a.CardObj.Title != "Send the email?" || len(a.CardObj.Elements) != 3 {
		t.Fatalf("card: %d %+v", status, a)
	}
	before := rec.count()
	if status, r := call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c1",`+thread+`,`+who+`}`); status != 200 || r.Status != "action_required" || rec.count() != before {
		t.Errorf("repeat of a paused call: %d %+v, target hits %d", status, r, rec.count()-before)
	}
	if status, g := call(t, tc, "GET", "/calls/c1?user=u_1&install=in_1", ""); status != 200 || g.Status != "action_required" || g.CardObj.Title == "" {
		t.Errorf("GET paused: %d %+v", status, g)
	}

	for _, c := range []struct{ body, code string }{
		{`{}`, "invalid_resume"},
		{`{"buttonId":"approve","action":"skip"}`, "invalid_resume"},
		{`{"action":"later"}`, "invalid_resume"},
		{`{"buttonId":"nope"}`, "unknown_button"},
	} {
		body := strings.TrimSuffix(c.body, "}")
		if body != "{" {
			body += ","
		}
		body += `"identity":{"user":"u_1","install":"in_1"}}`
		if status, e := call(t, tc, "POST", "/calls/c1/resume", body); status != 400 || e.Error == nil || e.Error.Code != c.code {
			t.Errorf("resume %s: %d %+v", c.body, status, e.Error)
		}
	}
	if status, _ := call(t, tc, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_2"}}`); status != 404 {
		t.Errorf("another caller resuming: %d, want 404", status)
	}

	// A button without a target: its input is the result.
	status, r := call(t, tc, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_1","install":"in_1"}}`)
	if status != 200 || r.Status != "done" || r.IsError || r.Content != "approved" || r.Markdown != "**approved**" {
		t.Fatalf("approve: %d %+v", status, r)
	}
	if status, again := call(t, tc, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_1","install":"in_1"}}`); status != 200 || again.answer != r.answer {
		t.Errorf("second identical resume: %d %+v", status, again)
	}
	if status, e := call(t, tc, "POST", "/calls/c1/resume", `{"buttonId":"reject","identity":{"user":"u_1","install":"in_1"}}`); status != 409 || e.Error == nil || e.Error.Code != "conflict" {
		t.Errorf("another button after the first: %d %+v", status, e.Error)
	}
	if status, g := call(t, tc, "GET", "/calls/c1?user=u_1&install=in_1", ""); status != 200 || g.answer != r.answer {
		t.Errorf("GET resumed: %d %+v", status, g)
	}

	// An input without content is its compact JSON text.
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c2",`+thread+`,`+who+`}`)
	if _, r := call(t, tc, "POST", "/calls/c2/resume", `{"buttonId":"reject","identity":{"user":"u_1","install":"in_1"}}`); r.Content != `{"reason":"no","n":1}` || r.IsError {
		t.Errorf("reject: %+v", r)
	}

	// A button with a target runs it with the call's identity and thread.
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c3",`+thread+`,`+who+`}`)
	status, r = call(t, tc, "POST", "/calls/c3/resume", `{"buttonId":"run","identity":{"user":"u_1","install":"in_1"}}`)
	if status != 200 || r.IsError || r.Content != "ok" {
		t.Fatalf("run: %d %+v", status, r)
	}
	got := rec.get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/z9" || string(got.Body) != `{"id":"z9"}` ||
		got.Header.Get("Kazzle-Tool-Context") != `{"source":"thread","threadId":"th_1"}` || got.Header.Get("Idempotency-Key") != "c3/run" {
		t.Errorf("button target sent %s %s %s %v", got.Method, got.Path, got.Body, got.Header)
	}
	if claims := verifyWithJWKS(t, tc, strings.TrimPrefix(got.Header.Get("Authorization"), "Bearer ")); claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("button target identity %v", claims)
	}

	// Skip and cancel.
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c4",`+thread+`,`+who+`}`)
	if _, r := call(t, tc, "POST", "/calls/c4/resume", `{"action":"skip","identity":{"user":"u_1","install":"in_1"}}`); r.IsError || !strings.Contains(r.Content, "skipped") {
		t.Errorf("skip: %+v", r)
	}
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c5",`+thread+`,`+who+`}`)
	if _, r := call(t, tc, "POST", "/calls/c5/resume", `{"action":"cancel","identity":{"user":"u_1","install":"in_1"}}`); !r.IsError || !strings.Contains(r.Content, "cancelled") {
		t.Errorf("cancel: %+v", r)
	}

	// A card for one device: others may not press, but may skip.
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"device"},"callId":"c6",`+thread+`,`+who+`}`)
	for _, device := range []string{``, `,"device":"pc-1"`} {
		if status, e := call(t, tc, "POST", "/calls/c6/resume", `{"buttonId":"scan","identity":{"user":"u_1","install":"in_1"}`+device+`}`); status != 403 || e.Error == nil || !strings.Contains(e.Error.Message, "continue on pc-7") {
			t.Errorf("press from %q: %d %+v", device, status, e.Error)
		}
	}
	if _, r := call(t, tc, "POST", "/calls/c6/resume", `{"buttonId":"scan","device":"pc-7","identity":{"user":"u_1","install":"in_1"}}`); r.Content != "scanned" {
		t.Errorf("press from pc-7: %+v", r)
	}
	call(t, tc, "POST", "/tools/card", `{"input":{"kind":"device"},"callId":"c7",`+thread+`,`+who+`}`)
	if _, r := call(t, tc, "POST", "/calls/c7/resume", `{"action":"skip","device":"pc-1","identity":{"user":"u_1","install":"in_1"}}`); r.IsError || !strings.Contains(r.Content, "skipped") {
		t.Errorf("skip from another device: %+v", r)
	}
}

// TestRedisDown checks that calls fail closed with 503 while Redis is
// unreachable, reach nothing, and work again when it returns.
func TestRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	rec := newRecorder(t)
	cfg := strings.Replace(testConfig(t, rec.srv.URL, dataDir(t)), "ledger bolt ", "ledger redis "+rs.Addr+" # ", 1)
	tc := caddytest.NewTester(t)
	tc.InitServer(cfg, "caddyfile")

	if status, a := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"r1",`+who+`}`); status != 200 || a.Content != "saved" {
		t.Fatalf("with redis: %d %+v", status, a)
	}
	rs.Stop()
	before := rec.count()
	status, e := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"r2",`+who+`}`)
	if status != 503 || e.Error == nil || e.Error.Code != "unavailable" {
		t.Errorf("redis down: %d %+v", status, e.Error)
	}
	if rec.count() != before {
		t.Error("a call ran while the ledger was down")
	}
	rs.Restart(t)
	var a cardAnswer
	for i := 0; i < 50; i++ {
		if status, a = call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"r2",`+who+`}`); status == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != 200 || a.Content != "saved" {
		t.Errorf("after redis returned: %d %+v", status, a)
	}
}

// A retention shorter than a call may stay in flight (the longer of the
// upstream and client tool timeouts, plus 15s) is a config error naming
// the numbers: a call swept while in flight would run again when repeated.
func TestLedgerRetentionCoversInFlight(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ledger           Ledger
		upstream, client time.Duration
		want             string // in the error; "" for none
	}{
		{name: "defaults", ledger: Ledger{}},
		{name: "below the default client wait", ledger: Ledger{Retention: caddy.Duration(time.Minute)},
			want: "retention 1m0s is shorter than a call may stay in flight, 2m15s (the longer of upstream_timeout 30s and client_tool_timeout 2m0s, plus 15s)"},
		{name: "just enough", ledger: Ledger{Retention: caddy.Duration(2*time.Minute + 15*time.Second)}},
		{name: "short timeouts", ledger: Ledger{Retention: caddy.Duration(time.Minute)}, upstream: 10 * time.Second, client: 30 * time.Second},
		{name: "upstream the longer", ledger: Ledger{Retention: caddy.Duration(10 * time.Minute)}, upstream: 10 * time.Minute, client: time.Minute,
			want: "retention 10m0s is shorter than a call may stay in flight, 10m15s (the longer of upstream_timeout 10m0s and client_tool_timeout 1m0s, plus 15s)"},
		{name: "redis", ledger: Ledger{Backend: "redis", Addr: "127.0.0.1:1", Retention: caddy.Duration(time.Second)},
			want: "retention 1s is shorter"},
		{name: "default retention, day-long timeout", ledger: Ledger{}, upstream: 24 * time.Hour,
			want: "retention 24h0m0s is shorter"},
		{name: "off", ledger: Ledger{Backend: "off", Retention: caddy.Duration(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.ledger
			if l.Backend == "" {
				l.Path = filepath.Join(t.TempDir(), "ledger.db")
			}
			err := provisionLedger(t, &Handler{Ledger: &l, UpstreamTimeout: caddy.Duration(tc.upstream), ClientToolTimeout: caddy.Duration(tc.client)})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("provision: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("provision error %v; want one with %q", err, tc.want)
			}
		})
	}
}

// provisionLedger provisions h, given its ledger and timeouts, with a key
// and one tool, and cleans it up when the test ends: for the ledger's
// config checks, which need no server.
func provisionLedger(t *testing.T, h *Handler) error {
	t.Helper()
	h.Identity = &Identity{KeyFile: writeKey(t)}
	h.Tools = []manifest.Tool{{
		Name: "ping", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Target: dispatch.Spec{Type: "url", Method: "GET", URL: "http://127.0.0.1:1/ping"},
	}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	err := h.provision(ctx, zap.NewNop())
	t.Cleanup(func() { _ = h.Cleanup() })
	return err
}

// TestLedgerRedisTLS runs calls through a Redis ledger that speaks only
// TLS, named by a rediss:// addr or by the tls flag, trusting its private
// CA: each call id still runs once.
func TestLedgerRedisTLS(t *testing.T) {
	rs := redistest.StartTLS(t)
	for _, ledgerBlock := range []string{
		"ledger redis rediss://" + rs.Addr + " {\n\t\t\ttls_ca_file " + rs.CAFile + "\n\t\t}",
		"ledger redis " + rs.Addr + " {\n\t\t\ttls\n\t\t\ttls_ca_file " + rs.CAFile + "\n\t\t\tprefix flag:\n\t\t}",
	} {
		rec := newRecorder(t)
		cfg := strings.Replace(testConfig(t, rec.srv.URL, dataDir(t)), "ledger bolt ", ledgerBlock+" # ", 1)
		tc := caddytest.NewTester(t)
		tc.InitServer(cfg, "caddyfile")
		for range 2 {
			if status, a := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"tls_1",`+who+`}`); status != 200 || a.Content != "saved" {
				t.Fatalf("%s: %d %+v", ledgerBlock, status, a)
			}
		}
		if n := rec.count(); n != 1 {
			t.Errorf("%s: the target ran %d times for one call id", ledgerBlock, n)
		}
	}
}

// Redis TLS options that cannot work are config errors naming the option.
func TestLedgerRedisTLSErrors(t *testing.T) {
	rs := redistest.StartTLS(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ledger Ledger
		want   string
	}{
		{"untrusted certificate", Ledger{Addr: "rediss://" + rs.Addr}, "certificate signed by unknown authority"},
		{"plain to a TLS server", Ledger{Addr: rs.Addr}, "if the server speaks TLS, use rediss:// or tls"},
		{"plain scheme with tls", Ledger{Addr: "redis://" + rs.Addr, TLS: true}, "is plain redis:// but tls is on"},
		{"ca file without tls", Ledger{Addr: rs.Addr, TLSCAFile: rs.CAFile}, "tls_ca_file " + rs.CAFile + " needs tls"},
		{"missing ca file", Ledger{Addr: "rediss://" + rs.Addr, TLSCAFile: "/nonexistent/ca.pem"}, "tls_ca_file: open /nonexistent/ca.pem"},
		{"ca file not PEM", Ledger{Addr: "rediss://" + rs.Addr, TLSCAFile: notPEM}, "tls_ca_file " + notPEM + ": no PEM certificate"},
		{"credentials in the addr", Ledger{Addr: "rediss://u:p@" + rs.Addr + "/2"}, "password and db are options of their own"},
		{"unknown scheme", Ledger{Addr: "http://" + rs.Addr}, `unknown scheme "http"`},
		{"no port", Ledger{Addr: "rediss://127.0.0.1"}, "missing port"},
		{"tls on bolt", Ledger{Backend: "bolt", TLS: true}, "tls and tls_ca_file are for redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.ledger
			if l.Backend == "" {
				l.Backend = "redis"
			}
			err := provisionLedger(t, &Handler{Ledger: &l})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("provision error %v; want one with %q", err, tc.want)
			}
		})
	}
}

// A reload that changes the bolt ledger's options opens the same file once
// the replaced config lets it go, keeping its calls; before, the new config
// waited for the lock and failed.
func TestLedgerReloadChangesOptions(t *testing.T) {
	rec := newRecorder(t)
	dir := dataDir(t)
	cfg := testConfig(t, rec.srv.URL, dir)
	tc := caddytest.NewTester(t)
	tc.InitServer(cfg, "caddyfile")
	_, first := call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"reload_1",`+who+`}`)

	line := "ledger bolt " + dir + "/ledger.db"
	if !strings.Contains(cfg, line+"\n") {
		t.Fatalf("the test config has no %q line", line)
	}
	tc.InitServer(strings.Replace(cfg, line+"\n", line+" {\n\t\t\t\tretention 48h\n\t\t\t}\n", 1), "caddyfile")
	before := rec.count()
	deadline := time.Now().Add(patienceReload)
	var status int
	var again cardAnswer
	for {
		if status, again = call(t, tc, "POST", "/tools/md", `{"input":{},"callId":"reload_1",`+who+`}`); status == 200 || time.Now().After(deadline) {
			break
		}
		if status != 503 {
			t.Fatalf("a call while the ledger reopens: %d %+v; want 503 or 200", status, again)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != 200 || again.answer != first.answer || rec.count() != before {
		t.Errorf("the recorded call after the reload: %d %+v (target ran %d times); want %+v", status, again, rec.count()-before, first)
	}
}

// patienceReload bounds the wait for a reloaded ledger to open: it tries
// every second.
const patienceReload = 10 * time.Second
