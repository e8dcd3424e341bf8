package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/ledger/ledgertest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// quotaCall is a call created now by clk, in flight for a minute,
// counted against limits.
func quotaCall(t *testing.T, clk clock.Clock, id string, limits ...ledger.Limit) *ledger.Call {
	c := newCall(t, id)
	c.Created, c.Updated, c.Deadline = clk.Now(), clk.Now(), clk.Now().Add(time.Minute)
	c.Limits = limits
	return c
}

func overLimit(t *testing.T, l ledger.Ledger, c *ledger.Call) *ledger.OverLimitError {
	t.Helper()
	_, created, err := l.Create(context.Background(), c)
	var over *ledger.OverLimitError
	if created || !errors.As(err, &over) {
		t.Fatalf("Create(%s) = %v, %v; want an *OverLimitError", c.CallID, created, err)
	}
	return over
}

// The bolt ledger's counts are in memory, rebuilt at open from the stored
// calls: a window's calls count after a close and an open; a place in
// flight does not (the call was closed as outcome unknown); the calls
// waiting for a person are listed again.
func TestBoltQuotasSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	clk := clock.NewManual(ledgertest.Epoch)
	w := ledger.Limit{Key: "w", Max: 3, Window: 3600, Name: "3/1h"}
	f := ledger.Limit{Key: "f", Max: 1, Name: "1 in flight"}
	b := openBolt(t, path, ledger.BoltOptions{Clock: clk})
	// Another key's window, long past at the reopen: not counted.
	mustCreate(t, b, quotaCall(t, clk, "old", ledger.Limit{Key: "old", Max: 1, Window: 60}))
	clk.Add(time.Minute)
	mustCreate(t, b, quotaCall(t, clk, "1", w, f))
	clk.Add(time.Minute)
	paused := quotaCall(t, clk, "2", w)
	mustCreate(t, b, paused)
	paused.State = ledger.ActionRequired
	if _, err := b.Update(ctx, paused, ledger.Running); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	// Some in the B+tree, some in the log only.
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, quotaCall(t, clk, "3", w))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openBolt(t, path, ledger.BoltOptions{Clock: clk})
	if n := b.Counted("w"); n != 3 {
		t.Errorf("window holds %d calls after the reopen; want 3", n)
	}
	if n := b.Counted("old"); n != 0 {
		t.Errorf("a window past holds %d calls after the reopen; want 0", n)
	}
	// The first was created 2 minutes ago: it leaves in 58.
	if over := overLimit(t, b, quotaCall(t, clk, "4", w)); over.Limit != w || over.RetryAfter != 58*time.Minute {
		t.Errorf("refused by %+v, retry after %s; want %+v, 58m", over.Limit, over.RetryAfter, w)
	}
	mustCreate(t, b, quotaCall(t, clk, "4", f))
	got, err := b.Waiting(ctx, "user-1", "install-1")
	if err != nil || len(got) != 1 || got[0].CallID != "2" || got[0].State != ledger.ActionRequired {
		t.Errorf("Waiting after the reopen = %+v, %v; want call 2", got, err)
	}
}

// A Create counted, whose record then fails to be written, gives its
// places back: the call does not run.
func TestBoltQuotaGivenBackOnFailure(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	clk := clock.NewManual(ledgertest.Epoch)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{Clock: clk})
	w := ledger.Limit{Key: "w", Max: 3, Window: 3600}
	f := ledger.Limit{Key: "f", Max: 3}
	mustCreate(t, b, quotaCall(t, clk, "1", w, f))
	b.BreakLog()
	if _, _, err := b.Create(context.Background(), quotaCall(t, clk, "2", w, f)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Create with the log broken: %v; want ErrUnavailable", err)
	}
	if nw, nf := b.Counted("w"), b.Counted("f"); nw != 1 || nf != 1 {
		t.Errorf("after a failed Create: window %d, in flight %d; want 1 and 1", nw, nf)
	}
}

// The bolt ledger's list of a caller's calls waiting for a person loses a
// call as the Update that moves it on writes it, not only when read.
func TestBoltWaitingListUnlisted(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(ledgertest.Epoch)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{Clock: clk})
	c := quotaCall(t, clk, "1")
	mustCreate(t, b, c)
	c.State = ledger.ActionRequired
	if _, err := b.Update(ctx, c, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if n := b.Listed("user-1", "install-1"); n != 1 {
		t.Fatalf("listed %d; want 1", n)
	}
	if _, err := b.Update(ctx, done(c, "x"), ledger.ActionRequired); err != nil {
		t.Fatal(err)
	}
	if n := b.Listed("user-1", "install-1"); n != 0 {
		t.Fatalf("listed %d after the call was done; want 0", n)
	}
}

// Two instances on one server share a window: of Creates from both at
// once, exactly Max pass.
func TestRedisQuotaAcrossInstances(t *testing.T) {
	s := redistest.Start(t)
	a, b := openRedis(t, s.Addr, "two:"), openRedis(t, s.Addr, "two:")
	w := ledger.Limit{Key: "install-1/1h", Max: 7, Window: 3600}
	f := ledger.Limit{Key: "user-1/flight", Max: 9}
	calls := make([]*ledger.Call, 40)
	for i := range calls {
		calls[i] = quotaCall(t, clock.Real, fmt.Sprint(i), f, w)
	}
	if created, refused := ledgertest.CreateAtOnce(t, []ledger.Ledger{a, b}, calls); created != 7 || refused != 33 {
		t.Fatalf("%d created, %d refused across two instances; want 7 and 33", created, refused)
	}
}

