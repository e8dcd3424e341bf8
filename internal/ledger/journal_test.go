package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/result"
)

func flyingCall(id string) *Call {
	now := time.Now().UTC()
	return &Call{Key: Key("u", "i", id), CallID: id, Tool: "t", User: "u", Install: "i",
		Digest: "d", State: Running, Owner: "o", Deadline: now.Add(time.Minute), Created: now, Updated: now}
}

// A torn last line, from a crash mid-write, is skipped; a rewrite left
// beside the journal by a crash mid-rotation is read too.
func TestReadJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db.journal")
	a, b, c := flyingCall("a"), flyingCall("b"), flyingCall("c")
	bDone := *b
	bDone.State = AwaitingClient
	data := journalLines(t, a, b, &bDone)
	data = append(data, `{"key":"torn","callId":"x","to`...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".next", journalLines(t, c), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readJournal(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[a.Key] == nil || got[c.Key] == nil || got[b.Key].State != AwaitingClient {
		t.Fatalf("readJournal = %v; want a, c and b's last line", got)
	}
	if _, err := readJournal(filepath.Join(t.TempDir(), "none"), zap.NewNop()); err != nil {
		t.Fatalf("readJournal of no file: %v", err)
	}
}

// The journal is rewritten with the calls in flight once it is large, and
// a crash after that still closes exactly those as outcome unknown.
func TestBoltJournalRotates(t *testing.T) {
	defer func(n int64) { journalRotateSize = n }(journalRotateSize)
	journalRotateSize = 4 << 10
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		c := flyingCall(fmt.Sprint("done-", i))
		if _, created, err := l.Create(ctx, c); err != nil || !created {
			t.Fatalf("Create: %v, %v", created, err)
		}
		d := *c
		d.State, d.Result = Done, &result.Result{Content: "ok"}
		if _, err := l.Update(ctx, &d, Running); err != nil {
			t.Fatal(err)
		}
	}
	flying := flyingCall("still-flying")
	if _, _, err := l.Create(ctx, flying); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, _, err := l.Create(ctx, flyingCall(fmt.Sprint("more-", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Rotations dropped the finished calls: the first ones are gone.
	data, err := os.ReadFile(path + ".journal")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"callId":"done-0"`)) || !bytes.Contains(data, []byte(`"callId":"still-flying"`)) {
		t.Errorf("journal after rotations (%d bytes) still holds the first finished call, or lost the one in flight", len(data))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if c, err := l.Get(ctx, flying.Key); err != nil || c.State != Done || c.Result.Content != OutcomeUnknown {
		t.Fatalf("in-flight call after reopen: %+v, %v; want outcome unknown", c, err)
	}
	if c, err := l.Get(ctx, Key("u", "i", "done-7")); err != nil || c.Result.Content != "ok" {
		t.Fatalf("finished call after reopen: %+v, %v", c, err)
	}
	if info, err := os.Stat(path + ".journal"); err != nil || info.Size() != 0 {
		t.Errorf("journal after reopen: %v, %v; want it started afresh", info, err)
	}
}

// Of concurrent updates of a call in flight exactly one wins; the others
// see the call it left, or wait for its commit and then see it.
func TestBoltConcurrentFinish(t *testing.T) {
	ctx := context.Background()
	l, err := OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for round := range 20 {
		c := flyingCall(fmt.Sprint("race-", round))
		if _, _, err := l.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := *c
				d.State, d.Result = Done, &result.Result{Content: fmt.Sprint(i)}
				cur, err := l.Update(ctx, &d, Running)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrConflict) && cur.State == Done:
					conflicts++
				default:
					t.Errorf("Update = %+v, %v", cur, err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != 7 {
			t.Fatalf("round %d: %d updates won, %d conflicted; want 1 and 7", round, wins, conflicts)
		}
		if got, err := l.Get(ctx, c.Key); err != nil || got.State != Done {
			t.Fatalf("Get after the race: %+v, %v", got, err)
		}
	}
}
