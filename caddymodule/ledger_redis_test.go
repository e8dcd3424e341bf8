package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/apptools"
	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// payments is an upstream that counts the times it runs each call, by its
// Idempotency-Key, and answers 2 KiB.
type payments struct {
	*httptest.Server
	mu   sync.Mutex
	runs map[string]int
}

func newPayments(t *testing.T) *payments {
	p := &payments{runs: map[string]int{}}
	pad := strings.Repeat("x", 2<<10)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		p.runs[id]++
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":"paid %s","markdown":%q}`, id, pad)
	}))
	t.Cleanup(p.Close)
	return p
}

// ran is how many times the upstream ran user's call id (in in_1, as pay
// sends it): the upstream counts by Idempotency-Key.
func (p *payments) ran(user, id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[apptools.IdempotencyKey(user, "in_1", id)]
}

// paid is the upstream's answer to user's call id.
func paid(user, id string) string {
	return "paid " + apptools.IdempotencyKey(user, "in_1", id)
}

// startPayments serves a tool pay, an app target on p, with the given
// ledger line (and block).
func startPayments(t *testing.T, p *payments, ledgerLines string) *caddytest.Tester {
	t.Helper()
	cfg := testGlobals(dataDir(t)) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			identity {
				key_file %s
			}
			component pay %s
			%s
			tool pay {
				description "Pay."
				input_schema {"type":"object"}
				target app pay POST /pay
			}
		}
	}
}
`, writeKey(t), p.URL, ledgerLines)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)
	return tc
}

// pay invokes pay as user with call id id.
func pay(t *testing.T, tc *caddytest.Tester, user, id string) (int, apitest.CardAnswer) {
	t.Helper()
	return client(tc).Call(t, "POST", "/tools/pay", `{"input":{},"callId":"`+id+`","identity":{"user":"`+user+`","install":"in_1"}}`)
}

// brief is an answer without its 2 KiB of markdown, for messages.
func brief(a apitest.CardAnswer) string {
	if a.Error != nil {
		return fmt.Sprintf("error %s: %s", a.Error.Code, a.Error.Message)
	}
	return fmt.Sprintf("%s %q (error result %v)", a.Status, a.Content, a.IsError)
}

// A Redis whose maxmemory-policy may evict the ledger's keys is a config
// error naming the setting; allow_eviction accepts it with a warning in
// the gateway's log.
func TestLedgerRedisEvictionPolicy(t *testing.T) {
	rs := redistest.StartWith(t, "--maxmemory-policy", "volatile-lru")
	err := provisionLedger(t, &Handler{Ledger: &Ledger{Backend: "redis", Addr: rs.Addr}})
	if want := "ledger redis " + rs.Addr + ": the server's maxmemory-policy is volatile-lru: keys the ledger holds can be evicted and a call run twice; set maxmemory-policy noeviction, or write allow_eviction in the ledger block to accept that"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("provision error %v; want one with %q", err, want)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	h := &Handler{Ledger: &Ledger{Backend: "redis", Addr: rs.Addr, AllowEviction: true}, Identity: &Identity{KeyFile: writeKey(t)}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	err = h.provision(ctx, zap.New(core))
	t.Cleanup(func() { _ = h.Cleanup() })
	if err != nil {
		t.Fatalf("provision with allow_eviction: %v", err)
	}
	if warned := logs.FilterMessageSnippet("allow_eviction").FilterField(zap.String("maxmemory-policy", "volatile-lru")); warned.Len() != 1 {
		t.Errorf("logged %+v; want one allow_eviction warning naming the policy", logs.All())
	}
}

// With replicas 1 and no replica, a call answers 503 and reaches nothing;
// once a replica confirms writes, the same call id runs, once.
func TestLedgerRedisReplicas(t *testing.T) {
	rs := redistest.Start(t)
	p := newPayments(t)
	tc := startPayments(t, p, "ledger redis "+rs.Addr+" {\n\t\t\t\treplicas 1\n\t\t\t}")

	status, a := pay(t, tc, "alice", "pay-1")
	if status != 503 || a.Error == nil || a.Error.Code != "unavailable" {
		t.Errorf("with no replica: %d %s; want 503 unavailable", status, brief(a))
	}
	if n := p.ran("alice", "pay-1"); n != 0 {
		t.Fatalf("the upstream ran pay-1 %d times with no replica to confirm it; want 0", n)
	}

	// A loaded machine (the race detector on every package at once) can
	// keep a replica's acknowledgement past the 500 ms wait: that call is
	// refused, taken back and nothing runs, so it may be repeated.
	redistest.StartReplica(t, rs)
	for try := 0; ; try++ {
		status, a = pay(t, tc, "alice", "pay-1")
		if status == 503 && try < 10 && p.ran("alice", "pay-1") == 0 {
			continue
		}
		if status != 200 || a.Content != paid("alice", "pay-1") {
			t.Errorf("with a replica: %d %s", status, brief(a))
		}
		break
	}
	status, a = pay(t, tc, "alice", "pay-1")
	if status != 200 || a.Content != paid("alice", "pay-1") || p.ran("alice", "pay-1") != 1 {
		t.Errorf("repeat: %d %s; the upstream ran pay-1 %d times; want the recorded answer, once", status, brief(a), p.ran("alice", "pay-1"))
	}
}

// A Redis that is full (maxmemory, noeviction) refuses writes rather than
// evicting: bob's flood of new calls ends in 503s that reach nothing,
// while alice's call, recorded before, is answered from its record when
// repeated and does not run again.
func TestLedgerRedisFullFailsClosed(t *testing.T) {
	rs := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	p := newPayments(t)
	tc := startPayments(t, p, "ledger redis "+rs.Addr)

	status, first := pay(t, tc, "alice", "pay-1")
	if status != 200 || first.Content != paid("alice", "pay-1") {
		t.Fatalf("alice's call: %d %s", status, brief(first))
	}

	// Room for about a hundred more calls.
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer admin.Close()
	ctx := context.Background()
	info, err := admin.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := admin.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+256<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}

	refused, ran := 0, 0
	for i := 0; i < 2000 && refused < 5; i++ {
		id := fmt.Sprint("flood-", i)
		status, a := pay(t, tc, "bob", id)
		switch {
		case status == 503 && a.Error != nil && a.Error.Code == "unavailable":
			refused++
			if n := p.ran("bob", id); n != 0 {
				t.Errorf("bob's %s answered 503, yet the upstream ran it %d times", id, n)
			}
		case status == 200 && a.Content == paid("bob", id):
			ran++
			if n := p.ran("bob", id); n != 1 {
				t.Errorf("bob's %s ran %d times", id, n)
			}
		default:
			t.Fatalf("bob's %s: %d %s", id, status, brief(a))
		}
	}
	t.Logf("bob's flood: %d calls ran, then %d were refused", ran, refused)
	if refused == 0 {
		t.Fatal("Redis never refused a write")
	}

	status, again := pay(t, tc, "alice", "pay-1")
	if status != 200 || again.Answer != first.Answer {
		t.Errorf("alice's repeat on a full Redis: %d %s; want the recorded %s", status, brief(again), brief(first))
	}
	if n := p.ran("alice", "pay-1"); n != 1 {
		t.Errorf("the upstream ran alice's pay-1 %d times; want once", n)
	}
}
