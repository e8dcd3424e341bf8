package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/redistest"
)

// observed is a logger that keeps its lines, and the lines.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// openRedisConfig opens the Redis ledger cfg configures at addr, through
// Config as a gateway does.
func openRedisConfig(t *testing.T, cfg ledger.Config, logger *zap.Logger) (ledger.Ledger, error) {
	t.Helper()
	cfg.Backend = "redis"
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	l, err := cfg.Open(logger)
	if err == nil {
		t.Cleanup(func() { _ = l.Close() })
	}
	return l, err
}

// A server whose maxmemory-policy may evict the ledger's keys is a config
// error naming the setting, unless allow_eviction accepts it, which is
// logged as a warning; noeviction opens quietly, and a server that will
// not say (CONFIG renamed away, as managed Redis has it) opens with a
// line saying what to make sure of.
func TestRedisEvictionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		allow bool
		err   string // in Open's error; "" for none
		log   string // in the one line logged; "" for none
	}{
		{name: "volatile-lru", args: []string{"--maxmemory-policy", "volatile-lru"},
			err: "the server's maxmemory-policy is volatile-lru: keys the ledger holds can be evicted and a call run twice; set maxmemory-policy noeviction, or write allow_eviction in the ledger block to accept that"},
		{name: "allkeys-lru", args: []string{"--maxmemory-policy", "allkeys-lru"}, err: "maxmemory-policy is allkeys-lru"},
		{name: "volatile-lru allowed", args: []string{"--maxmemory-policy", "volatile-lru"}, allow: true,
			log: "allow_eviction: the Redis server may evict keys the ledger holds"},
		{name: "noeviction", args: []string{"--maxmemory-policy", "noeviction"}},
		{name: "CONFIG renamed away", args: []string{"--rename-command", "CONFIG", ""},
			log: "could not read the Redis server's maxmemory-policy (CONFIG is disabled or renamed, as on many managed Redis services): make sure it is noeviction"},
		{name: "CONFIG renamed away, eviction allowed", args: []string{"--rename-command", "CONFIG", ""}, allow: true,
			log: "could not read the Redis server's maxmemory-policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartWith(t, tc.args...)
			logger, logs := observed()
			l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr, AllowEviction: tc.allow}, logger)
			if tc.err != "" {
				want := "ledger redis " + s.Addr + ": " + tc.err
				if err == nil || !strings.HasPrefix(err.Error(), "ledger redis "+s.Addr+": the server's maxmemory-policy is") || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Open = %v; want an error like %q", err, want)
				}
				var refused *ledger.EvictionError
				if !errors.As(err, &refused) || errors.Is(err, ledger.ErrUnavailable) {
					t.Errorf("Open's error %v is not an EvictionError alone", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			mustCreate(t, l, newCall(t, "first"))
			lines := logs.All()
			if tc.log == "" {
				if len(lines) != 0 {
					t.Errorf("logged %+v; want nothing", lines)
				}
				return
			}
			if len(lines) != 1 || lines[0].Level != zapcore.WarnLevel || !strings.Contains(lines[0].Message, tc.log) {
				t.Fatalf("logged %+v; want one warning with %q", lines, tc.log)
			}
			if got := lines[0].ContextMap()["addr"]; got != s.Addr {
				t.Errorf("the warning names addr %v; want %s", got, s.Addr)
			}
		})
	}
}

// Every connection the ledger makes is checked, not only the first: after
// a failover to a server that may evict (here the same server, its policy
// changed and its connections cut), calls fail closed with ErrUnavailable
// and one error is logged, not one a call; once it is noeviction again
// they go on.
func TestRedisEvictionPolicyOnReconnect(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	logger, logs := observed()
	l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr}, logger)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, l, newCall(t, "before"))

	admin := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer admin.Close()
	failover := func(policy string) {
		t.Helper()
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"normal", "pubsub"} {
			if err := admin.Do(ctx, "client", "kill", "type", kind, "skipme", "yes").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	failover("volatile-lru")
	for i := range 3 {
		_, _, err := l.Create(ctx, newCall(t, fmt.Sprint("during-", i)))
		var refused *ledger.EvictionError
		if !errors.Is(err, ledger.ErrUnavailable) || !errors.As(err, &refused) || refused.Policy != "volatile-lru" {
			t.Fatalf("Create once the server may evict: %v; want ErrUnavailable from an EvictionError", err)
		}
	}
	errs := logs.FilterMessageSnippet("refusing the Redis server").All()
	if len(errs) != 1 || errs[0].Level != zapcore.ErrorLevel || !strings.Contains(errs[0].ContextMap()["error"].(string), "maxmemory-policy is volatile-lru") {
		t.Errorf("logged %+v; want one error naming the policy", logs.All())
	}

	failover("noeviction")
	mustCreate(t, l, newCall(t, "after"))
	if n := logs.FilterMessage("the Redis server's maxmemory-policy is noeviction").Len(); n != 1 {
		t.Errorf("logged %+v; want one line saying the policy is noeviction again", logs.All())
	}
}

