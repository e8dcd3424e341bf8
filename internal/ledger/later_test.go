package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/ledger"
)

// openLater is a Later on the bolt file at path, which another ledger
// holds, and the first error.
func openLater(t *testing.T, path string, logger *zap.Logger) *ledger.Later {
	t.Helper()
	open := func() (ledger.Ledger, error) {
		b, err := ledger.OpenBolt(path, ledger.BoltOptions{LockTimeout: 10 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	_, err := open()
	if !errors.Is(err, ledger.ErrLocked) {
		t.Fatalf("OpenBolt of a held file = %v; want ErrLocked", err)
	}
	return ledger.OpenLater(open, err, 20*time.Millisecond, logger)
}

// A Later answers ErrUnavailable, naming the lock, while another process
// holds the file, and opens it once it is free.
func TestLaterOpensWhenFree(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	holder, err := ledger.OpenBolt(path, ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	l := openLater(t, path, zap.New(core))
	defer l.Close()

	c := newCall(t, "1")
	if _, created, err := l.Create(ctx, c); created || !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrLocked) ||
		!strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("Create while held = %v, %v; want ErrUnavailable naming the lock", created, err)
	}
	for name, err := range map[string]error{
		"Get":    func() error { _, err := l.Get(ctx, c.Key); return err }(),
		"Update": func() error { _, err := l.Update(ctx, done(c, "x"), ledger.Running); return err }(),
		"Wait":   func() error { _, err := l.Wait(ctx, c.Key, ledger.Running); return err }(),
	} {
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s while held = %v; want ErrUnavailable", name, err)
		}
	}

	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for {
		_, created, err := l.Create(ctx, c)
		if err == nil && created {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Create after the file was freed = %v, %v", created, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := l.Update(ctx, done(c, "ok"), ledger.Running); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(ctx, c.Key); err != nil || got.Result.Content != "ok" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if n := logs.FilterMessageSnippet("ledger opened").Len(); n != 1 {
		t.Errorf("%d logs of the ledger opening; want 1", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the Later closed the file.
	b, err := ledger.OpenBolt(path, ledger.BoltOptions{LockTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("OpenBolt after the Later closed: %v", err)
	}
	_ = b.Close()
}

// A Later closed before the file is free stops trying, and never opens it.
func TestLaterClosedWhileHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	holder, err := ledger.OpenBolt(path, ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaksNothing(t, func() (ledger.Ledger, error) { return openLater(t, path, nil), nil })
	l := openLater(t, path, nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // five retry intervals
	b, err := ledger.OpenBolt(path, ledger.BoltOptions{LockTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("the closed Later opened the file: %v", err)
	}
	_ = b.Close()
	if _, err := l.Get(context.Background(), "k"); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Get of a closed Later = %v; want ErrUnavailable", err)
	}
}
