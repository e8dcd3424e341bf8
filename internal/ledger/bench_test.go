package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/result"
)

// benchCall measures one call's ledger cost: Create (running), then Update
// to done with a 1 KiB result. "serial" is one connection at a time, where
// every write pays its own commit; "parallel" runs 16 goroutines per CPU
// (32 on the 2-CPU target, the connection count of the throughput budget in
// DESIGN.md), where bbolt batches writes into shared commits. Call ids are
// the gateway's, which sort by time ("time-ids"), or random like a model's
// tool call ids ("random-ids").
func benchCall(b *testing.B, l ledger.Ledger) {
	for _, ids := range []struct {
		name string
		next func() string
	}{
		{"time-ids", gateway.NewCallID},
		{"random-ids", func() string { return fmt.Sprintf("toolu_%016x%016x", rand.Uint64(), rand.Uint64()) }},
	} {
		b.Run(ids.name, func(b *testing.B) { benchCallIDs(b, l, ids.next) })
	}
}

func benchCallIDs(b *testing.B, l ledger.Ledger, nextID func() string) {
	res := &result.Result{Content: strings.Repeat("x", 1024)}
	now := time.Now()
	one := func(ctx context.Context) error {
		id := nextID()
		c := &ledger.Call{
			Key:      ledger.Key("user-1", "install-1", id),
			CallID:   id,
			Tool:     "ping",
			User:     "user-1",
			Install:  "install-1",
			Digest:   "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			State:    ledger.Running,
			Owner:    "bench",
			Deadline: now.Add(time.Minute),
			Created:  now,
			Updated:  now,
		}
		if _, created, err := l.Create(ctx, c); err != nil || !created {
			return fmt.Errorf("Create %s = %v, %w", id, created, err)
		}
		d := *c
		d.State = ledger.Done
		d.Result = res
		_, err := l.Update(ctx, &d, ledger.Running)
		return err
	}

	b.Run("serial", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := one(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := one(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkBoltCall(b *testing.B) {
	l, err := ledger.OpenBolt(filepath.Join(b.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	benchCall(b, l)
}

func BenchmarkRedisCall(b *testing.B) {
	s := redistest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	benchCall(b, l)
}
