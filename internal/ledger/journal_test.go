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

// A key filter never says a key it was given is not held (else a call id
// would run twice), through every layer it grows, and seldom says an
// absent one may be; past its bound it says every key may be.
func TestKeyFilter(t *testing.T) {
	fs := newKeyFilters()
	const n = 100_000
	key := func(i int) []byte { return fmt.Appendf(nil, "u\x1fi\x1fcall-%d", i) }
	for i := range n {
		fs.add(1, key(i))
	}
	if layers := len(fs.by[1].layers); layers < 3 {
		t.Errorf("%d keys in %d layers; want the filter grown", n, layers)
	}
	for i := range n {
		if !fs.mayHold(1, fs.hash(key(i))) {
			t.Fatalf("key %d was added, and the filter says it is not held", i)
		}
	}
	false_ := 0
	for i := n; i < 2*n; i++ {
		if fs.mayHold(1, fs.hash(key(i))) {
			false_++
		}
	}
	if rate := float64(false_) / n; rate > 0.01 {
		t.Errorf("false positives %.4f; want under 0.01", rate)
	} else {
		t.Logf("false positives %.4f, %d layers", rate, len(fs.by[1].layers))
	}
	if !fs.mayHold(2, fs.hash(key(0))) {
		t.Error("a partition without a filter must always be read")
	}
	fs.drop(1)
	if !fs.mayHold(1, fs.hash(key(n))) {
		t.Error("a dropped partition's filter still answers")
	}

	old := filterMostBits
	filterMostBits = filterLayerBits * 3
	defer func() { filterMostBits = old }()
	for i := range n {
		fs.add(3, key(i))
	}
	if f := fs.by[3]; !f.full || !fs.mayHold(3, fs.hash(key(2*n))) {
		t.Errorf("a filter past its bound: full %v; want it to say every key may be held", f.full)
	}
}

// The partitions' filters are filled from the file at open and kept by
// every put after: a call put in a partition that was there at open, and
// one put in a new partition, are each found by a repeat of its Create
// once checkpointed, and so are the file's own.
func TestBoltFiltersFindEveryCall(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	clk := clock.NewManual(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))
	at := func(id string) *Call {
		c := flyingCall(id)
		c.Created, c.Updated, c.Deadline = clk.Now(), clk.Now(), clk.Now().Add(time.Second)
		return c
	}
	create := func(b *Bolt, c *Call, want bool) {
		t.Helper()
		if _, created, err := b.Create(ctx, c); err != nil || created != want {
			t.Fatalf("Create(%s) = %v, %v; want created %v", c.CallID, created, err, want)
		}
	}
	b, err := OpenBolt(path, BoltOptions{Clock: clk, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	before := at("before")
	create(b, before, true)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, err = OpenBolt(path, BoltOptions{Clock: clk, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	same := at("same-partition")
	create(b, same, true)
	clk.Add(24 * time.Hour)
	later := at("new-partition")
	create(b, later, true)
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Call{before, same, later} {
		create(b, c, false)
	}
}
