package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/store"
)

// roundTrip records a call in s's ledger and runs a client call through a
// bridge on s's relay, answered by a page of its thread.
func roundTrip(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	c := &ledger.Call{Key: ledger.Key("u", "i", "c1"), CallID: "c1", Tool: "t", Digest: "d", State: ledger.Running,
		Deadline: now.Add(time.Minute), Created: now, Updated: now}
	if _, created, err := s.Ledger().Create(ctx, c); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if _, err := s.Ledger().Get(ctx, c.Key); err != nil {
		t.Fatalf("Get = %v", err)
	}
	b := clienttools.NewBridgeOn(s.Relay())
	th := clienttools.Thread{User: "u", Install: "i", ID: "th"}
	page, _, err := b.Open(th, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	go func() {
		o := <-page.C
		if err := b.Post(th, o.CallID, clienttools.Outcome{Error: new("from the page")}); err != nil {
			t.Error(err)
		}
	}()
	out, err := b.Run(ctx, th, clienttools.Offer{CallID: "c1", Name: "n"}, 5*time.Second)
	if err != nil || out.Error == nil || *out.Error != "from the page" {
		t.Fatalf("Run = %+v, %v", out, err)
	}
}

// connects puts a token in s's connections, and takes a flow's state
// once.
func connects(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	c := s.Connections()
	if err := c.Put(ctx, "u\x1fi\x1fgmail", []byte("sealed"), 0); err != nil {
		t.Fatalf("Put = %v", err)
	}
	if v, err := c.Get(ctx, "u\x1fi\x1fgmail"); err != nil || string(v) != "sealed" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := c.Put(ctx, "flow", []byte("verifier"), time.Minute); err != nil {
		t.Fatalf("Put = %v", err)
	}
	if v, err := c.Take(ctx, "flow"); err != nil || string(v) != "verifier" {
		t.Fatalf("Take = %q, %v", v, err)
	}
	if _, err := c.Take(ctx, "flow"); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("second Take = %v; want ErrNotFound", err)
	}
}

// mustOpen checks cfg and opens its store.
func mustOpen(t *testing.T, cfg *ledger.Config) *store.Store {
	t.Helper()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocal(t *testing.T) {
	cfg := &ledger.Config{Path: filepath.Join(t.TempDir(), "ledger.db")}
	s := mustOpen(t, cfg)
	if !s.Ledger().Records() {
		t.Error("the bolt store's ledger records nothing")
	}
	roundTrip(t, s)
	connects(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed, the file is free for the next store, which finds the call
	// and the token in it.
	again := mustOpen(t, cfg)
	if _, err := again.Ledger().Get(context.Background(), ledger.Key("u", "i", "c1")); err != nil {
		t.Errorf("the call recorded before: %v", err)
	}
	if v, err := again.Connections().Get(context.Background(), "u\x1fi\x1fgmail"); err != nil || string(v) != "sealed" {
		t.Errorf("the token stored before = %q, %v", v, err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLocalLocked: while another store holds the bolt file, the ledger
// opens later and the connections fail every call, keeping nothing; once
// the file is free and the ledger opened, they are kept in it.
func TestLocalLocked(t *testing.T) {
	ctx := context.Background()
	cfg := &ledger.Config{Path: filepath.Join(t.TempDir(), "ledger.db")}
	holder := mustOpen(t, cfg)
	defer holder.Close()
	s := mustOpen(t, cfg)
	c := s.Connections()
	if err := c.Put(ctx, "k", []byte("v"), 0); err == nil {
		t.Error("Put beside a ledger file held elsewhere: want an error")
	}
	if _, err := c.Get(ctx, "k"); err == nil || errors.Is(err, connect.ErrNotFound) {
		t.Errorf("Get = %v; want an error, not ErrNotFound", err)
	}
	if _, ok, err := c.Lock(ctx, "k", time.Minute); ok || err == nil {
		t.Errorf("Lock = %v, %v; want an error", ok, err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	// The ledger retries every second.
	deadline := time.Now().Add(10 * time.Second)
	for c.Put(ctx, "k", []byte("v"), 0) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the connections never opened once the file was free")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get after the file opened = %q, %v", v, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, cfg)
	defer again.Close()
	if v, err := again.Connections().Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Errorf("kept in the file: %q, %v", v, err)
	}
}

func TestOff(t *testing.T) {
	cfg := &ledger.Config{Backend: "off"}
	s := mustOpen(t, cfg)
	if s.Ledger().Records() {
		t.Error("ledger off records")
	}
	connects(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// In memory: the next store starts empty.
	again := mustOpen(t, cfg)
	defer again.Close()
	if v, err := again.Connections().Get(context.Background(), "u\x1fi\x1fgmail"); !errors.Is(err, connect.ErrNotFound) {
		t.Errorf("a token of the store before = %q, %v; want ErrNotFound", v, err)
	}
}

func TestRedis(t *testing.T) {
	rs := redistest.Start(t)
	cfg := &ledger.Config{Backend: "redis", Addr: rs.Addr}
	s := mustOpen(t, cfg)
	if !s.Ledger().Records() {
		t.Error("the Redis store's ledger records nothing")
	}
	roundTrip(t, s)
	connects(t, s)
	// Another instance on the server and prefix finds the token.
	other := mustOpen(t, &ledger.Config{Backend: "redis", Addr: rs.Addr})
	if v, err := other.Connections().Get(context.Background(), "u\x1fi\x1fgmail"); err != nil || string(v) != "sealed" {
		t.Errorf("the token through another store = %q, %v", v, err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Under the ledger's prefix, beside its calls.
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if n := rdb.Exists(context.Background(), "toolgate:conn:u\x1fi\x1fgmail").Val(); n != 1 {
		t.Errorf("the token under the ledger's prefix: %d keys; want 1", n)
	}
}

func TestRedisUnreachable(t *testing.T) {
	cfg := &ledger.Config{Backend: "redis", Addr: "127.0.0.1:1"}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	if s, err := store.Open(cfg, nil); err == nil {
		_ = s.Close()
		t.Fatal("Open of a Redis store nobody serves: want an error")
	}
}
