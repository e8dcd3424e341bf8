package ledger_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/ledger/ledgertest"
	"github.com/toolgate/toolgate/internal/redistest"
)

func openRedis(t *testing.T, addr, prefix string) *ledger.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	r, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: addr, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRedis(t *testing.T) {
	s := redistest.Start(t)
	var n atomic.Int64
	testLedger(t, func(t *testing.T) ledger.Ledger {
		// A prefix of its own keeps each subtest's calls apart.
		return openRedis(t, s.Addr, fmt.Sprintf("suite%d:", n.Add(1)))
	})
}

func TestRedisQuotas(t *testing.T) {
	s := redistest.Start(t)
	var n atomic.Int64
	ledgertest.RunQuotas(t, func(t *testing.T, clk clock.Clock) ledger.Ledger {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		r, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, Prefix: fmt.Sprintf("quotas%d:", n.Add(1)), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	})
}

func TestRedisCloseStopsSubscriber(t *testing.T) {
	s := redistest.Start(t)
	leaksNothing(t, func() (ledger.Ledger, error) {
		return ledger.OpenRedis(context.Background(), ledger.RedisOptions{Addr: s.Addr})
	})
}

// commandCalls is how many times the server ran cmd.
func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// TestRedisTwoInstances shares calls between two gateway instances.
func TestRedisTwoInstances(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	a := openRedis(t, s.Addr, "two:")
	b := openRedis(t, s.Addr, "two:")

	t.Run("spent on one is spent on the other", func(t *testing.T) {
		until := time.Now().Add(time.Minute)
		if ok, err := a.Spend(ctx, "nonce-1", until); !ok || err != nil {
			t.Fatalf("Spend on a = %v, %v", ok, err)
		}
		if ok, err := b.Spend(ctx, "nonce-1", until); ok || err != nil {
			t.Fatalf("Spend on b = %v, %v; want spent", ok, err)
		}
		other := openRedis(t, s.Addr, "other:")
		if ok, err := other.Spend(ctx, "nonce-1", until); !ok || err != nil {
			t.Fatalf("Spend under another prefix = %v, %v; want fresh", ok, err)
		}
	})

	t.Run("create is seen by the other", func(t *testing.T) {
		c := newCall(t, "1")
		mustCreate(t, a, c)
		again := *c
		again.Owner = "instance-b"
		existing, created, err := b.Create(ctx, &again)
		if err != nil || created || existing == nil || existing.Owner != c.Owner {
			t.Fatalf("Create on b = %+v, %v, %v; want a's call, created=false", existing, created, err)
		}
	})

	t.Run("concurrent create across instances", func(t *testing.T) {
		base := newCall(t, "1")
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			created atomic.Int32
			failed  atomic.Value
		)
		for i := range 50 {
			l := a
			if i%2 == 1 {
				l = b
			}
			wg.Go(func() {
				c := *base
				c.Owner = fmt.Sprint("owner-", i)
				<-start
				_, ok, err := l.Create(ctx, &c)
				if err != nil {
					failed.Store(err)
				}
				if ok {
					created.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if err := failed.Load(); err != nil {
			t.Fatal(err)
		}
		if n := created.Load(); n != 1 {
			t.Fatalf("%d Creates recorded the call; want exactly 1", n)
		}
	})

	t.Run("wait wakes on the other's update", func(t *testing.T) {
		for _, pair := range [][2]ledger.Ledger{{a, b}, {b, a}} {
			writer, waiter := pair[0], pair[1]
			c := newCall(t, fmt.Sprintf("%p", waiter))
			mustCreate(t, writer, c)
			ch := waitAsync(ctx, waiter, c.Key, ledger.Running)
			stillWaiting(t, ch)
			d := done(c, "from the other instance")
			if _, err := writer.Update(ctx, d, ledger.Running); err != nil {
				t.Fatal(err)
			}
			if r := receive(t, ch); r.Err != nil || r.Call.Result == nil || r.Call.Result.Content != d.Result.Content {
				t.Fatalf("Wait = %+v, %v; want the other's update", r.Call, r.Err)
			}
		}
	})

	t.Run("wait does not poll", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer rdb.Close()
		c := newCall(t, "1")
		mustCreate(t, a, c)
		ch := waitAsync(ctx, b, c.Key, ledger.Running)
		stillWaiting(t, ch)
		before := commandCalls(t, rdb, "get")
		time.Sleep(500 * time.Millisecond)
		if n := commandCalls(t, rdb, "get") - before; n != 0 {
			t.Fatalf("a blocked Wait read the call %d times in 500ms; want it to sleep until notified", n)
		}
		if _, err := a.Update(ctx, done(c, "x"), ledger.Running); err != nil {
			t.Fatal(err)
		}
		if r := receive(t, ch); r.Err != nil {
			t.Fatal(r.Err)
		}
	})
}

// TestRedisPublishOnlyWhenWaited checks that an Update announces a change
// to the other instances only when a Wait is blocked on the call: every
// instance receives every message, so announcing every finished call would
// cost each instance a message per call made anywhere.
func TestRedisPublishOnlyWhenWaited(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	a := openRedis(t, s.Addr, "pub:")
	b := openRedis(t, s.Addr, "pub:")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()

	before := commandCalls(t, rdb, "publish")
	c := newCall(t, "nobody waits")
	mustCreate(t, a, c)
	waiting := *c
	waiting.State = ledger.AwaitingClient
	if _, err := a.Update(ctx, &waiting, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, done(&waiting, "x"), ledger.AwaitingClient); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, rdb, "publish") - before; n != 0 {
		t.Fatalf("%d PUBLISH for a call nobody waited for; want none", n)
	}
	// A Wait that finds the call already moved on marks nothing.
	if got, err := b.Wait(ctx, c.Key, ledger.Running); err != nil || got.State != ledger.Done {
		t.Fatalf("Wait on a done call = %+v, %v", got, err)
	}

	c = newCall(t, "b waits")
	mustCreate(t, a, c)
	ch := waitAsync(ctx, b, c.Key, ledger.Running)
	stillWaiting(t, ch)
	before = commandCalls(t, rdb, "publish")
	if _, err := a.Update(ctx, done(c, "x"), ledger.Running); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, ch); r.Err != nil || r.Call.State != ledger.Done {
		t.Fatalf("Wait = %+v, %v; want done", r.Call, r.Err)
	}
	if n := commandCalls(t, rdb, "publish") - before; n != 1 {
		t.Fatalf("%d PUBLISH for a call b waited for; want 1", n)
	}
	// The Update took the mark with it: the next change of the call, with
	// nobody waiting, is not announced.
	before = commandCalls(t, rdb, "publish")
	d := done(c, "y")
	d.State = ledger.ActionRequired
	if _, err := a.Update(ctx, d, ledger.Done); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, rdb, "publish") - before; n != 0 {
		t.Fatalf("%d PUBLISH after the waiter left; want none", n)
	}
}

