package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clienttools"
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed, the file is free for the next store.
	again := mustOpen(t, cfg)
	if _, err := again.Ledger().Get(context.Background(), ledger.Key("u", "i", "c1")); err != nil {
		t.Errorf("the call recorded before: %v", err)
	}
	_ = again.Close()
}

func TestOff(t *testing.T) {
	cfg := &ledger.Config{Backend: "off"}
	s := mustOpen(t, cfg)
	defer s.Close()
	if s.Ledger().Records() {
		t.Error("ledger off records")
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
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