// With replicas 1 and no replica, every write fails closed with
// ErrUnavailable that says so, within the wait, and the ledger still opens
// (saying so in its log): replicas may come back. A Create that failed so
// is taken back: nothing ran, and a repeat may run it.
func TestRedisReplicasMissing(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	logger, logs := observed()
	l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr, Replicas: 1}, logger)
	if err != nil {
		t.Fatalf("Open with replicas 1 and none: %v", err)
	}
	unreplicated, err := openRedisConfig(t, ledger.Config{Addr: s.Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessageSnippet("fewer replicas").FilterField(zap.Int("replicas", 1)).Len() != 1 {
		t.Errorf("logged %+v; want the missing replica at open", logs.All())
	}
	const want = "0 of the 1 replicas asked for confirmed the write within 500ms"
	failsClosed := func(what string, op func() error) {
		t.Helper()
		start := time.Now()
		err := op()
		if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want ErrUnavailable saying %q", what, err, want)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s took %s to fail", what, took)
		}
	}
	failsClosed("Create", func() error {
		_, _, err := l.Create(ctx, newCall(t, "unconfirmed"))
		return err
	})
	if _, err := unreplicated.Get(ctx, newCall(t, "unconfirmed").Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get of the call whose Create was not confirmed: %v; want ErrNotFound", err)
	}
	c := newCall(t, "recorded")
	mustCreate(t, unreplicated, c)
	failsClosed("Update", func() error {
		d := *c
		d.State = ledger.Done
		_, err := l.Update(ctx, &d, ledger.Running)
		return err
	})
	failsClosed("Spend", func() error {
		_, err := l.Spend(ctx, "nonce-1", time.Now().Add(time.Minute))
		return err
	})
	failsClosed("Creates at the same time", func() error {
		errs := make(chan error, 8)
		for i := range cap(errs) {
			go func() {
				_, _, err := l.Create(ctx, newCall(t, fmt.Sprint("together-", i)))
				errs <- err
			}()
		}
		var first error
		for range cap(errs) {
			if err := <-errs; first == nil || errors.Is(first, ledger.ErrUnavailable) && strings.Contains(first.Error(), want) {
				first = err
			}
		}
		return first
	})
}

// With replicas 1 and a replica, writes pass, alone and batched, and the
// replica has them when they return.
func TestRedisReplicasConfirm(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	replica := redistest.StartReplica(t, s)
	logger, logs := observed()
	l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr, Replicas: 1, Prefix: "r:"}, logger)
	if err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %+v; want nothing", logs.All())
	}
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer onReplica.Close()
	replicated := func(c *ledger.Call, state ledger.State) {
		t.Helper()
		v, err := onReplica.Get(ctx, "r:call:"+c.Key).Result()
		if err != nil || v[1:1+len(state)] != string(state) {
			t.Errorf("the replica has %q, %v for %s; want it %s", v, err, c.Key, state)
		}
	}

	c := newCall(t, "confirmed")
	mustCreate(t, l, c)
	replicated(c, ledger.Running)
	d := *c
	d.State = ledger.Done
	if _, err := l.Update(ctx, &d, ledger.Running); err != nil {
		t.Fatalf("Update: %v", err)
	}
	replicated(c, ledger.Done)
	if fresh, err := l.Spend(ctx, "nonce-1", time.Now().Add(time.Minute)); !fresh || err != nil {
		t.Errorf("Spend = %v, %v", fresh, err)
	}

	var wg sync.WaitGroup
	for i := range 16 {
		c := newCall(t, fmt.Sprint("together-", i))
		wg.Go(func() {
			if _, created, err := l.Create(ctx, c); !created || err != nil {
				t.Errorf("Create(%s) = %v, %v", c.Key, created, err)
				return
			}
			replicated(c, ledger.Running)
		})
	}
	wg.Wait()
}

// A server out of memory (noeviction) refuses writes: a new call fails
// closed with ErrUnavailable, while a repeat of a call it holds still gets
// its record.
func TestRedisOutOfMemory(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := newCall(t, "kept")
	mustCreate(t, l, kept)

	admin := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Create(ctx, newCall(t, "new")); !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("Create of a new call on a full server: %v; want ErrUnavailable saying OOM", err)
	}
	got, created, err := l.Create(ctx, newCall(t, "kept"))
	if err != nil || created || got == nil || got.Key != kept.Key || got.State != ledger.Running {
		t.Errorf("Create of a kept call on a full server = %+v, %v, %v; want the record", got, created, err)
	}
}
