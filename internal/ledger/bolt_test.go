package ledger_test

import (
	"bufio"
	"bytes"
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
	"github.com/toolgate/toolgate/internal/ledger/ledgertest"
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

func TestBoltQuotas(t *testing.T) {
	ledgertest.RunQuotas(t, func(t *testing.T, clk clock.Clock) ledger.Ledger {
		return openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{Clock: clk})
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

// With fsync on, Creates made at the same time share the log's flushes:
// the gateway's calls do not queue for a flush each, and none commits the
// B+tree until a checkpoint, which puts them all in one commit.
func TestBoltConcurrentCreatesShareFlushes(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	const calls = 64
	flushes, commits := b.Flushes(), b.Commits()
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
	n := b.Flushes() - flushes
	t.Logf("%d concurrent Creates took %d flushes", calls, n)
	if n > calls/4 {
		t.Errorf("%d concurrent Creates took %d flushes; want them shared (at most %d)", calls, n, calls/4)
	}
	if n := b.Commits() - commits; n != 0 {
		t.Errorf("the Creates committed the B+tree %d times before a checkpoint; want 0", n)
	}
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := b.Commits() - commits; n != 1 {
		t.Errorf("a checkpoint of %d calls took %d commits; want 1", calls, n)
	}
	if n := b.StoredCalls(); n != calls {
		t.Errorf("the B+tree holds %d calls after the checkpoint; want %d", n, calls)
	}
}

// copyFiles copies the files at from (the ledger and its log, where they
// exist) to to, as a crash would leave them.
func copyFiles(t *testing.T, from, to string, suffixes ...string) {
	t.Helper()
	for _, suffix := range suffixes {
		data, err := os.ReadFile(from + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The log holds what the B+tree does not yet: a gateway that stops before
// a checkpoint (its files copied as they are, the lock not released)
// comes back with every change of the log, the calls in flight closed as
// outcome unknown; without the log, the same B+tree has none of them.
func TestBoltReplaysLog(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	b := openBolt(t, path, ledger.BoltOptions{})

	// flying's id is a caller's that would break a line of the log, or
	// forge one, were it written unescaped.
	flying := newCall(t, "flying\n{\"key\":\"x\",\"state\":\"done\"}\x00\u00e9")
	finished, card, moved := newCall(t, "finished"), newCall(t, "card"), newCall(t, "moved")
	// moved is in the B+tree as running, the others in the log only.
	mustCreate(t, b, moved)
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*ledger.Call{flying, finished, card} {
		mustCreate(t, b, c)
	}
	if _, err := b.Update(ctx, done(finished, "finished"), ledger.Running); err != nil {
		t.Fatal(err)
	}
	paused := *card
	paused.State = ledger.ActionRequired
	paused.Result = &result.Result{Content: "a card"}
	if _, err := b.Update(ctx, &paused, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, done(moved, "moved"), ledger.Running); err != nil {
		t.Fatal(err)
	}

	crashed := filepath.Join(t.TempDir(), "ledger.db")
	copyFiles(t, path, crashed, "", ".wal")
	again := openBolt(t, crashed, ledger.BoltOptions{})
	want := map[string]struct {
		state   ledger.State
		content string
	}{
		flying.Key:   {ledger.Done, ledger.OutcomeUnknown},
		finished.Key: {ledger.Done, "finished"},
		card.Key:     {ledger.ActionRequired, "a card"},
		moved.Key:    {ledger.Done, "moved"},
	}
	for key, w := range want {
		got, err := again.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get(%q) after the crash: %v", key, err)
		}
		if got.State != w.state || got.Result == nil || got.Result.Content != w.content {
			t.Errorf("%q after the crash: %s %+v; want %s %q", key, got.State, got.Result, w.state, w.content)
		}
	}
	if got, err := again.Get(ctx, "x"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the call a caller's id tried to forge in the log: %+v, %v", got, err)
	}
	if fi, err := os.Stat(crashed + ".wal"); err != nil || fi.Size() != 0 {
		t.Errorf("the log after it was replayed: %v, %v; want an empty file", fi, err)
	}

	treeOnly := filepath.Join(t.TempDir(), "ledger.db")
	copyFiles(t, path, treeOnly, "")
	alone := openBolt(t, treeOnly, ledger.BoltOptions{})
	for _, c := range []*ledger.Call{flying, finished, card} {
		if _, err := alone.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Get(%q) in the B+tree alone = %v; want ErrNotFound (it was in the log only)", c.Key, err)
		}
	}
	if got, err := alone.Get(ctx, moved.Key); err != nil || got.Result == nil || got.Result.Content != ledger.OutcomeUnknown {
		t.Errorf("moved in the B+tree alone: %+v, %v; want closed as outcome unknown", got, err)
	}
}

// A crash mid-write leaves a torn last line in the log, and a power cut
// may leave zeros past the last flush: the ledger opens past both, with
// every whole line's call.
func TestBoltLogTornTail(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b := openBolt(t, path, ledger.BoltOptions{})
	c := newCall(t, "whole")
	mustCreate(t, b, c)
	if _, err := b.Update(ctx, done(c, "whole"), ledger.Running); err != nil {
		t.Fatal(err)
	}
	for name, tail := range map[string]string{
		"torn":  `{"key":"torn","callId":"x","to`,
		"zeros": "\x00\x00\x00\x00\x00\x00\x00\x00",
	} {
		t.Run(name, func(t *testing.T) {
			crashed := filepath.Join(t.TempDir(), "ledger.db")
			copyFiles(t, path, crashed, "", ".wal")
			f, err := os.OpenFile(crashed+".wal", os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
			again := openBolt(t, crashed, ledger.BoltOptions{})
			got, err := again.Get(ctx, c.Key)
			if err != nil || got.State != ledger.Done || got.Result.Content != "whole" {
				t.Errorf("after a %s tail: %+v, %v", name, got, err)
			}
		})
	}
}

// Creates of the same keys from many goroutines, with a checkpoint after
// every line moving calls from the log to the B+tree under them: each key
// is created exactly once.
func TestBoltCreateOnceAcrossCheckpoints(t *testing.T) {
	ledger.SetCheckpoints(t, 1, time.Millisecond)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: true})
	const keys, goroutines = 200, 8
	var created [keys]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range keys {
				_, ok, err := b.Create(context.Background(), newCall(t, fmt.Sprint("k", i)))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					created[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, n := range created {
		if n != 1 {
			t.Errorf("key %d created %d times; want once", i, n)
		}
	}
	if b.Commits() < 2 {
		t.Errorf("%d commits: the checkpoints did not run under the Creates", b.Commits())
	}
}

// Once writing the log fails, what reached the disk is unknown: the
// ledger records nothing more (each call fails as unavailable, so none is
// sent) until it is opened again, and reads still answer.
func TestBoltLogFailureStops(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	ctx := context.Background()
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	kept := newCall(t, "kept")
	mustCreate(t, b, kept)
	b.BreakLog()
	for _, id := range []string{"first", "second"} {
		if _, _, err := b.Create(ctx, newCall(t, id)); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("Create(%s) with the log broken: %v; want ErrUnavailable", id, err)
		}
	}
	if _, err := b.Update(ctx, done(kept, "x"), ledger.Running); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Update with the log broken: %v; want ErrUnavailable", err)
	}
	if got, err := b.Get(ctx, kept.Key); err != nil || got.State != ledger.Running {
		t.Errorf("Get with the log broken: %+v, %v", got, err)
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

// The log keeps a change until a checkpoint, after Update has returned:
// what the caller's call points to (its result, its card) and changes
// afterwards is not what the B+tree gets.
func TestBoltCheckpointKeepsNothingOfTheCaller(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	ctx := context.Background()
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: true})
	c := newCall(t, "card")
	mustCreate(t, b, c)
	paused := *c
	paused.State = ledger.ActionRequired
	paused.Result = &result.Result{Content: "a card"}
	paused.Card = []byte(`{"title":"a card"}`)
	if _, err := b.Update(ctx, &paused, ledger.Running); err != nil {
		t.Fatal(err)
	}
	paused.Result.Content = "changed"
	copy(paused.Card, `{"title":"forged"}`)
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, c.Key)
	if err != nil || got.Result.Content != "a card" || string(got.Card) != `{"title":"a card"}` {
		t.Errorf("after the caller changed its call and a checkpoint: %+v (card %s), %v", got, got.Card, err)
	}
}

// TestBoltLeavesOtherBuckets: a bucket of another name in the file (the
// connections' tokens, kept there by package connect) outlasts the
// ledger's checkpoints, its sweep of every partition, and a reopening.
func TestBoltLeavesOtherBuckets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	other := []byte("connections")
	put := func(b *ledger.Bolt) {
		t.Helper()
		err := b.DB().Update(func(tx *bbolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(other)
			if err != nil {
				return err
			}
			return bk.Put([]byte("user\x1finstall\x1fgmail"), []byte("sealed"))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	kept := func(b *ledger.Bolt, when string) {
		t.Helper()
		var v []byte
		_ = b.DB().View(func(tx *bbolt.Tx) error {
			if bk := tx.Bucket(other); bk != nil {
				v = bytes.Clone(bk.Get([]byte("user\x1finstall\x1fgmail")))
			}
			return nil
		})
		if string(v) != "sealed" {
			t.Fatalf("%s, the connections bucket holds %q; want it kept", when, v)
		}
	}
	// sweepAll records a call, checkpoints it into a partition, and
	// sweeps a day later, when every partition goes with its calls: want
	// of them.
	sweepAll := func(b *ledger.Bolt, id string, want int) {
		t.Helper()
		c := newCall(t, id)
		mustCreate(t, b, c)
		if err := b.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Sweep(time.Now().Add(24 * time.Hour)); n != want || err != nil {
			t.Fatalf("Sweep = %d, %v; want %d calls swept", n, err, want)
		}
		if _, err := b.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Get of the swept call = %v; want ErrNotFound", err)
		}
	}

	b := openBolt(t, path, ledger.BoltOptions{Retention: time.Hour})
	put(b)
	sweepAll(b, "1", 1)
	kept(b, "swept")
	mustCreate(t, b, newCall(t, "2")) // in the log when the file closes
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, ledger.BoltOptions{Retention: time.Hour})
	kept(b, "reopened")
	sweepAll(b, "3", 2)
	kept(b, "reopened and swept")
}