// TestRedisWaitRacesUpdate starts each Wait on one instance together with
// the Update on the other that ends it, many times over: a Wait marks the
// call and reads it in one step, so whichever comes first, the Wait either
// reads the update or is told of it. A lost wake-up hangs a Wait until
// patience runs out.
func TestRedisWaitRacesUpdate(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	a := openRedis(t, s.Addr, "race:")
	b := openRedis(t, s.Addr, "race:")
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			c := newCall(t, strconv.Itoa(i))
			if _, created, err := a.Create(ctx, c); err != nil || !created {
				t.Errorf("Create = %v, %v", created, err)
				return
			}
			ch := waitAsync(ctx, b, c.Key, ledger.Running)
			if _, err := a.Update(ctx, done(c, "x"), ledger.Running); err != nil {
				t.Error(err)
				return
			}
			select {
			case r := <-ch:
				if r.Err != nil || r.Call.State != ledger.Done {
					t.Errorf("Wait = %+v, %v; want done", r.Call, r.Err)
				}
			case <-time.After(patience):
				t.Errorf("Wait on call %d missed the update", i)
			}
		})
	}
	wg.Wait()
}

// TestRedisFault kills the server under a *Redis and starts it again.
func TestRedisFault(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	r := openRedis(t, s.Addr, "fault:")

	before := newCall(t, "before")
	mustCreate(t, r, before)
	earlyWait := waitAsync(ctx, r, before.Key, ledger.Running)
	stillWaiting(t, earlyWait)

	s.Stop()

	const bound = 5 * time.Second
	unavailable := func(what string, op func() error) {
		t.Helper()
		start := time.Now()
		err := op()
		took := time.Since(start)
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s with the server down: %v; want ErrUnavailable", what, err)
			return
		}
		if took > bound {
			t.Errorf("%s took %s to fail; want under %s", what, took, bound)
		}
		if !strings.Contains(err.Error(), s.Addr) {
			t.Errorf("%s error %q does not name the server", what, err)
		}
		t.Logf("%s failed after %s: %v", what, took.Round(time.Millisecond), err)
	}
	unavailable("Create", func() error {
		_, _, err := r.Create(ctx, newCall(t, "during"))
		return err
	})
	unavailable("Creates at the same time", func() error {
		errs := make(chan error, 16)
		for i := range cap(errs) {
			go func() {
				_, _, err := r.Create(ctx, newCall(t, fmt.Sprint("during-", i)))
				errs <- err
			}()
		}
		// The first that is not ErrUnavailable, if any.
		var err error
		for range cap(errs) {
			if e := <-errs; err == nil || errors.Is(err, ledger.ErrUnavailable) {
				err = e
			}
		}
		return err
	})
	unavailable("Get", func() error {
		_, err := r.Get(ctx, before.Key)
		return err
	})
	unavailable("Update", func() error {
		_, err := r.Update(ctx, done(before, "x"), ledger.Running)
		return err
	})
	unavailable("Wait", func() error {
		_, err := r.Wait(ctx, before.Key, ledger.Running)
		return err
	})
	unavailable("OpenRedis", func() error {
		l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr})
		if err == nil {
			_ = l.Close()
		}
		return err
	})

	s.Restart(t)

	// The waiter from before the outage reads again once the subscription
	// is back (an Update in the gap would not have reached it). The
	// restarted server kept nothing, so it finds the call gone.
	if w := receive(t, earlyWait); !errors.Is(w.Err, ledger.ErrNotFound) {
		t.Fatalf("Wait from before the outage = %+v, %v; want ErrNotFound after the restart", w.Call, w.Err)
	}

	// The same *Redis works again, and its subscription too: a Wait
	// registered now wakes on another instance's Update.
	after := newCall(t, "after")
	mustCreate(t, r, after)
	if got, err := r.Get(ctx, after.Key); err != nil || got.CallID != after.CallID {
		t.Fatalf("Get after the restart = %+v, %v", got, err)
	}
	ch := waitAsync(ctx, r, after.Key, ledger.Running)
	stillWaiting(t, ch)
	other := openRedis(t, s.Addr, "fault:")
	if _, err := other.Update(ctx, done(after, "after the restart"), ledger.Running); err != nil {
		t.Fatal(err)
	}
	if w := receive(t, ch); w.Err != nil || w.Call.State != ledger.Done {
		t.Fatalf("Wait registered after the restart = %+v, %v; want done", w.Call, w.Err)
	}
}

