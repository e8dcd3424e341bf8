package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/result"
)

// A sweep finds and deletes calls a chunk at a time, going on from the
// last one found: every old call goes, wherever its key sorts among the
// fresh ones, and the fresh ones stay.
func TestBoltSweepChunks(t *testing.T) {
	defer func(n int) { sweepChunk = n }(sweepChunk)
	sweepChunk = 3

	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	b, err := OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), BoltOptions{
		Retention: time.Hour,
		Now:       func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	var old, fresh []string
	for i := range 20 {
		c := flyingCall(fmt.Sprintf("call_%02d", i))
		c.Created = now.Add(-2 * time.Hour)
		// Every third call is fresh: the old ones run on across chunks.
		if i%3 == 0 {
			c.Created = now.Add(-time.Minute)
		}
		c.Updated = c.Created
		if _, created, err := b.Create(ctx, c); err != nil || !created {
			t.Fatalf("Create %s = %v, %v", c.CallID, created, err)
		}
		d := *c
		d.State, d.Result = Done, &result.Result{Content: "x"}
		if _, err := b.Update(ctx, &d, Running); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			fresh = append(fresh, c.Key)
		} else {
			old = append(old, c.Key)
		}
	}

	removed, err := b.Sweep(now)
	if err != nil || removed != len(old) {
		t.Fatalf("Sweep = %d, %v; want %d removed", removed, err, len(old))
	}
	for _, k := range old {
		if _, err := b.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Errorf("old call %q kept: %v", k, err)
		}
	}
	for _, k := range fresh {
		if _, err := b.Get(ctx, k); err != nil {
			t.Errorf("fresh call %q swept: %v", k, err)
		}
	}
	if removed, err := b.Sweep(now); err != nil || removed != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left to remove", removed, err)
	}
}
