package ledger_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/result"
)

func openBolt(t *testing.T, path string, opts ledger.BoltOptions) *ledger.Bolt {
	t.Helper()
	b, err := ledger.OpenBolt(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestBolt(t *testing.T) {
	testLedger(t, func(t *testing.T) ledger.Ledger {
		return openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	})
}

func TestBoltCloseStopsSweeper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	leaksNothing(t, func() (ledger.Ledger, error) {
		return ledger.OpenBolt(path, ledger.BoltOptions{})
	})
}

// The default path's folder (in Caddy's data directory) may not exist yet.
func TestBoltCreatesFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "caddy", "toolgate", "ledger.db")
	l, err := ledger.OpenBolt(path, ledger.BoltOptions{})
	if err != nil {
		t.Fatalf("OpenBolt in a missing folder: %v", err)
	}
	defer l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ledger file: %v", err)
	}
}

// A bolt ledger configured with nothing said about fsync waits for the
// disk at every commit and every growth of its file, as OpenBolt's zero
// options do; only fsync false lets both go.
func TestBoltFsyncByDefault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fsync *bool
		want  bool
	}{
		{"unsaid", nil, true},
		{"on", new(true), true},
		{"off", new(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ledger.Config{DataDir: t.TempDir(), Fsync: tc.fsync}
			if err := cfg.Check(); err != nil {
				t.Fatal(err)
			}
			l, err := cfg.Open(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			b, ok := ledger.Backend(l).(*ledger.Bolt)
			if !ok {
				t.Fatalf("Open = %T; want a bolt ledger", ledger.Backend(l))
			}
			if commits, growth := b.Fsyncs(); commits != tc.want || growth != tc.want {
				t.Errorf("fsync %v: commits sync %v, growth syncs %v; want both %v", tc.fsync, commits, growth, tc.want)
			}
		})
	}
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if commits, growth := b.Fsyncs(); !commits || !growth {
		t.Errorf("OpenBolt with zero options: commits sync %v, growth syncs %v; want both", commits, growth)
	}
}

// With fsync on, Creates made at the same time share commits, and with
// them the disk flushes each commit waits for: the gateway's calls do
// not queue for a flush each.
func TestBoltConcurrentCreatesShareCommits(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	const calls = 64
	before := b.Commits()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		c := newCall(t, fmt.Sprint("together-", i))
		wg.Go(func() {
			<-start
			if _, created, err := b.Create(context.Background(), c); err != nil || !created {
				t.Errorf("Create(%q) = %v, %v", c.Key, created, err)
			}
		})
	}
	close(start)
	wg.Wait()
	commits := b.Commits() - before
	t.Logf("%d concurrent Creates took %d commits", calls, commits)
	if commits > calls/4 {
		t.Errorf("%d concurrent Creates took %d commits; want them shared (at most %d)", calls, commits, calls/4)
	}
}

// The writes that queue while a commit is under way share the next; if one
// of them fails, the others are committed alone and only it fails; if one
// panics, the others of its group fail (nothing is committed) and the
// ledger goes on writing.
func TestBoltWriteGroups(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: true})
	put := func(key string) func(*bbolt.Tx) error {
		return func(tx *bbolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("test"))
			if err != nil {
				return err
			}
			return bk.Put([]byte(key), []byte("v"))
		}
	}
	stored := func(key string) bool {
		var ok bool
		_ = b.DB().View(func(tx *bbolt.Tx) error {
			bk := tx.Bucket([]byte("test"))
			ok = bk != nil && bk.Get([]byte(key)) != nil
			return nil
		})
		return ok
	}
	// group holds a commit open, queues writes behind it in order, lets
	// the commit end and returns what each queued write returned.
	group := func(writes ...func(*bbolt.Tx) error) []error {
		t.Helper()
		running, release := make(chan struct{}), make(chan struct{})
		held := make(chan error, 1)
		go func() {
			held <- b.Write(func(*bbolt.Tx) error {
				close(running)
				<-release
				return nil
			})
		}()
		<-running
		errs := make([]error, len(writes))
		var wg sync.WaitGroup
		for i, fn := range writes {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						errs[i] = fmt.Errorf("panicked: %v", p)
					}
				}()
				errs[i] = b.Write(fn)
			})
			for b.Queued() < i+1 {
				time.Sleep(time.Millisecond)
			}
		}
		close(release)
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatalf("the write holding the commit: %v", err)
		}
		return errs
	}

	before := b.Commits()
	bad := errors.New("bad write")
	errs := group(put("a"), put("b"), func(*bbolt.Tx) error { return bad }, put("c"))
	if errs[0] != nil || errs[1] != nil || errs[2] != bad || errs[3] != nil {
		t.Errorf("a group with a failing write returned %v; want only the failing write's error", errs)
	}
	for _, key := range []string{"a", "b", "c"} {
		if !stored(key) {
			t.Errorf("%s was not stored", key)
		}
	}
	// The write that held the commit, then each of the group's three good
	// writes alone.
	if n := b.Commits() - before; n != 4 {
		t.Errorf("%d commits; want 4", n)
	}

	errs = group(put("d"), func(*bbolt.Tx) error { panic("boom") }, put("e"))
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "panicked: boom") {
		t.Errorf("the group's first write, which commits it, returned %v; want the panic", errs[0])
	}
	for i := 1; i < 3; i++ {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), "a write sharing the commit panicked") {
			t.Errorf("write %d of the group that panicked returned %v", i, errs[i])
		}
	}
	if stored("d") || stored("e") {
		t.Error("a write of the group that panicked was committed")
	}
	if err := b.Write(put("f")); err != nil || !stored("f") {
		t.Errorf("a write after the panic: %v", err)
	}
}

