package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
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
		Clock:     clock.NewManual(now),
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

// A call in flight is never swept before its deadline, however short the
// retention: it is kept for the retention past its deadline, whether it is
// a new call or a resumed card's call. Swept early, a repeat of its call id
// would find nothing and run it again.
func TestBoltSweepKeepsInFlightPastDeadline(t *testing.T) {
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	b, err := OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), BoltOptions{
		Retention: time.Hour,
		Clock:     clock.NewManual(now),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	// Unchanged for two hours, its deadline three hours on.
	deadline := now.Add(3 * time.Hour)
	flying := flyingCall("flying")
	flying.Created, flying.Updated, flying.Deadline = now.Add(-2*time.Hour), now.Add(-2*time.Hour), deadline
	if _, created, err := b.Create(ctx, flying); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	resumed := flyingCall("resumed")
	resumed.Created, resumed.Updated = now.Add(-2*time.Hour), now.Add(-2*time.Hour)
	if _, created, err := b.Create(ctx, resumed); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	paused := *resumed
	paused.State, paused.Card = ActionRequired, []byte(`{"type":"action_required"}`)
	if _, err := b.Update(ctx, &paused, Running); err != nil {
		t.Fatal(err)
	}
	claimed := paused
	claimed.State, claimed.Deadline = Running, deadline
	if _, err := b.Update(ctx, &claimed, ActionRequired); err != nil {
		t.Fatal(err)
	}
	// A finished call as old goes, as before.
	finished := flyingCall("finished")
	finished.Created, finished.Updated = now.Add(-2*time.Hour), now.Add(-2*time.Hour)
	if _, created, err := b.Create(ctx, finished); err != nil || !created {
		t.Fatal(err)
	}
	d := *finished
	d.State, d.Result = Done, &result.Result{Content: "x"}
	if _, err := b.Update(ctx, &d, Running); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		at      time.Time
		removed int
	}{
		{now, 1},                     // the finished call
		{deadline, 0},                // at the deadline
		{deadline.Add(time.Hour), 0}, // the retention past it, to the nanosecond
		{deadline.Add(time.Hour + time.Second), 2}, // then both go
	} {
		removed, err := b.Sweep(tc.at)
		if err != nil || removed != tc.removed {
			t.Fatalf("Sweep at %s = %d, %v; want %d removed", tc.at, removed, err, tc.removed)
		}
		if tc.removed == 0 {
			for _, key := range []string{flying.Key, resumed.Key} {
				if c, err := b.Get(ctx, key); err != nil || c.State != Running {
					t.Errorf("call in flight %q at %s: %+v, %v", key, tc.at, c, err)
				}
			}
		}
	}
}