// dropProxy relays TCP to a server and, when armed, cuts the connection
// that next carries a reply: the server acted, the client never hears.
type dropProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int32
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return p
}

func (p *dropProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if p.armed.CompareAndSwap(true, false) {
				p.dropped.Add(1)
				return
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestRedisLostReply cuts the reply to a write that the server ran. go-redis
// sends the write again; the ledger must know its own write when it sees it,
// not take it for another instance's call (the gateway would then wait on
// itself until the call's deadline).
func TestRedisLostReply(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	p := startDropProxy(t, s.Addr)
	r := openRedis(t, p.ln.Addr().String(), "lost:")

	// Load both scripts first, so the cut reply is that of a script that
	// ran rather than a NOSCRIPT answer.
	warm := newCall(t, "warm")
	mustCreate(t, r, warm)
	if _, err := r.Update(ctx, done(warm, "x"), ledger.Running); err != nil {
		t.Fatal(err)
	}

	c := newCall(t, "1")
	p.armed.Store(true)
	existing, created, err := r.Create(ctx, c)
	if p.dropped.Load() != 1 {
		t.Fatal("the proxy cut no reply")
	}
	if err != nil || !created {
		t.Fatalf("Create whose reply was lost = %+v, %v, %v; want created=true", existing, created, err)
	}

	d := done(c, "once")
	p.armed.Store(true)
	got, err := r.Update(ctx, d, ledger.Running)
	if p.dropped.Load() != 2 {
		t.Fatal("the proxy cut no reply")
	}
	if err != nil {
		t.Fatalf("Update whose reply was lost = %+v, %v; want success", got, err)
	}
}

// TestRedisLostReplyBatched is TestRedisLostReply for Creates and Updates
// made at the same time, which go together in batches: a cut reply makes
// go-redis send a whole batch again, and each write in it must know itself.
func TestRedisLostReplyBatched(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	p := startDropProxy(t, s.Addr)
	r := openRedis(t, p.ln.Addr().String(), "lostbatch:")
	warm := newCall(t, "warm")
	mustCreate(t, r, warm)
	if _, err := r.Update(ctx, done(warm, "x"), ledger.Running); err != nil {
		t.Fatal(err)
	}

	for round := range 5 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		p.armed.Store(true)
		for i := range 32 {
			wg.Go(func() {
				c := newCall(t, fmt.Sprint(round, "-", i))
				<-start
				existing, created, err := r.Create(ctx, c)
				if err != nil || !created {
					t.Errorf("Create = %+v, %v, %v; want created=true", existing, created, err)
					return
				}
				if _, err := r.Update(ctx, done(c, "once"), ledger.Running); err != nil {
					t.Errorf("Update = %v; want success", err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	if p.dropped.Load() == 0 {
		t.Fatal("the proxy cut no reply")
	}
}

// A stored call that does not decode fails only that call, with
// ErrCorrupt, and is never run again; the others go on.
func TestRedisDamagedCall(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := openRedis(t, s.Addr, "damaged:")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()

	bad := newCall(t, "bad")
	key := "damaged:call:" + bad.Key
	for _, v := range []string{
		"-running\nop\n" + `{"key":"x","callId":`, // JSON cut short
		"-running\nop\n\xff\x00",                  // not JSON
		"-running\nop\n" + `{"state":7}`,          // JSON of another shape
		"-running\nop\n",                          // no JSON
		"-running\nop",                            // header cut short
		"-running",
		`{"key":"x"}`, // no header
		"",
	} {
		if err := rdb.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Get(ctx, bad.Key); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("Get of %q = %v; want ErrCorrupt", v, err)
		}
		if _, created, err := l.Create(ctx, bad); created || !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("Create over %q = %v, %v; want ErrCorrupt, not created", v, created, err)
		}
		if _, err := l.Update(ctx, done(bad, "x"), ledger.AwaitingClient); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("Update of %q = %v; want ErrCorrupt", v, err)
		}
		if _, err := l.Wait(ctx, bad.Key, ledger.AwaitingClient); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("Wait on %q = %v; want ErrCorrupt", v, err)
		}
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != v {
			t.Errorf("the damaged value became %q, %v; want it kept as it is", got, err)
		}
	}

	// An earlier toolgate stored each call as a hash.
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key, "state", "running", "data", mustJSON(t, bad), "op", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx, bad.Key); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Get of a hash = %v; want ErrCorrupt", err)
	}
	if _, created, err := l.Create(ctx, bad); created || !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Create over a hash = %v, %v; want ErrCorrupt, not created", created, err)
	}
	if _, err := l.Update(ctx, done(bad, "x"), ledger.Running); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Update of a hash = %v; want ErrCorrupt", err)
	}
	if _, err := l.Wait(ctx, bad.Key, ledger.Running); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Wait on a hash = %v; want ErrCorrupt", err)
	}

	good := newCall(t, "good")
	mustCreate(t, l, good)
	if got, err := l.Get(ctx, good.Key); err != nil || got.CallID != good.CallID {
		t.Fatalf("Get of a good call beside a damaged one = %+v, %v", got, err)
	}
}

