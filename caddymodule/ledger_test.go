package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// TestRedisDown checks that calls fail closed with 503 while Redis is
// unreachable, reach nothing, and work again when it returns.
func TestRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	rec := apitest.NewRecorder(t)
	cfg := strings.Replace(testConfig(t, rec.URL, dataDir(t)), "ledger bolt ", "ledger redis "+rs.Addr+" # ", 1)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)

	if status, a := client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"r1",`+apitest.Who+`}`); status != 200 || a.Content != "saved" {
		t.Fatalf("with redis: %d %+v", status, a)
	}
	rs.Stop()
	before := rec.Count()
	status, e := client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"r2",`+apitest.Who+`}`)
	if status != 503 || e.Error == nil || e.Error.Code != "unavailable" {
		t.Errorf("redis down: %d %+v", status, e.Error)
	}
	if rec.Count() != before {
		t.Error("a call ran while the ledger was down")
	}
	rs.Restart(t)
	var a apitest.CardAnswer
	for i := 0; i < 50; i++ {
		if status, a = client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"r2",`+apitest.Who+`}`); status == 200 {
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
		Name: "ping", Description: "d", InputSchema: jsontext.Value(`{"type":"object"}`),
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
		rec := apitest.NewRecorder(t)
		cfg := strings.Replace(testConfig(t, rec.URL, dataDir(t)), "ledger bolt ", ledgerBlock+" # ", 1)
		tc := caddytest.NewTester(t)
		initServer(tc, cfg)
		for range 2 {
			if status, a := client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"tls_1",`+apitest.Who+`}`); status != 200 || a.Content != "saved" {
				t.Fatalf("%s: %d %+v", ledgerBlock, status, a)
			}
		}
		if n := rec.Count(); n != 1 {
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
		{"tls on bolt", Ledger{Backend: "bolt", TLS: true}, "tls, tls_ca_file, allow_eviction and replicas are for redis"},
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
	rec := apitest.NewRecorder(t)
	dir := dataDir(t)
	cfg := testConfig(t, rec.URL, dir)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)
	_, first := client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"reload_1",`+apitest.Who+`}`)

	line := "ledger bolt " + dir + "/ledger.db"
	if !strings.Contains(cfg, line+"\n") {
		t.Fatalf("the test config has no %q line", line)
	}
	initServer(tc, strings.Replace(cfg, line+"\n", line+" {\n\t\t\t\tretention 48h\n\t\t\t}\n", 1))
	before := rec.Count()
	deadline := time.Now().Add(patienceReload)
	var status int
	var again apitest.CardAnswer
	for {
		if status, again = client(tc).Call(t, "POST", "/tools/md", `{"input":{},"callId":"reload_1",`+apitest.Who+`}`); status == 200 || time.Now().After(deadline) {
			break
		}
		if status != 503 {
			t.Fatalf("a call while the ledger reopens: %d %+v; want 503 or 200", status, again)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != 200 || again.Answer != first.Answer || rec.Count() != before {
		t.Errorf("the recorded call after the reload: %d %+v (target ran %d times); want %+v", status, again, rec.Count()-before, first)
	}
}

// patienceReload bounds the wait for a reloaded ledger to open: it tries
// every second.
const patienceReload = 10 * time.Second

// A result larger than the ledger's max_result_size reaches the call's
// caller whole, and is recorded without it: a repeat of the call and GET
// /calls/{id} answer an error result that names the size and the limit,
// and the target is not called again.
func TestLedgerMaxResultSize(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	answer, _ := json.Marshal(map[string]string{"content": big})
	var runs atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer up.Close()

	dir := dataDir(t)
	cfg := testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			identity {
				key_file %s
			}
			ledger bolt %s/ledger.db {
				max_result_size 64KiB
			}
			tool big {
				description "A large answer."
				input_schema {"type":"object"}
				target url GET %s/big
			}
		}
	}
}
`, writeKey(t), dir, up.URL)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)

	body := `{"input":{},"callId":"big_1",` + apitest.Who + `}`
	status, first := client(tc).Call(t, "POST", "/tools/big", body)
	if status != 200 || first.IsError || first.Content != big {
		t.Fatalf("first call: %d, error %v, %d bytes of content; want the whole %d", status, first.IsError, len(first.Content), len(big))
	}
	want := fmt.Sprintf("result too large to replay: the call ran once and answered %d bytes, more than the ledger keeps (max_result_size 65536 bytes)", len(big)+len(`{"isError":false,"content":""}`))
	status, again := client(tc).Call(t, "POST", "/tools/big", body)
	if status != 200 || again.Status != "done" || !again.IsError || !strings.HasPrefix(again.Content, want) {
		t.Errorf("repeat: %d %+v; want a done error result starting %q", status, again.Answer, want)
	}
	status, got := client(tc).GetCall(t, "/calls/big_1?user=u_1&install=in_1")
	if status != 200 || got.Status != "done" || !got.IsError || !strings.HasPrefix(got.Content, want) {
		t.Errorf("GET /calls: %d %+v; want a done error result starting %q", status, got, want)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the target ran %d times; want once", n)
	}
}

// A max_result_size under 1 KiB is a config error that says the least.
func TestLedgerMaxResultSizeTooSmall(t *testing.T) {
	err := provisionLedger(t, &Handler{Ledger: &Ledger{Path: filepath.Join(dataDir(t), "ledger.db"), MaxResultSize: 512}})
	if want := "max_result_size 512 bytes is less than the least it may be, 1024 bytes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("provision error %v; want one with %q", err, want)
	}
}

// A ledger is shared by the configs that are equal, and only by them: a
// retention alone makes another ledger.
func TestLedgerKey(t *testing.T) {
	fsync := true
	base := Ledger{Backend: "bolt", Path: "/var/lib/toolgate/ledger.db", Retention: caddy.Duration(time.Hour)}
	key := func(l Ledger) string {
		t.Helper()
		k, err := ledgerKey(l.config())
		if err != nil || k == "" {
			t.Fatalf("ledgerKey(%+v) = %q, %v", l, k, err)
		}
		return k
	}
	same := key(base)
	if again := key(base); again != same {
		t.Errorf("one config, two keys: %s and %s", same, again)
	}
	for _, other := range []Ledger{
		{Backend: "bolt", Path: base.Path, Retention: caddy.Duration(2 * time.Hour)},
		{Backend: "bolt", Path: base.Path},
		{Backend: "bolt", Path: "/tmp/other.db", Retention: base.Retention},
		{Backend: "bolt", Path: base.Path, Retention: base.Retention, Fsync: &fsync},
	} {
		if k := key(other); k == same {
			t.Errorf("%+v shares the key %s", other, k)
		}
	}
}
