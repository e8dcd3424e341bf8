// Package connecttest is the contract every back end of connect.Store
// meets, as a suite of tests: what Get, Put, Delete and Take keep and
// hand back, when a ttl ends a value or a lock, and that Take and Lock
// hold under many goroutines at once.
package connecttest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
)

// Epoch is when the clock of RunStore's stores starts.
var Epoch = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

// Options says how a back end keeps time.
type Options struct {
	// RealTime says its ttls run on a clock the suite cannot move (the
	// Redis server's): the suite then waits them out, with ttls of a
	// second, instead of moving the clock.
	RealTime bool
}

// RunStore runs the suite on a back end whose ttls run on the clock it
// is given. open returns a fresh store on c (a clock.Manual at Epoch,
// moved by the tests) and closes it when the test ends; it is called
// from parallel subtests. Keys are the subtest's own, so stores that
// share a back end do not see each other's.
func RunStore(t *testing.T, open func(t *testing.T, c *clock.Manual) connect.Store) {
	RunStoreWith(t, Options{}, open)
}

// RunStoreWith is RunStore for a back end that says how it keeps time.
func RunStoreWith(t *testing.T, opts Options, open func(t *testing.T, c *clock.Manual) connect.Store) {
	s := suite{opts: opts, open: open}
	for _, tc := range []struct {
		name string
		test func(t *testing.T, st connect.Store, c *clock.Manual)
	}{
		{"get of a missing key", s.missing},
		{"put and get", s.roundTrip},
		{"values are copies", s.copies},
		{"put replaces", s.replaces},
		{"keys are any bytes", s.keys},
		{"ttl", s.ttl},
		{"put without ttl ends the old ttl", s.ttlReplaced},
		{"delete", s.delete},
		{"take", s.take},
		{"take once under 32 at once", s.takeRace},
		{"lock", s.lock},
		{"lock ttl", s.lockTTL},
		{"an old holder's unlock", s.staleUnlock},
		{"lock under 16 at once", s.lockRace},
		{"lock without a ttl", s.lockNoTTL},
		{"locks and values apart", s.lockApart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := clock.NewManual(Epoch)
			tc.test(t, s.open(t, c), c)
		})
	}
}

type suite struct {
	opts Options
	open func(t *testing.T, c *clock.Manual) connect.Store
}

// ttl is the ttl the suite gives values and locks: a second, which a
// back end on real time is waited out for.
const ttl = time.Second

// slack is how long past a ttl a back end on real time is given to see
// it has ended.
const slack = 250 * time.Millisecond

// pass lets d go by: the manual clock moves, and a back end on real time
// is waited for.
func (s suite) pass(c *clock.Manual, d time.Duration) {
	c.Add(d)
	if s.opts.RealTime {
		time.Sleep(d)
	}
}

// expire lets rest, what is left of a ttl, go by: on a manual clock to
// the instant the ttl ends, on real time a little past it.
func (s suite) expire(c *clock.Manual, rest time.Duration) {
	s.pass(c, rest)
	if s.opts.RealTime {
		time.Sleep(slack)
	}
}

var ctx = context.Background()

// key is a key of t's own, with the bytes a key may hold.
func key(t *testing.T, name string) string {
	return t.Name() + "\x1fuser:ünïcode/" + name
}

func mustPut(t *testing.T, st connect.Store, k string, v []byte, d time.Duration) {
	t.Helper()
	if err := st.Put(ctx, k, v, d); err != nil {
		t.Fatalf("Put(%q) = %v", k, err)
	}
}

func mustGet(t *testing.T, st connect.Store, k string, want []byte) {
	t.Helper()
	got, err := st.Get(ctx, k)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q, %v; want %q", k, got, err, want)
	}
}

func mustMiss(t *testing.T, st connect.Store, k string) {
	t.Helper()
	if got, err := st.Get(ctx, k); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", k, got, err)
	}
}

func mustLock(t *testing.T, st connect.Store, k string, d time.Duration) func() {
	t.Helper()
	unlock, ok, err := st.Lock(ctx, k, d)
	if err != nil || !ok || unlock == nil {
		t.Fatalf("Lock(%q) = %v, %v; want it taken", k, ok, err)
	}
	return unlock
}

