package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
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
	got, damaged, err := readJournal(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[a.Key] == nil || got[c.Key] == nil || got[b.Key].State != AwaitingClient {
		t.Fatalf("readJournal = %v; want a, c and b's last line", got)
	}
	if len(damaged) != 0 {
		t.Errorf("readJournal: damaged %v; want none (a torn last line is not damage)", damaged)
	}
	if _, _, err := readJournal(filepath.Join(t.TempDir(), "none"), zap.NewNop()); err != nil {
		t.Fatalf("readJournal of no file: %v", err)
	}
}

// An upgrade from a version that kept calls in flight in a journal: the
// journal's calls that the B+tree does not hold (and those in a rewrite a
// crash left beside it) are closed as outcome unknown, the B+tree's own
// are as they were, and the journal is gone.
func TestBoltOpensEarlierJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	finished := flyingCall("finished")
	finished.State, finished.Result = Done, &result.Result{Content: "ran"}
	putValues(t, path, map[string][]byte{finished.Key: mustValue(t, finished)})
	inFlight, rewritten := flyingCall("in-flight"), flyingCall("rewritten")
	if err := os.WriteFile(path+".journal", journalLines(t, flyingCall("finished"), inFlight), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".journal.next", journalLines(t, rewritten), 0o600); err != nil {
		t.Fatal(err)
	}

	reopened := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := OpenBolt(path, BoltOptions{Clock: clock.NewManual(reopened)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []*Call{inFlight, rewritten} {
		got, err := l.Get(ctx, c.Key)
		if err != nil || got.State != Done || got.Result.Content != OutcomeUnknown || !got.Updated.Equal(reopened) || got.Tool != c.Tool {
			t.Errorf("journaled call %s after open: %+v, %v; want it closed as outcome unknown", c.CallID, got, err)
		}
	}
	if got, err := l.Get(ctx, finished.Key); err != nil || got.Result.Content != "ran" {
		t.Errorf("finished call after open: %+v, %v; want its result", got, err)
	}
	for _, p := range []string{path + ".journal", path + ".journal.next"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after open: %v; want it removed", p, err)
		}
	}
}

// Of concurrent updates of a call in flight exactly one wins; the others
// see the call it left.
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

// A crash mid-checkpoint leaves the log it was putting in the B+tree
// (path.wal.old) beside the newer one: the ledger replays the old first,
// so a call's newest line wins; a line damaged past its key closes its
// call as outcome unknown, even over an older good line.
func TestBoltReplaysOldLogFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	late, card, damaged := flyingCall("late"), flyingCall("card"), flyingCall("damaged")
	lateDone := *late
	lateDone.State, lateDone.Result = Done, &result.Result{Content: "late"}
	paused := *card
	paused.State, paused.Result = ActionRequired, &result.Result{Content: "a card"}
	damagedDone := *damaged
	damagedDone.State, damagedDone.Result = Done, &result.Result{Content: "lost"}
	cut := journalLines(t, &damagedDone)
	cut = append(cut[:len(cut)/2:len(cut)/2], '\n') // whole line, cut JSON
	if err := os.WriteFile(path+walSuffix+walOldSuffix, journalLines(t, late, &paused, damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+walSuffix, append(journalLines(t, &lateDone), cut...), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for key, want := range map[string]struct {
		state   State
		content string
	}{
		late.Key:    {Done, "late"},
		card.Key:    {ActionRequired, "a card"},
		damaged.Key: {Done, OutcomeUnknown},
	} {
		got, err := b.Get(ctx, key)
		if err != nil || got.State != want.state || got.Result == nil || got.Result.Content != want.content {
			t.Errorf("%q after the replay: %+v, %v; want %s %q", key, got, err, want.state, want.content)
		}
	}
	if _, err := os.Stat(path + walSuffix + walOldSuffix); !os.IsNotExist(err) {
		t.Errorf("the old log after the replay: %v; want it removed", err)
	}
}
