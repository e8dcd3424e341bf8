package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
)

// Epoch is when the clock of RunQuotas' ledgers starts.
var Epoch = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

// RunQuotas is the contract of limits and of Waiting every back end
// meets. open returns a fresh, empty ledger whose clock is clk (a
// clock.Manual at Epoch, moved by the tests), and closes it when the test
// ends. A ledger that keeps nothing (Records false) is held to what it
// can keep: the counts, not the records.
func RunQuotas(t *testing.T, open func(t *testing.T, clk clock.Clock) ledger.Ledger) {
	ctx := context.Background()
	// newAt is a call created now by clk, in flight until a minute on.
	newAt := func(t *testing.T, clk *clock.Manual, id string, limits ...ledger.Limit) *ledger.Call {
		c := NewCall(t, id)
		c.Created, c.Updated, c.Deadline = clk.Now(), clk.Now(), clk.Now().Add(time.Minute)
		c.Limits = limits
		return c
	}
	// over checks that a Create was refused by limit, nothing recorded.
	over := func(t *testing.T, l ledger.Ledger, c *ledger.Call, limit ledger.Limit, retry time.Duration) {
		t.Helper()
		existing, created, err := l.Create(ctx, c)
		var oe *ledger.OverLimitError
		if !errors.As(err, &oe) || !errors.Is(err, ledger.ErrOverLimit) || created || existing != nil {
			t.Fatalf("Create(%s) = %v, %v, %v; want an *OverLimitError", c.CallID, existing, created, err)
		}
		if !reflect.DeepEqual(oe.Limit, limit) || oe.RetryAfter != retry {
			t.Fatalf("Create(%s) refused by %+v, retry after %s; want %+v, %s", c.CallID, oe.Limit, oe.RetryAfter, limit, retry)
		}
		if !l.Records() {
			return
		}
		if _, err := l.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Get(%s) after a refusal = %v; want ErrNotFound", c.CallID, err)
		}
	}
	limit := func(t *testing.T, name string, max int, window int64) ledger.Limit {
		return ledger.Limit{Key: t.Name() + "/" + name, Max: max, Window: window, Name: name}
	}
	update := func(t *testing.T, l ledger.Ledger, c *ledger.Call, state ledger.State, from ledger.State) *ledger.Call {
		t.Helper()
		d := *c
		d.State = state
		if _, err := l.Update(ctx, &d, from); err != nil {
			t.Fatalf("Update(%s, %s→%s): %v", c.CallID, from, state, err)
		}
		return &d
	}

	t.Run("window", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		w := limit(t, "3/1m", 3, 60)
		for i := range 3 {
			MustCreate(t, l, newAt(t, clk, fmt.Sprint(i), w))
			clk.Add(10 * time.Second)
		}
		// 30s on: the oldest leaves the window in 30s.
		over(t, l, newAt(t, clk, "3", w), w, 30*time.Second)
		clk.Add(29*time.Second + 999*time.Millisecond)
		over(t, l, newAt(t, clk, "3", w), w, time.Millisecond)
		clk.Add(time.Millisecond)
		MustCreate(t, l, newAt(t, clk, "3", w))
		// The second (10s) is now the oldest: it leaves in 10s.
		over(t, l, newAt(t, clk, "4", w), w, 10*time.Second)
		// Another key is counted apart.
		MustCreate(t, l, newAt(t, clk, "other", limit(t, "other", 1, 60)))
		// A window later every call has left it.
		clk.Add(time.Minute)
		for i := range 3 {
			MustCreate(t, l, newAt(t, clk, fmt.Sprint("later-", i), w))
		}
		over(t, l, newAt(t, clk, "later-3", w), w, time.Minute)
	})

	t.Run("max 0 refuses every call", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		w, c := limit(t, "none", 0, 3600), limit(t, "none in flight", 0, 0)
		over(t, l, newAt(t, clk, "1", w), w, time.Hour)
		over(t, l, newAt(t, clk, "2", c), c, ledger.ConcurrentRetry)
	})

	t.Run("a repeat counts nothing", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		if !l.Records() {
			t.Skip("a ledger that keeps nothing has no repeats")
		}
		w, f := limit(t, "2/1h", 2, 3600), limit(t, "2 in flight", 2, 0)
		c := newAt(t, clk, "1", w, f)
		MustCreate(t, l, c)
		for range 3 {
			existing, created, err := l.Create(ctx, newAt(t, clk, "1", w, f))
			if err != nil || created || !reflect.DeepEqual(existing, c) {
				t.Fatalf("repeat = %+v, %v, %v; want the call", existing, created, err)
			}
		}
		MustCreate(t, l, newAt(t, clk, "2", w, f))
		over(t, l, newAt(t, clk, "3", w, f), w, time.Hour)
	})

	t.Run("in flight", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		f := limit(t, "2 in flight", 2, 0)
		c1, c2 := newAt(t, clk, "1", f), newAt(t, clk, "2", f)
		MustCreate(t, l, c1)
		MustCreate(t, l, c2)
		over(t, l, newAt(t, clk, "3", f), f, ledger.ConcurrentRetry)
		// Handed to the client: still in flight.
		c1 = update(t, l, c1, ledger.AwaitingClient, ledger.Running)
		over(t, l, newAt(t, clk, "3", f), f, ledger.ConcurrentRetry)
		// Done releases a place.
		update(t, l, c1, ledger.Done, ledger.AwaitingClient)
		c3 := newAt(t, clk, "3", f)
		MustCreate(t, l, c3)
		over(t, l, newAt(t, clk, "4", f), f, ledger.ConcurrentRetry)
		// So does a card: the call waits for a person, not a place.
		c2 = update(t, l, c2, ledger.ActionRequired, ledger.Running)
		c4 := newAt(t, clk, "4", f)
		MustCreate(t, l, c4)
		// Resumed, it runs without taking a place again.
		update(t, l, c2, ledger.Running, ledger.ActionRequired)
		over(t, l, newAt(t, clk, "5", f), f, ledger.ConcurrentRetry)
		// A place lapses at its call's deadline (c3's and c4's: a minute).
		clk.Add(time.Minute - time.Millisecond)
		over(t, l, newAt(t, clk, "5", f), f, ledger.ConcurrentRetry)
		clk.Add(time.Millisecond)
		MustCreate(t, l, newAt(t, clk, "5", f))
		MustCreate(t, l, newAt(t, clk, "6", f))
		over(t, l, newAt(t, clk, "7", f), f, ledger.ConcurrentRetry)
	})

	t.Run("a full limit counts the call against none", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		a, b := limit(t, "2/1h", 2, 3600), limit(t, "1/1h", 1, 3600)
		f := limit(t, "1 in flight", 1, 0)
		MustCreate(t, l, newAt(t, clk, "1", a, b))
		over(t, l, newAt(t, clk, "2", a, b), b, time.Hour)
		over(t, l, newAt(t, clk, "2", a, f, b), b, time.Hour)
		// Neither a nor f counted the refused call.
		MustCreate(t, l, newAt(t, clk, "3", a, f))
		over(t, l, newAt(t, clk, "4", a), a, time.Hour)
		over(t, l, newAt(t, clk, "4", f), f, ledger.ConcurrentRetry)
	})

	t.Run("bad limits are refused", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		for _, bad := range []ledger.Limit{
			{Key: "", Max: 1, Window: 60},
			{Key: t.Name(), Max: -1, Window: 60},
			{Key: t.Name(), Max: 1, Window: -60},
		} {
			c := newAt(t, clk, "1", bad)
			if _, created, err := l.Create(ctx, c); err == nil || created || errors.Is(err, ledger.ErrOverLimit) {
				t.Errorf("Create with limit %+v = %v, %v; want an error", bad, created, err)
			}
			if l.Records() {
				if _, err := l.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
					t.Errorf("Create with limit %+v recorded the call: %v", bad, err)
				}
			}
		}
	})

	t.Run("concurrent creates", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		w, f := limit(t, "10/1h", 10, 3600), limit(t, "15 in flight", 15, 0)
		const n = 60
		calls := make([]*ledger.Call, n)
		for i := range calls {
			calls[i] = newAt(t, clk, fmt.Sprint(i), f, w)
		}
		if created, refused := CreateAtOnce(t, []ledger.Ledger{l}, calls); created != 10 || refused != n-10 {
			t.Fatalf("%d created, %d refused; want 10 and %d", created, refused, n-10)
		}
	})

	t.Run("waiting", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		if !l.Records() {
			if got, err := l.Waiting(ctx, "user-1", "install-1"); len(got) != 0 || err != nil {
				t.Fatalf("Waiting = %v, %v; want none", got, err)
			}
			return
		}
		waiting := func(user, install string, want ...*ledger.Call) {
			t.Helper()
			got, err := l.Waiting(ctx, user, install)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 && len(got) == 0 {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Waiting(%s, %s) = %d calls %s; want %d %s", user, install, len(got), ids(got), len(want), ids(want))
			}
		}
		var calls []*ledger.Call
		for i := range 4 {
			c := newAt(t, clk, fmt.Sprint(i), limit(t, "1 in flight "+fmt.Sprint(i), 1, 0))
			MustCreate(t, l, c)
			calls = append(calls, c)
			clk.Add(time.Second)
		}
		waiting("user-1", "install-1")
		// Entered in another order than created: listed oldest first.
		c2 := update(t, l, calls[2], ledger.ActionRequired, ledger.Running)
		c0 := update(t, l, calls[0], ledger.ActionRequired, ledger.Running)
		c1 := update(t, l, calls[1], ledger.AwaitingClient, ledger.Running)
		update(t, l, calls[3], ledger.Done, ledger.Running)
		for _, c := range []*ledger.Call{c0, c2} {
			if got, err := l.Get(ctx, c.Key); err != nil || !reflect.DeepEqual(got, c) {
				t.Fatalf("Get(%s) = %+v, %v", c.CallID, got, err)
			}
		}
		waiting("user-1", "install-1", c0, c2)
		waiting("user-1", "install-2")
		waiting("user-2", "install-1")
		waiting("user-1\x1finstall-1", "")
		// A card answered again (another card) stays listed.
		c0 = update(t, l, c0, ledger.ActionRequired, ledger.ActionRequired)
		waiting("user-1", "install-1", c0, c2)
		// Resumed, or closed: no longer waiting.
		update(t, l, c2, ledger.Running, ledger.ActionRequired)
		waiting("user-1", "install-1", c0)
		update(t, l, c1, ledger.ActionRequired, ledger.AwaitingClient)
		c1.State = ledger.ActionRequired
		waiting("user-1", "install-1", c0, c1)
		update(t, l, c0, ledger.Done, ledger.ActionRequired)
		update(t, l, c1, ledger.Done, ledger.ActionRequired)
		waiting("user-1", "install-1")
	})

	t.Run("waiting lists at most MaxWaiting", func(t *testing.T) {
		clk := clock.NewManual(Epoch)
		l := open(t, clk)
		if !l.Records() {
			t.Skip("a ledger that keeps nothing holds no call on a card")
		}
		var want []*ledger.Call
		for i := range ledger.MaxWaiting + 5 {
			c := newAt(t, clk, fmt.Sprintf("%03d", i))
			MustCreate(t, l, c)
			want = append(want, update(t, l, c, ledger.ActionRequired, ledger.Running))
			clk.Add(time.Millisecond)
		}
		got, err := l.Waiting(ctx, "user-1", "install-1")
		if err != nil || !reflect.DeepEqual(got, want[:ledger.MaxWaiting]) {
			t.Fatalf("Waiting = %d calls %s, %v; want the %d oldest", len(got), ids(got), err, ledger.MaxWaiting)
		}
	})
}

// ids are the calls' ids, for a failure's message.
func ids(calls []*ledger.Call) []string {
	s := make([]string, len(calls))
	for i, c := range calls {
		s[i] = c.CallID
	}
	return s
}

// CreateAtOnce creates calls[i] on ledgers[i%len(ledgers)] (instances
// sharing one back end), all released at once, and says how many were
// created and how many a limit refused; any other error fails t.
func CreateAtOnce(t *testing.T, ledgers []ledger.Ledger, calls []*ledger.Call) (created, refused int) {
	t.Helper()
	var nc, nr atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range calls {
		l := ledgers[i%len(ledgers)]
		wg.Go(func() {
			<-start
			_, ok, err := l.Create(context.Background(), c)
			switch {
			case errors.Is(err, ledger.ErrOverLimit):
				nr.Add(1)
			case err != nil:
				t.Error(err)
			case ok:
				nc.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(nc.Load()), int(nr.Load())
}