func TestBoltReopenKeepsCalls(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b := openBolt(t, path, ledger.BoltOptions{})
	c := newCall(t, "1")
	mustCreate(t, b, c)
	d := done(c, "kept")
	if _, err := b.Update(ctx, d, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openBolt(t, path, ledger.BoltOptions{})
	got, err := b.Get(ctx, c.Key)
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("after reopen Get = %+v, %v; want %+v", got, err, d)
	}
}

func TestBoltInFlightIsOutcomeUnknownAfterReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b := openBolt(t, path, ledger.BoltOptions{})

	running := newCall(t, "running")
	awaiting := newCall(t, "awaiting")
	awaiting.State = ledger.AwaitingClient
	card := newCall(t, "card")
	finished := newCall(t, "done")
	for _, c := range []*ledger.Call{running, awaiting, card, finished} {
		mustCreate(t, b, c)
	}
	cardWant := *card
	cardWant.State = ledger.ActionRequired
	cardWant.Card = []byte(`{"type":"confirm"}`)
	if _, err := b.Update(ctx, &cardWant, ledger.Running); err != nil {
		t.Fatal(err)
	}
	doneWant := done(finished, "ran")
	if _, err := b.Update(ctx, doneWant, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	reopened := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b = openBolt(t, path, ledger.BoltOptions{Clock: clock.NewManual(reopened)})
	for _, c := range []*ledger.Call{running, awaiting} {
		got, err := b.Get(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		want := *c
		want.State = ledger.Done
		want.Result = &result.Result{IsError: true, Content: ledger.OutcomeUnknown}
		want.Updated = reopened
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%s call after reopen =\n%+v\nwant\n%+v", c.CallID, got, &want)
		}
	}
	for _, want := range []*ledger.Call{&cardWant, doneWant} {
		if got, err := b.Get(ctx, want.Key); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s call changed by reopen: %+v, %v", want.CallID, got, err)
		}
	}
}

func TestBoltSweep(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{
		Retention: time.Hour,
		Clock:     clock.NewManual(now),
	})

	at := func(id string, updated time.Time) *ledger.Call {
		c := newCall(t, id)
		c.Created, c.Updated = updated, updated
		mustCreate(t, b, c)
		return c
	}
	old := at("old", now.Add(-2*time.Hour))
	edge := at("edge", now.Add(-time.Hour))
	fresh := at("fresh", now.Add(-30*time.Minute))

	// An old call that changed recently is fresh: retention counts from
	// the last change.
	revived := at("revived", now.Add(-3*time.Hour))
	d := done(revived, "x")
	d.Updated = now.Add(-time.Minute)
	if _, err := b.Update(ctx, d, ledger.Running); err != nil {
		t.Fatal(err)
	}

	removed, err := b.Sweep(now)
	if err != nil || removed != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 removed", removed, err)
	}
	if _, err := b.Get(ctx, old.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("call older than retention kept: %v", err)
	}
	for _, c := range []*ledger.Call{edge, fresh, revived} {
		if _, err := b.Get(ctx, c.Key); err != nil {
			t.Errorf("call %s within retention swept: %v", c.CallID, err)
		}
	}

	removed, err = b.Sweep(now.Add(59 * time.Minute))
	if err != nil || removed != 2 {
		t.Fatalf("Sweep 59 minutes later = %d, %v; want 2 removed (edge, fresh)", removed, err)
	}
	if _, err := b.Get(ctx, revived.Key); err != nil {
		t.Errorf("revived call swept 59 minutes later: %v", err)
	}
}

func TestBoltSecondOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	openBolt(t, path, ledger.BoltOptions{})

	start := time.Now()
	second, err := ledger.OpenBolt(path, ledger.BoltOptions{})
	if err == nil {
		_ = second.Close()
		t.Fatal("a second OpenBolt of a file in use succeeded")
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("second OpenBolt took %s to fail", took)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another gateway") {
		t.Errorf("error %q does not name the file and the likely cause", err)
	}
}

