package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// formatOneValue is c as the ledger stored it before the calls were
// partitioned and their form made compact (boltFormat 1): the header and
// the JSON of Call.
func formatOneValue(t *testing.T, c *Call) []byte {
	t.Helper()
	data, err := json.Marshal(c, callOptions)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 10, 10+len(data))
	v[0], v[1] = 1, byte(slices.Index(boltStates[:], c.State)+1)
	binary.BigEndian.PutUint64(v[2:], uint64(c.Updated.UnixNano()))
	return append(v, data...)
}

// A file written before the calls were partitioned (one "calls" bucket)
// opens and is read: a repeat of a call in it sees the call, a call in
// flight in it is closed as outcome unknown, a call that changes moves
// out of it, and its old calls are swept a chunk at a time, going on from
// the last one found (every old call goes, wherever its key sorts among
// the fresh ones), until the bucket is empty and goes.
func TestBoltReadsEarlierLayout(t *testing.T) {
	defer func(n int) { sweepChunk = n }(sweepChunk)
	sweepChunk = 3

	ctx := context.Background()
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "ledger.db")
	values := map[string][]byte{}
	var old, fresh []string
	for i := range 20 {
		c := flyingCall(fmt.Sprintf("call_%02d", i))
		c.State, c.Result = Done, &result.Result{Content: "x"}
		c.Created = now.Add(-2 * time.Hour)
		// Every third call is fresh: the old ones run on across chunks.
		if i%3 == 0 {
			c.Created = now.Add(-time.Minute)
		}
		c.Updated = c.Created
		values[c.Key] = formatOneValue(t, c)
		if i%3 == 0 {
			fresh = append(fresh, c.Key)
		} else {
			old = append(old, c.Key)
		}
	}
	flying := flyingCall("flying")
	flying.Created, flying.Updated = now.Add(-time.Minute), now.Add(-time.Minute)
	values[flying.Key] = formatOneValue(t, flying)
	card := flyingCall("card")
	card.State, card.Card = ActionRequired, []byte(`{"type":"confirm"}`)
	card.Created, card.Updated = now.Add(-2*time.Hour), now.Add(-2*time.Hour)
	values[card.Key] = formatOneValue(t, card)
	putValues(t, path, values)

	clk := clock.NewManual(now)
	b, err := OpenBolt(path, BoltOptions{Retention: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	if c, err := b.Get(ctx, flying.Key); err != nil || c.State != Done || c.Result.Content != OutcomeUnknown {
		t.Fatalf("call in flight in the earlier layout after open = %+v, %v; want closed as outcome unknown", c, err)
	}
	repeat := flyingCall(fresh[0][len("u\x1fi\x1f"):])
	if c, created, err := b.Create(ctx, repeat); err != nil || created || c.Result.Content != "x" {
		t.Fatalf("repeat of a call in the earlier layout = %+v, %v, %v; want the stored call", c, created, err)
	}
	// The card is answered: it moves to a partition, and is kept.
	answered := *card
	answered.State, answered.Result, answered.Updated = Done, &result.Result{Content: "answered"}, now
	if _, err := b.Update(ctx, &answered, ActionRequired); err != nil {
		t.Fatal(err)
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
	for _, k := range append(fresh, flying.Key, card.Key) {
		if _, err := b.Get(ctx, k); err != nil {
			t.Errorf("fresh call %q swept: %v", k, err)
		}
	}
	if removed, err := b.Sweep(now); err != nil || removed != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left to remove", removed, err)
	}
	if !hasBucket(t, b, callsBucket) {
		t.Fatal("the earlier layout's bucket went with calls left in it")
	}
	// An hour on, the fresh calls go, and the bucket with them; the
	// answered card and the closed call, now in partitions, stay.
	later := now.Add(time.Hour + 2*time.Minute)
	if removed, err := b.Sweep(later); err != nil || removed != len(fresh) {
		t.Fatalf("Sweep an hour on = %d, %v; want %d removed", removed, err, len(fresh))
	}
	if hasBucket(t, b, callsBucket) {
		t.Error("the earlier layout's bucket is kept empty")
	}
	if c, err := b.Get(ctx, card.Key); err != nil || c.Result.Content != "answered" {
		t.Errorf("answered card after the earlier layout went = %+v, %v", c, err)
	}
}

func hasBucket(t *testing.T, b *Bolt, name []byte) bool {
	t.Helper()
	has := false
	if err := b.db.View(func(tx *bbolt.Tx) error {
		has = tx.Bucket(name) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return has
}

// A call is kept for the retention from when its retention counts
// (keptFrom), and at most a partition's span more: calls recorded over
// three retentions, some finishing late, and swept every few seconds,
// are each there until their retention has passed and gone a span after.
// A sweep deletes buckets, never reads a call.
func TestBoltSweepKeepsRetentionAndAtMostASpanMore(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	const retention = time.Minute
	b, err := OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), BoltOptions{Retention: retention, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	span := partitionSpan(retention)

	// key → keptFrom, and the latest it may count from: a call that
	// finishes on time counts from its finish, but if the log was
	// checkpointed while it was in flight, it stays in its deadline's
	// partition.
	type keep struct{ from, latest time.Time }
	kept := map[string]keep{}
	for i := range 300 {
		at := start.Add(time.Duration(i) * 600 * time.Millisecond)
		clk.Set(at)
		c := flyingCall(fmt.Sprintf("c%03d", i))
		c.Created, c.Updated, c.Deadline = at, at, at.Add(20*time.Second)
		if _, created, err := b.Create(ctx, c); err != nil || !created {
			t.Fatalf("Create %d = %v, %v", i, created, err)
		}
		kept[c.Key] = keep{c.Deadline, c.Deadline}
		if i%4 == 0 {
			// Every fourth finishes past its deadline: it moves.
			d := *c
			d.State, d.Result, d.Updated = Done, &result.Result{Content: "late"}, at.Add(25*time.Second)
			if _, err := b.Update(ctx, &d, Running); err != nil {
				t.Fatal(err)
			}
			kept[c.Key] = keep{d.Updated, d.Updated}
		} else if i%4 == 1 {
			d := *c
			d.State, d.Result = Done, &result.Result{Content: "on time"}
			if _, err := b.Update(ctx, &d, Running); err != nil {
				t.Fatal(err)
			}
			kept[c.Key] = keep{d.Updated, c.Deadline}
		}
		if i%10 == 0 {
			if _, err := b.Sweep(at); err != nil {
				t.Fatal(err)
			}
			for key, k := range kept {
				_, err := b.Get(ctx, key)
				switch {
				case !at.After(k.from.Add(retention)) && err != nil:
					t.Fatalf("at %s: call %q kept from %s swept within its retention: %v", at, key, k.from, err)
				case at.After(k.latest.Add(retention+span)) && !errors.Is(err, ErrNotFound):
					t.Fatalf("at %s: call %q kept from %s still there a span past its retention: %v", at, key, k.latest, err)
				}
			}
		}
	}
	n := 0
	_ = b.db.View(func(tx *bbolt.Tx) error {
		n = len(partitions(tx))
		return nil
	})
	if most := int(retention/span) + 5; n > most {
		t.Errorf("%d partitions at steady state; want at most %d", n, most)
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
		// then both go, with their partition: within its span.
		{deadline.Add(time.Hour + partitionSpan(time.Hour)), 2},
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