func mustBeHeld(t *testing.T, st connect.Store, k string) {
	t.Helper()
	if _, ok, err := st.Lock(ctx, k, ttl); ok || err != nil {
		t.Fatalf("Lock(%q) = %v, %v; want it refused, held", k, ok, err)
	}
}

func (s suite) missing(t *testing.T, st connect.Store, _ *clock.Manual) {
	mustMiss(t, st, key(t, "never"))
	if got, err := st.Take(ctx, key(t, "never")); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Take = %q, %v; want ErrNotFound", got, err)
	}
}

func (s suite) roundTrip(t *testing.T, st connect.Store, _ *clock.Manual) {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	for name, v := range map[string][]byte{
		"every byte": every,
		"empty":      {},
		"text":       []byte("sealed token"),
	} {
		mustPut(t, st, key(t, name), v, 0)
		mustGet(t, st, key(t, name), v)
	}
}

func (s suite) copies(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	v := []byte("original")
	mustPut(t, st, k, v, 0)
	copy(v, "CHANGED!")
	mustGet(t, st, k, []byte("original"))
	got, err := st.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "CHANGED!")
	mustGet(t, st, k, []byte("original"))
}

func (s suite) replaces(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	mustPut(t, st, k, []byte("first, and longer"), 0)
	mustPut(t, st, k, []byte("second"), 0)
	mustGet(t, st, k, []byte("second"))
}

// keys: keys that differ in a byte, or where one is the start of
// another, are different keys.
func (s suite) keys(t *testing.T, st connect.Store, _ *clock.Manual) {
	ks := []string{
		"a", "a\x00", "a\x1f", "a:b", "a:", ":a", "a\x1fb", "é", "e\u0301", "日本", "\xff\xfe",
		"conn:a", "lock:a", "a/b", "a b", "A",
	}
	for i, k := range ks {
		mustPut(t, st, t.Name()+k, []byte{byte(i)}, 0)
	}
	for i, k := range ks {
		mustGet(t, st, t.Name()+k, []byte{byte(i)})
	}
	mustMiss(t, st, t.Name())
	mustMiss(t, st, t.Name()+"a\x1fc")
}

func (s suite) ttl(t *testing.T, st connect.Store, c *clock.Manual) {
	got, taken := key(t, "got"), key(t, "taken")
	mustPut(t, st, got, []byte("v"), ttl)
	mustPut(t, st, taken, []byte("v"), ttl)
	mustPut(t, st, key(t, "kept"), []byte("v"), 0)
	s.pass(c, ttl/2)
	mustGet(t, st, got, []byte("v"))
	s.expire(c, ttl/2)
	mustMiss(t, st, got)
	if v, err := st.Take(ctx, taken); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("Take after the ttl = %q, %v; want ErrNotFound", v, err)
	}
	mustGet(t, st, key(t, "kept"), []byte("v"))
}

// ttlReplaced: a Put replaces a value's ttl with its own, and a ttl of
// zero or less is none (not "keep the old one").
func (s suite) ttlReplaced(t *testing.T, st connect.Store, c *clock.Manual) {
	for _, d := range []time.Duration{0, -1, -time.Second} {
		mustPut(t, st, key(t, d.String()), []byte("old"), ttl)
	}
	s.pass(c, ttl/2)
	for _, d := range []time.Duration{0, -1, -time.Second} {
		mustPut(t, st, key(t, d.String()), []byte("new"), d)
	}
	s.expire(c, ttl/2)
	for _, d := range []time.Duration{0, -1, -time.Second} {
		mustGet(t, st, key(t, d.String()), []byte("new"))
	}
}

func (s suite) delete(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	if err := st.Delete(ctx, key(t, "never")); err != nil {
		t.Fatalf("Delete of a missing key = %v", err)
	}
	mustPut(t, st, k, []byte("v"), 0)
	mustPut(t, st, key(t, "other"), []byte("w"), 0)
	if err := st.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, st, k)
	mustGet(t, st, key(t, "other"), []byte("w"))
	if err := st.Delete(ctx, k); err != nil {
		t.Fatalf("Delete again = %v", err)
	}
}

