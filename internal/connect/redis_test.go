package connect_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/connecttest"
	"github.com/toolgate/toolgate/internal/redistest"
)

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedis(t *testing.T) {
	rs := redistest.Start(t)
	var n atomic.Int64
	connecttest.RunStoreWith(t, connecttest.Options{RealTime: true}, func(t *testing.T, _ *clock.Manual) connect.Store {
		// A prefix of its own keeps each subtest's keys apart.
		r := connect.NewRedis(redisClient(t, rs.Addr), fmt.Sprintf("suite%d:", n.Add(1)))
		t.Cleanup(func() { _ = r.Close() })
		return r
	})
}

// TestRedisTwoInstances: two gateway instances, each with a client of its
// own, on one server and prefix share their values and locks; another
// prefix shares nothing.
func TestRedisTwoInstances(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t)
	a := connect.NewRedis(redisClient(t, rs.Addr), "two:")
	b := connect.NewRedis(redisClient(t, rs.Addr), "two:")
	other := connect.NewRedis(redisClient(t, rs.Addr), "other:")

	if err := a.Put(ctx, "token", []byte("sealed"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "token"); err != nil || string(v) != "sealed" {
		t.Fatalf("Get through b = %q, %v", v, err)
	}
	if v, err := other.Get(ctx, "token"); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Get under another prefix = %q, %v; want ErrNotFound", v, err)
	}

	if err := a.Put(ctx, "flow", []byte("verifier"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Take(ctx, "flow"); err != nil || string(v) != "verifier" {
		t.Fatalf("Take through a = %q, %v", v, err)
	}
	if v, err := b.Take(ctx, "flow"); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Take through b after a's = %q, %v; want ErrNotFound", v, err)
	}

	unlock, ok, err := a.Lock(ctx, "refresh", time.Minute)
	if !ok || err != nil {
		t.Fatalf("Lock through a = %v, %v", ok, err)
	}
	if _, ok, err := b.Lock(ctx, "refresh", time.Minute); ok || err != nil {
		t.Fatalf("Lock through b while a holds it = %v, %v; want refused", ok, err)
	}
	if unlockOther, ok, err := other.Lock(ctx, "refresh", time.Minute); !ok || err != nil {
		t.Fatalf("Lock under another prefix = %v, %v; want it taken", ok, err)
	} else {
		unlockOther()
	}
	unlock()
	unlockB, ok, err := b.Lock(ctx, "refresh", time.Minute)
	if !ok || err != nil {
		t.Fatalf("Lock through b after a's unlock = %v, %v", ok, err)
	}
	unlock() // a's, again: b's stays
	if _, ok, err := a.Lock(ctx, "refresh", time.Minute); ok || err != nil {
		t.Fatalf("Lock through a while b holds it = %v, %v; want refused", ok, err)
	}
	unlockB()
}

// TestRedisKeys: values and locks are under the prefix, apart, and a
// value's ttl is the server's.
func TestRedisKeys(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t)
	rdb := redisClient(t, rs.Addr)
	r := connect.NewRedis(rdb, "p:")
	if err := r.Put(ctx, "u\x1fi\x1fgmail", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Lock(ctx, "u\x1fi\x1fgmail", time.Minute); !ok || err != nil {
		t.Fatalf("Lock = %v, %v", ok, err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !strings.HasPrefix(keys[0], "p:conn") || !strings.HasPrefix(keys[1], "p:conn") {
		t.Fatalf("keys on the server: %q", keys)
	}
	if d := rdb.PTTL(ctx, "p:conn:u\x1fi\x1fgmail").Val(); d <= 58*time.Second || d > time.Minute {
		t.Errorf("the value's ttl on the server = %s; want about a minute", d)
	}
	if d := rdb.PTTL(ctx, "p:connlock:u\x1fi\x1fgmail").Val(); d <= 58*time.Second || d > time.Minute {
		t.Errorf("the lock's ttl on the server = %s; want about a minute", d)
	}
}

// TestRedisErrors: an error names the server, never the key or the value.
func TestRedisErrors(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t)
	r := connect.NewRedis(redisClient(t, rs.Addr), "p:")
	rs.Stop()
	for what, err := range map[string]error{
		"Put":    r.Put(ctx, "state-secret", []byte("token-secret"), 0),
		"Get":    func() error { _, err := r.Get(ctx, "state-secret"); return err }(),
		"Take":   func() error { _, err := r.Take(ctx, "state-secret"); return err }(),
		"Delete": r.Delete(ctx, "state-secret"),
		"Lock":   func() error { _, _, err := r.Lock(ctx, "state-secret", time.Second); return err }(),
	} {
		if err == nil || errors.Is(err, connect.ErrNotFound) {
			t.Errorf("%s with the server gone = %v; want an error", what, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "secret") || !strings.Contains(msg, rs.Addr) {
			t.Errorf("%s: %q: want the server named, not the key or the value", what, msg)
		}
	}
}

// TestRedisLockRefusesNoTTL: a lock asked for no time is refused: SET
// without PX would hold it forever.
func TestRedisLockRefusesNoTTL(t *testing.T) {
	rs := redistest.Start(t)
	r := connect.NewRedis(redisClient(t, rs.Addr), "p:")
	for _, d := range []time.Duration{0, -1, -time.Second} {
		if _, ok, err := r.Lock(context.Background(), "k", d); ok || err == nil {
			t.Errorf("Lock(%s) = %v, %v; want an error", d, ok, err)
		}
	}
}