// TestBoltChild is run by TestBoltKill in a child process: it records a
// call as told by the environment, says so, and waits to be killed.
func TestBoltChild(t *testing.T) {
	path := os.Getenv("TOOLGATE_LEDGER_CHILD")
	if path == "" {
		t.Skip("runs only as TestBoltKill's child process")
	}
	ctx := context.Background()
	b, err := ledger.OpenBolt(path, ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := childCall(os.Getenv("TOOLGATE_LEDGER_KEY"))
	if _, created, err := b.Create(ctx, c); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if os.Getenv("TOOLGATE_LEDGER_FINISH") != "" {
		if _, err := b.Update(ctx, childDone(c), ledger.Running); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("recorded")
	// Killed long before this; the bound only stops an orphan.
	time.Sleep(time.Minute)
	t.Fatal("not killed")
}

func childCall(key string) *ledger.Call {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	return &ledger.Call{Key: key, CallID: key, Tool: "ping", Digest: "d", State: ledger.Running, Created: at, Updated: at}
}

func childDone(c *ledger.Call) *ledger.Call {
	d := *c
	d.State = ledger.Done
	d.Result = &result.Result{Content: "pong: the result the child recorded", Markdown: "**pong**"}
	d.Updated = d.Updated.Add(time.Second)
	return &d
}

// runChildUntilKilled starts TestBoltChild, waits for it to say the call is
// recorded, and kills it with SIGKILL: no deferred code, no Close.
func runChildUntilKilled(t *testing.T, path, key string, finish bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), "TOOLGATE_LEDGER_CHILD="+path, "TOOLGATE_LEDGER_KEY="+key)
	if finish {
		cmd.Env = append(cmd.Env, "TOOLGATE_LEDGER_FINISH=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	recorded := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "recorded" {
				recorded <- true
				// Keep draining so the child never blocks on a full pipe.
				for sc.Scan() {
				}
				return
			}
		}
		recorded <- false
	}()
	select {
	case ok := <-recorded:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("child exited without recording: %s", stderr.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child did not record in time: %s", stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v; want killed", err)
	}
}

func TestBoltKill(t *testing.T) {
	if os.Getenv("TOOLGATE_LEDGER_CHILD") != "" {
		t.Skip("in the child")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")

	// Killed after recording the result: the result is on disk.
	runChildUntilKilled(t, path, "answered", true)
	b := openBolt(t, path, ledger.BoltOptions{})
	want := childDone(childCall("answered"))
	if got, err := b.Get(ctx, "answered"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after kill -9 Get = %+v, %v; want %+v", got, err, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Killed while the call was running: it is closed as outcome unknown
	// and the answered one is still there.
	runChildUntilKilled(t, path, "in-flight", false)
	b = openBolt(t, path, ledger.BoltOptions{})
	got, err := b.Get(ctx, "in-flight")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.Done || got.Result == nil || !got.Result.IsError || got.Result.Content != ledger.OutcomeUnknown {
		t.Fatalf("in-flight call after kill -9 = %+v (result %+v); want done, outcome unknown", got, got.Result)
	}
	if got, err := b.Get(ctx, "answered"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("answered call after second kill = %+v, %v", got, err)
	}
}

// A spent id stays spent across a reopen until it expires; the sweep then
// forgets it, and only it.
func TestBoltSpendKeptAndSwept(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(now)
	path := filepath.Join(t.TempDir(), "ledger.db")
	b := openBolt(t, path, ledger.BoltOptions{Clock: clk})
	for _, id := range []string{"short", "long"} {
		if ok, err := b.Spend(ctx, id, now.Add(map[string]time.Duration{"short": time.Minute, "long": time.Hour}[id])); !ok || err != nil {
			t.Fatalf("Spend(%s) = %v, %v", id, ok, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, ledger.BoltOptions{Clock: clk})
	if ok, err := b.Spend(ctx, "short", now.Add(time.Minute)); ok || err != nil {
		t.Fatalf("Spend after reopen = %v, %v; want spent", ok, err)
	}
	later := now.Add(2 * time.Minute)
	if _, err := b.Sweep(later); err != nil {
		t.Fatal(err)
	}
	clk.Set(later)
	if ok, err := b.Spend(ctx, "long", later.Add(time.Hour)); ok || err != nil {
		t.Errorf("Spend of an unexpired id after a sweep = %v, %v; want spent", ok, err)
	}
	if ok, err := b.Spend(ctx, "short", later.Add(time.Minute)); !ok || err != nil {
		t.Errorf("Spend of an expired, swept id = %v, %v; want fresh", ok, err)
	}
}
