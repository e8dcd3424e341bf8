package connect_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/connecttest"
)

func openDB(t *testing.T, path string) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newBolt(t *testing.T, db *bbolt.DB, c clock.Clock) *connect.Bolt {
	t.Helper()
	b, err := connect.NewBolt(db, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBolt(t *testing.T) {
	connecttest.RunStore(t, func(t *testing.T, c *clock.Manual) connect.Store {
		db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
		b := newBolt(t, db, c)
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		return b
	})
}

// TestBoltReopen: a value outlasts the file's closing, with its expiry,
// and Close leaves the file to its owner.
func TestBoltReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	c := clock.NewManual(connecttest.Epoch)
	db := openDB(t, path)
	b := newBolt(t, db, c)
	if err := b.Put(ctx, "token", []byte("sealed"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "flow", []byte("verifier"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(*bbolt.Tx) error { return nil }); err != nil {
		t.Fatalf("the file after Bolt.Close: %v; want it still open", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path)
	defer db.Close()
	b = newBolt(t, db, c)
	defer b.Close()
	if v, err := b.Get(ctx, "token"); err != nil || string(v) != "sealed" {
		t.Fatalf("Get after reopening = %q, %v", v, err)
	}
	if v, err := b.Get(ctx, "flow"); err != nil || string(v) != "verifier" {
		t.Fatalf("Get of the flow after reopening = %q, %v", v, err)
	}
	c.Add(time.Minute)
	if v, err := b.Get(ctx, "flow"); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Get of the flow past its ttl = %q, %v; want ErrNotFound", v, err)
	}
}

// TestBoltSweep: the sweep removes expired values from the file, and only
// those.
func TestBoltSweep(t *testing.T) {
	ctx := context.Background()
	c := clock.NewManual(connecttest.Epoch)
	db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer db.Close()
	b := newBolt(t, db, c)
	defer b.Close()
	for k, ttl := range map[string]time.Duration{"a": time.Minute, "b": time.Minute, "kept": 0, "later": time.Hour} {
		if err := b.Put(ctx, k, []byte("v"), ttl); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.Sweep(c.Now()); n != 0 || err != nil {
		t.Fatalf("Sweep before any ttl = %d, %v", n, err)
	}
	if n, err := b.Sweep(c.Add(time.Minute)); n != 2 || err != nil {
		t.Fatalf("Sweep past two ttls = %d, %v; want 2", n, err)
	}
	var keys []string
	_ = db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("connections")).ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	if len(keys) != 2 || keys[0] != "kept" || keys[1] != "later" {
		t.Fatalf("left in the bucket: %q; want kept and later", keys)
	}
}

// TestBoltMissWritesNothing: a Take or Delete of a key that is not there
// (a callback with a made-up state) commits nothing to the file.
func TestBoltMissWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer db.Close()
	b := newBolt(t, db, nil)
	defer b.Close()
	written := func() int64 {
		st := db.Stats()
		return st.TxStats.GetWrite()
	}
	before := written()
	for range 10 {
		if _, err := b.Take(ctx, "made-up"); !errors.Is(err, connect.ErrNotFound) {
			t.Fatalf("Take = %v", err)
		}
		if err := b.Delete(ctx, "made-up"); err != nil {
			t.Fatal(err)
		}
	}
	if n := written() - before; n != 0 {
		t.Fatalf("%d pages written for keys that are not there; want none", n)
	}
}

// TestBoltDamaged: a value too short for its expiry (written by something
// else) is an error, never a value or a panic; the sweep removes it.
func TestBoltDamaged(t *testing.T) {
	ctx := context.Background()
	c := clock.NewManual(connecttest.Epoch)
	db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer db.Close()
	b := newBolt(t, db, c)
	defer b.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("connections")).Put([]byte("short"), []byte("abc"))
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "short"); err == nil || errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Get of a damaged value = %q, %v; want an error", v, err)
	}
	if v, err := b.Take(ctx, "short"); err == nil || errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Take of a damaged value = %q, %v; want an error", v, err)
	}
	if n, err := b.Sweep(c.Now()); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v; want the damaged value removed", n, err)
	}
	if _, err := b.Get(ctx, "short"); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Get after the sweep = %v; want ErrNotFound", err)
	}
}

// TestBoltLockRefusesNoTTL: a lock asked for no time is refused, never
// held forever.
func TestBoltLockRefusesNoTTL(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer db.Close()
	b := newBolt(t, db, nil)
	defer b.Close()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, ok, err := b.Lock(context.Background(), "k", d); ok || err == nil {
			t.Errorf("Lock(%s) = %v, %v; want an error", d, ok, err)
		}
	}
}

// TestBoltCloseStopsSweep: Close stops the sweep NewBolt started, and a
// second Close is harmless.
func TestBoltCloseStopsSweep(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer db.Close()
	base := runtime.NumGoroutine()
	for range 5 {
		b := newBolt(t, db, nil)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after opening and closing; %d before", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