func (s suite) take(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	mustPut(t, st, k, []byte("state"), ttl)
	got, err := st.Take(ctx, k)
	if err != nil || string(got) != "state" {
		t.Fatalf("Take = %q, %v", got, err)
	}
	mustMiss(t, st, k)
	if got, err := st.Take(ctx, k); !errors.Is(err, connect.ErrNotFound) {
		t.Fatalf("second Take = %q, %v; want ErrNotFound", got, err)
	}
	// Put again, it is there to take again.
	mustPut(t, st, k, []byte("again"), 0)
	if got, err := st.Take(ctx, k); err != nil || string(got) != "again" {
		t.Fatalf("Take after a new Put = %q, %v", got, err)
	}
}

func (s suite) takeRace(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	mustPut(t, st, k, []byte("once"), ttl)
	var got, missed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 32 {
		wg.Go(func() {
			<-start
			v, err := st.Take(ctx, k)
			switch {
			case err == nil && string(v) == "once":
				got.Add(1)
			case errors.Is(err, connect.ErrNotFound):
				missed.Add(1)
			default:
				t.Errorf("Take = %q, %v", v, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got.Load() != 1 || missed.Load() != 31 {
		t.Fatalf("of 32 Takes, %d got the value and %d ErrNotFound; want 1 and 31", got.Load(), missed.Load())
	}
}

func (s suite) lock(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "refresh")
	unlock := mustLock(t, st, k, ttl)
	mustBeHeld(t, st, k)
	// Another lock is another lock.
	mustLock(t, st, key(t, "other"), ttl)()
	unlock()
	again := mustLock(t, st, k, ttl)
	// The first holding's unlock, again, leaves the second's alone.
	unlock()
	mustBeHeld(t, st, k)
	again()
	mustLock(t, st, k, ttl)()
}

func (s suite) lockTTL(t *testing.T, st connect.Store, c *clock.Manual) {
	k := key(t, "refresh")
	mustLock(t, st, k, ttl)
	s.pass(c, ttl/2)
	mustBeHeld(t, st, k)
	s.expire(c, ttl/2)
	mustLock(t, st, k, ttl)
}

// staleUnlock: a holder that outlived its ttl, whose lock another took
// since, does not release the other's by unlocking.
func (s suite) staleUnlock(t *testing.T, st connect.Store, c *clock.Manual) {
	k := key(t, "refresh")
	old := mustLock(t, st, k, ttl)
	s.expire(c, ttl)
	mustLock(t, st, k, ttl)
	old()
	mustBeHeld(t, st, k)
}

func (s suite) lockRace(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "refresh")
	var held atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			_, ok, err := st.Lock(ctx, k, ttl)
			if err != nil {
				t.Errorf("Lock = %v", err)
			}
			if ok {
				held.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := held.Load(); n != 1 {
		t.Fatalf("%d of 16 Locks at once took the lock; want 1", n)
	}
}

// lockNoTTL: a lock asked for no time (or less) is never one that is
// held forever. A back end may refuse it; if it grants it, the lock is
// free again at once.
func (s suite) lockNoTTL(t *testing.T, st connect.Store, _ *clock.Manual) {
	for _, d := range []time.Duration{0, -1, -time.Second} {
		k := key(t, d.String())
		_, ok, err := st.Lock(ctx, k, d)
		if err != nil && ok {
			t.Fatalf("Lock(%s) = %v, %v: both an error and the lock", d, ok, err)
		}
		mustLock(t, st, k, ttl)
	}
}

// lockApart: a lock and a value of the same key are apart: neither
// reads, replaces nor removes the other.
func (s suite) lockApart(t *testing.T, st connect.Store, _ *clock.Manual) {
	k := key(t, "k")
	mustPut(t, st, k, []byte("token"), 0)
	unlock := mustLock(t, st, k, ttl)
	mustGet(t, st, k, []byte("token"))
	mustPut(t, st, k, []byte("new"), 0)
	mustBeHeld(t, st, k)
	if err := st.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	mustBeHeld(t, st, k)
	unlock()
	mustMiss(t, st, k)

	free := key(t, "free")
	unlock = mustLock(t, st, free, ttl)
	mustMiss(t, st, free)
	unlock()
	mustMiss(t, st, free)
}