// What the Redis ledger keeps for limits and waiting lists expires: a
// window's set once its newest call leaves it, a set of places once its
// latest place lapses, a waiting list with its longest-kept call; and a
// call that leaves ActionRequired leaves the list in the same step.
func TestRedisQuotaKeysExpire(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := openRedis(t, s.Addr, "ttl:")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	pttl := func(key string) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	w := ledger.Limit{Key: "w", Max: 3, Window: 60}
	f := ledger.Limit{Key: "f", Max: 3}
	c := quotaCall(t, clock.Real, "1", w, f)
	c.Deadline = c.Created.Add(10 * time.Minute)
	mustCreate(t, l, c)
	if d := pttl("ttl:quota:w"); d <= 58*time.Second || d > time.Minute {
		t.Errorf("window's set expires in %s; want about a minute", d)
	}
	if d := pttl("ttl:quota:f"); d <= 9*time.Minute || d > 10*time.Minute {
		t.Errorf("places' set expires in %s; want about 10 minutes (the deadline)", d)
	}
	c.State = ledger.ActionRequired
	if _, err := l.Update(ctx, c, ledger.Running); err != nil {
		t.Fatal(err)
	}
	list := "ttl:waiting:user-1\x1finstall-1"
	if d := pttl(list); d <= ledger.DefaultRetention-time.Minute || d > ledger.DefaultRetention {
		t.Errorf("waiting list expires in %s; want the retention", d)
	}
	if n := rdb.ZCard(ctx, "ttl:quota:f").Val(); n != 0 {
		t.Errorf("%d places held after the call left flight; want 0", n)
	}
	if n := rdb.ZCard(ctx, list).Val(); n != 1 {
		t.Errorf("waiting list holds %d; want 1", n)
	}
	if _, err := l.Update(ctx, done(c, "x"), ledger.ActionRequired); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, list).Val(); n != 0 {
		t.Errorf("waiting list still there after its one call was done")
	}
}

// A Create without limits is the one SET NX GET it was; with limits it is
// one script instead, not a command more.
func TestRedisQuotaOneCommand(t *testing.T) {
	s := redistest.Start(t)
	l := openRedis(t, s.Addr, "cmd:")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	count := func() (set, evalsha int) { return commandCalls(t, rdb, "set"), commandCalls(t, rdb, "evalsha") }
	set0, eval0 := count()
	mustCreate(t, l, newCall(t, "plain"))
	if set, eval := count(); set != set0+1 || eval != eval0 {
		t.Errorf("a Create without limits ran %d SETs and %d scripts; want 1 and 0", set-set0, eval-eval0)
	}
	// The first script the server runs is loaded first (NOSCRIPT).
	mustCreate(t, l, quotaCall(t, clock.Real, "load", ledger.Limit{Key: "w", Max: 2, Window: 60}))
	set0, eval0 = count()
	mustCreate(t, l, quotaCall(t, clock.Real, "limited", ledger.Limit{Key: "w", Max: 2, Window: 60}))
	// The script's own SET is counted too.
	if set, eval := count(); set != set0+1 || eval != eval0+1 {
		t.Errorf("a Create with limits ran %d SETs and %d scripts; want 1 (the script's) and 1", set-set0, eval-eval0)
	}
}

// A Create that the replicas did not confirm is taken back, and its
// count with it: a call that does not run holds no place in a limit.
func TestRedisReplicasMissingGivesBackCount(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l, err := openRedisConfig(t, ledger.Config{Addr: s.Addr, Replicas: 1, Prefix: "r:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	unreplicated, err := openRedisConfig(t, ledger.Config{Addr: s.Addr, Prefix: "r:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := ledger.Limit{Key: "w", Max: 1, Window: 3600}
	f := ledger.Limit{Key: "f", Max: 1}
	if _, _, err := l.Create(ctx, quotaCall(t, clock.Real, "unconfirmed", w, f)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Create with no replica: %v; want ErrUnavailable", err)
	}
	mustCreate(t, unreplicated, quotaCall(t, clock.Real, "after", w, f))
}

// The log keeps a change until a checkpoint, after Create and Update have
// returned: the caller's limits and approval, changed afterwards, are not
// what the B+tree gets.
func TestBoltCheckpointKeepsNoLimitsOfTheCaller(t *testing.T) {
	ledger.SetCheckpoints(t, 1<<20, time.Hour)
	ctx := context.Background()
	clk := clock.NewManual(ledgertest.Epoch)
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: true, Clock: clk})
	c := quotaCall(t, clk, "1", ledger.Limit{Key: "w", Max: 2, Window: 60, Name: "2/1m"})
	mustCreate(t, b, c)
	paused := *c
	paused.State = ledger.ActionRequired
	paused.Approval = &ledger.Approval{Input: []byte(`{"a":1}`), Expires: clk.Now().Add(time.Hour)}
	if _, err := b.Update(ctx, &paused, ledger.Running); err != nil {
		t.Fatal(err)
	}
	copy(paused.Approval.Input, `{"a":2}`)
	paused.Approval.Decision = "approved"
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, c.Key)
	if err != nil || string(got.Approval.Input) != `{"a":1}` || got.Approval.Decision != "" {
		t.Fatalf("after the caller changed its call and a checkpoint: %+v (approval %+v), %v", got, got.Approval, err)
	}
	created := quotaCall(t, clk, "2", ledger.Limit{Key: "x", Max: 1, Window: 60})
	mustCreate(t, b, created)
	created.Limits[0].Key = "forged"
	if err := b.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, created.Key); err != nil || got.Limits[0].Key != "x" {
		t.Fatalf("after the caller changed its limits and a checkpoint: %+v, %v", got, err)
	}
}