// The Update script reads a value's first bytes for its header, and the
// whole value when the header does not end in them: a header longer than
// the ledger ever writes is still read whole, replaced when its state is
// the expected one and returned as the current call when not.
func TestRedisLongHeader(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := openRedis(t, s.Addr, "long:")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()

	c := newCall(t, "long")
	long := ledger.State(strings.Repeat("s", 100))
	stored := *c
	stored.State = long
	key := "long:call:" + c.Key
	if err := rdb.Set(ctx, key, "-"+string(long)+"\nop\n"+mustJSON(t, &stored), 0).Err(); err != nil {
		t.Fatal(err)
	}
	cur, err := l.Update(ctx, done(c, "x"), ledger.Running)
	if !errors.Is(err, ledger.ErrConflict) || cur == nil || cur.State != long {
		t.Fatalf("Update from running over a call in a long state = %+v, %v; want ErrConflict and the stored call", cur, err)
	}
	if _, err := l.Update(ctx, done(c, "x"), long); err != nil {
		t.Fatalf("Update from the long state = %v", err)
	}
	if got, err := l.Get(ctx, c.Key); err != nil || got.State != ledger.Done || got.Result.Content != "x" {
		t.Fatalf("Get after the update = %+v, %v; want it done with x", got, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A call in flight keeps its key for the retention past its deadline, not
// only past its last write: a retention shorter than the time the call may
// run must not let its key expire while it runs.
func TestRedisInFlightOutlivesDeadline(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, Prefix: "ttl:", Retention: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	ttl := func(c *ledger.Call) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, "ttl:call:"+c.Key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// within says whether d is want, less the little time the test took.
	within := func(d, want time.Duration) bool { return d <= want && d > want-10*time.Second }

	c := newCall(t, "1")
	c.Created, c.Updated = time.Now(), time.Now()
	c.Deadline = c.Created.Add(2 * time.Hour)
	mustCreate(t, l, c)
	if d := ttl(c); !within(d, 2*time.Hour+time.Minute) {
		t.Errorf("TTL of a new call due in 2h = %s; want 2h1m", d)
	}
	waiting := *c
	waiting.State, waiting.Updated = ledger.AwaitingClient, time.Now()
	if _, err := l.Update(ctx, &waiting, ledger.Running); err != nil {
		t.Fatal(err)
	}
	if d := ttl(c); !within(d, 2*time.Hour+time.Minute) {
		t.Errorf("TTL of a call still in flight after an update = %s; want 2h1m", d)
	}
	finished := done(&waiting, "ok")
	finished.Updated = time.Now()
	if _, err := l.Update(ctx, finished, ledger.AwaitingClient); err != nil {
		t.Fatal(err)
	}
	if d := ttl(c); !within(d, time.Minute) {
		t.Errorf("TTL of a finished call = %s; want the retention, 1m", d)
	}
}

// TestRedisTLS records calls in a redis-server that speaks only TLS; a
// client that does not trust its certificate, or speaks plain TCP to it,
// cannot open the ledger.
func TestRedisTLS(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartTLS(t)
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)

	l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatalf("OpenRedis over TLS: %v", err)
	}
	defer l.Close()
	c := newCall(t, "1")
	mustCreate(t, l, c)
	if got, err := l.Get(ctx, c.Key); err != nil || got.CallID != c.CallID {
		t.Fatalf("Get over TLS = %+v, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want string
	}{
		{"system roots", &tls.Config{}, "certificate signed by unknown authority"},
		{"wrong name", &tls.Config{RootCAs: roots, ServerName: "redis.example.com"}, "redis.example.com"},
		{"plain TCP", nil, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, patience)
			defer cancel()
			l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, TLS: tc.tls})
			if err == nil {
				_ = l.Close()
				t.Fatal("OpenRedis succeeded")
			}
			if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenRedis = %v; want ErrUnavailable naming %q", err, tc.want)
			}
		})
	}
}
