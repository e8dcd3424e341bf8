package clienttools

import (
	"bytes"
	"context"
	"strconv"

	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
)

// fakeClock replaces the bridge's timer and clock: a Run's timeout fires
// only when the test says so, and Now moves only when the test moves it.
type fakeClock struct {
	*clock.Manual
	mu     sync.Mutex
	timers []chan time.Time
	armed  chan time.Duration
}

func newFakeClock(b *Bridge) *fakeClock {
	c := &fakeClock{Manual: clock.NewManual(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), armed: make(chan time.Duration, 64)}
	b.after = c.after
	if r, ok := b.relay.(*localRelay); ok {
		r.clock = c
	}
	return c
}

// local is b's in-process relay.
func local(b *Bridge) *localRelay { return b.relay.(*localRelay) }

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.timers = append(c.timers, ch)
	c.mu.Unlock()
	c.armed <- d
	return ch
}

// waitArmed waits until a Run has registered its call and armed its timer.
func (c *fakeClock) waitArmed(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("Run never armed its timer")
		return 0
	}
}

// fireAll fires every timer armed so far.
func (c *fakeClock) fireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.timers {
		select {
		case ch <- c.Now():
		default:
		}
	}
}

type runResult struct {
	out Outcome
	err error
}

// start runs a call in the background and waits until it is registered.
func start(t *testing.T, ctx context.Context, b *Bridge, clk *fakeClock, user, thread, id string) <-chan runResult {
	t.Helper()
	return startIn(t, ctx, b, clk, th(user, thread), id)
}

// startIn is start in any Thread.
func startIn(t *testing.T, ctx context.Context, b *Bridge, clk *fakeClock, thread Thread, id string) <-chan runResult {
	t.Helper()
	done := make(chan runResult, 1)
	go func() {
		out, err := b.Run(ctx, thread, Offer{CallID: id, Name: "where", Input: jsontext.Value(`{"q":"x"}`)}, 3*time.Second)
		done <- runResult{out, err}
	}()
	if d := clk.waitArmed(t); d != 3*time.Second {
		t.Errorf("Run armed a timer of %v, want the timeout 3s", d)
	}
	return done
}

func wait(t *testing.T, done <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
		return runResult{}
	}
}

func notYet(t *testing.T, done <-chan runResult) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("Run returned early: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func strp(s string) *string { return &s }

// answerKept claims call id of u_1's th_1 on b, posts result, and checks
// that the Run waiting on done returns it.
func answerKept(t *testing.T, b *Bridge, id, result string, done <-chan runResult) {
	t.Helper()
	if err := b.Claim(th("u_1", "th_1"), id); err != nil {
		t.Fatal(err)
	}
	if err := b.Post(th("u_1", "th_1"), id, Outcome{Result: jsontext.Value(result)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != result {
		t.Fatalf("Run of %s: %+v, want %s", id, r, result)
	}
}

// th is a thread of no installation.
func th(user, thread string) Thread { return Thread{User: user, ID: thread} }

// open opens a stream with a page token of its own.
func open(t *testing.T, b *Bridge, user, thread string) (*Stream, []Offer) {
	t.Helper()
	s, offers, err := b.Open(th(user, thread), t.Name()+user+thread)
	if err != nil {
		t.Fatal(err)
	}
	return s, offers
}

func relayTimeout(t *testing.T, b *Bridge, clk *fakeClock) {
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	notYet(t, done)
	clk.fireAll()
	r := wait(t, done)
	if !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("Run after the timer: %+v, want ErrTimeout", r)
	}
	// A timed-out call is answered: late pages get 409, not 404.
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("late claim: %v, want ErrConflict", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`1`)}); !errors.Is(err, ErrConflict) {
		t.Errorf("late post: %v, want ErrConflict", err)
	}
	// Nor is it offered to a page that opens now.
	s, waiting := open(t, b, "u_1", "th_1")
	defer s.Close()
	if len(waiting) != 0 {
		t.Errorf("a timed-out call is offered: %+v", waiting)
	}
}

func relayClaimAndPost(t *testing.T, b *Bridge, clk *fakeClock) {
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")

	// Another user or another thread does not see the call.
	for _, who := range [][2]string{{"u_2", "th_1"}, {"u_1", "th_2"}, {"", "th_1"}} {
		if err := b.Claim(th(who[0], who[1]), "c1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim as %v: %v, want ErrNotFound", who, err)
		}
		if err := b.Post(th(who[0], who[1]), "c1", Outcome{Result: jsontext.Value(`"stolen"`)}); !errors.Is(err, ErrNotFound) {
			t.Errorf("post as %v: %v, want ErrNotFound", who, err)
		}
	}
	if err := b.Claim(th("u_1", "th_1"), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim of an unknown call: %v", err)
	}

	// Two pages claim: the first wins.
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("second claim: %v, want ErrConflict", err)
	}
	notYet(t, done)

	// Two results: the first is the outcome.
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`"first"`)}); err != nil {
		t.Fatalf("first post: %v", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`"second"`)}); !errors.Is(err, ErrConflict) {
		t.Errorf("second post: %v, want ErrConflict", err)
	}
	r := wait(t, done)
	if r.err != nil || string(r.out.Result) != `"first"` {
		t.Errorf("Run: %s, %v; want the first result", r.out.Result, r.err)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim after the result: %v, want ErrConflict", err)
	}
	// The timer firing later changes nothing.
	clk.fireAll()
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); !errors.Is(err, ErrConflict) {
		t.Errorf("post after the timer: %v", err)
	}
}

func relayPostWithoutClaim(t *testing.T, b *Bridge, clk *fakeClock) {
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Error: strp("boom")}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || r.out.Error == nil || *r.out.Error != "boom" {
		t.Errorf("Run: %+v", r)
	}
}

func offerIDs(offers []Offer) []string {
	ids := []string{}
	for _, o := range offers {
		ids = append(ids, o.CallID)
	}
	sort.Strings(ids)
	return ids
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func relayOpenOffersWaitingUnclaimed(t *testing.T, b *Bridge, clk *fakeClock) {
	ctx := context.Background()
	start(t, ctx, b, clk, "u_1", "th_1", "c1")
	start(t, ctx, b, clk, "u_1", "th_1", "c2")
	start(t, ctx, b, clk, "u_1", "th_1", "c3")
	start(t, ctx, b, clk, "u_1", "th_2", "other_thread")
	start(t, ctx, b, clk, "u_2", "th_1", "other_user")
	done4 := start(t, ctx, b, clk, "u_1", "th_1", "c4")
	defer clk.fireAll()

	if err := b.Claim(th("u_1", "th_1"), "c2"); err != nil {
		t.Fatal(err)
	}
	if err := b.Post(th("u_1", "th_1"), "c4", Outcome{}); err != nil {
		t.Fatal(err)
	}
	wait(t, done4)

	s, waiting := open(t, b, "u_1", "th_1")
	defer s.Close()
	if got := offerIDs(waiting); !equal(got, []string{"c1", "c3"}) {
		t.Errorf("Open offered %v, want the waiting unclaimed [c1 c3]", got)
	}
	for _, o := range waiting {
		if o.Name != "where" || string(o.Input) != `{"q":"x"}` {
			t.Errorf("offer %+v", o)
		}
	}
}

// await reads n offers from a stream, or what came within 5s, then what
// else it got so far: a relay may hand offers over after Run has them.
func await(s *Stream, n int) []string {
	var ids []string
	deadline := time.After(5 * time.Second)
	for len(ids) < n {
		select {
		case o := <-s.C:
			ids = append(ids, o.CallID)
		case <-deadline:
			return append(ids, drain(s)...)
		}
	}
	ids = append(ids, drain(s)...)
	sort.Strings(ids)
	return ids
}

// drain reads what a stream got so far.
func drain(s *Stream) []string {
	var ids []string
	for {
		select {
		case o := <-s.C:
			ids = append(ids, o.CallID)
		default:
			sort.Strings(ids)
			return ids
		}
	}
}

func relayPushToThreadStreams(t *testing.T, b *Bridge, clk *fakeClock) {
	defer clk.fireAll()
	a1, _ := open(t, b, "u_1", "th_1")
	a2, _ := open(t, b, "u_1", "th_1")
	other, _ := open(t, b, "u_1", "th_2")
	otherUser, _ := open(t, b, "u_2", "th_1")
	closed, _ := open(t, b, "u_1", "th_1")
	closed.Close()
	for _, s := range []*Stream{a1, a2, other, otherUser} {
		defer s.Close()
	}

	start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	if got := await(a1, 1); !equal(got, []string{"c1"}) {
		t.Errorf("first stream got %v", got)
	}
	if got := await(a2, 1); !equal(got, []string{"c1"}) {
		t.Errorf("second stream got %v", got)
	}
	if got := drain(other); len(got) != 0 {
		t.Errorf("another thread's stream got %v", got)
	}
	if got := drain(otherUser); len(got) != 0 {
		t.Errorf("another user's stream got %v", got)
	}
	if got := drain(closed); len(got) != 0 {
		t.Errorf("a closed stream got %v", got)
	}
}

func relayClaimLapse(t *testing.T, b *Bridge, clk *fakeClock) {
	defer clk.fireAll()

	a, _ := open(t, b, "u_1", "th_1")
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	if got := await(a, 1); !equal(got, []string{"c1"}) {
		t.Fatalf("stream got %v", got)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatal(err)
	}
	// A second page of the thread is open: closing the first keeps the claim.
	keep, waiting := open(t, b, "u_1", "th_1")
	if len(waiting) != 0 {
		t.Errorf("a claimed call is offered: %+v", waiting)
	}
	a.Close()
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim while another stream is open: %v, want ErrConflict", err)
	}
	// Another thread's last stream closing does not touch this thread.
	o, _ := open(t, b, "u_1", "th_2")
	o.Close()
	third, waiting := open(t, b, "u_1", "th_1")
	if len(waiting) != 0 {
		t.Errorf("offered while the claim holds: %+v", waiting)
	}
	third.Close()

	// The last stream closes with no result: the claim lapses.
	keep.Close()
	b2, waiting := open(t, b, "u_1", "th_1")
	defer b2.Close()
	if got := offerIDs(waiting); !equal(got, []string{"c1"}) {
		t.Fatalf("after the lapse Open offered %v, want [c1]", got)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("claim after the lapse: %v", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`"from b"`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `"from b"` {
		t.Errorf("Run: %+v", r)
	}
	// An answered call does not come back when the streams close.
	b2.Close()
	s, waiting := open(t, b, "u_1", "th_1")
	defer s.Close()
	if len(waiting) != 0 {
		t.Errorf("an answered call is offered again: %+v", waiting)
	}
}

// relayCallerGoneNoPage: a call whose caller goes away while no page of
// its thread streams is dropped at once: Run ends with ErrCallerGone, its
// place is free, a page that opens later never sees it, and late claims
// and results are 409.
func relayCallerGoneNoPage(t *testing.T, b *Bridge, clk *fakeClock) {
	ctx, cancel := context.WithCancel(context.Background())
	done := start(t, ctx, b, clk, "u_1", "th_1", "c1")
	notYet(t, done)
	counts(t, b, 1, 0)
	cancel()
	if r := wait(t, done); !errors.Is(r.err, ErrCallerGone) {
		t.Fatalf("Run after cancel: %+v, want ErrCallerGone", r)
	}
	counts(t, b, 0, 0)
	s, offers := open(t, b, "u_1", "th_1")
	defer s.Close()
	if len(offers) != 0 {
		t.Errorf("a page that opened later lists %+v", offers)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim after the drop: %v, want ErrConflict", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); !errors.Is(err, ErrConflict) {
		t.Errorf("post after the drop: %v, want ErrConflict", err)
	}
	// The id may run again once finished.
	done = start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`2`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `2` {
		t.Errorf("second run: %+v", r)
	}
}

// relayCallerGoneWhilePageStreams: while a page of the thread streams, a
// call whose caller went away is kept for it and answered as usual; when
// the thread's last stream closes first, claimed or not, it is dropped.
func relayCallerGoneWhilePageStreams(t *testing.T, b *Bridge, clk *fakeClock) {
	defer clk.fireAll()
	page, _ := open(t, b, "u_1", "th_1")
	other, _ := open(t, b, "u_1", "th_2") // another thread's stream keeps nothing
	defer other.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := start(t, ctx, b, clk, "u_1", "th_1", "c1")
	cancel()
	notYet(t, done)
	counts(t, b, 1, 2)
	answerKept(t, b, "c1", `"kept"`, done)

	// Claimed, then the page leaves without a result: dropped, not
	// offered again.
	ctx, cancel = context.WithCancel(context.Background())
	claimed := start(t, ctx, b, clk, "u_1", "th_1", "c2")
	unclaimed := start(t, context.Background(), b, clk, "u_1", "th_1", "c3")
	if err := b.Claim(th("u_1", "th_1"), "c2"); err != nil {
		t.Fatal(err)
	}
	cancel()
	notYet(t, claimed)
	page2, _ := open(t, b, "u_1", "th_1")
	page.Close()
	notYet(t, claimed) // a stream of the thread is still open
	page2.Close()
	if r := wait(t, claimed); !errors.Is(r.err, ErrCallerGone) {
		t.Fatalf("Run once the last stream closed: %+v, want ErrCallerGone", r)
	}
	// The call whose caller stayed waits on, its claim lapsed.
	notYet(t, unclaimed)
	counts(t, b, 1, 1)
	s, offers := open(t, b, "u_1", "th_1")
	defer s.Close()
	if got := offerIDs(offers); !equal(got, []string{"c3"}) {
		t.Errorf("the next stream lists %v, want [c3]", got)
	}
	if err := b.Claim(th("u_1", "th_1"), "c2"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim of the dropped call: %v, want ErrConflict", err)
	}
}

// TestCallerGoneFreesItsPlace (in a synctest bubble, whose clock moves
// only when every goroutine waits): a user at max_pending_per_user whose
// caller hangs up with no page open can call again at once, with no time
// passed, rather than after the client tool timeout.
func TestCallerGoneFreesItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBridge().WithLimits(Limits{PendingPerUser: 1})
		alice := Thread{User: "alice", Install: "in_1", ID: "th_1"}
		begin := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := b.Run(ctx, alice, Offer{CallID: "c1"}, DefaultTimeout)
			errc <- err
		}()
		synctest.Wait()
		if err := b.Admit(alice); !errors.Is(err, ErrUserFull) {
			t.Fatalf("Admit at the cap: %v, want ErrUserFull", err)
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, ErrCallerGone) {
				t.Fatalf("Run: %v, want ErrCallerGone", err)
			}
		default:
			t.Fatal("Run still waits after its caller went away with no page open")
		}
		if err := b.Admit(alice); err != nil {
			t.Fatalf("Admit after the drop: %v", err)
		}
		if d := time.Since(begin); d != 0 {
			t.Errorf("the place was free after %v; want at once", d)
		}
		go func() {
			_, err := b.Run(t.Context(), alice, Offer{CallID: "c2"}, time.Second)
			errc <- err
		}()
		if err := <-errc; !errors.Is(err, ErrTimeout) {
			t.Errorf("the next call: %v, want ErrTimeout (no page)", err)
		}
	})
}

func relaySameIDWhileWaiting(t *testing.T, b *Bridge, clk *fakeClock) {
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	_, err := b.Run(context.Background(), th("u_1", "th_1"), Offer{CallID: "c1"}, time.Second)
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Errorf("a second Run of a waiting id: %v", err)
	}
	// The first is untouched.
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `"ok"` {
		t.Errorf("Run: %+v", r)
	}
}

// relayPostRacesTimer has the page's answer land just before the timer
// fires, so that both are ready when Run looks: the answer wins either way
// select picks.
func relayPostRacesTimer(t *testing.T, b *Bridge, _ *fakeClock) {
	for i := 0; i < 200; i++ {
		id := "c" + strconv.Itoa(i)
		b.after = func(time.Duration) <-chan time.Time {
			// The call is registered before the timer is armed.
			if err := b.Post(th("u_1", "th_1"), id, Outcome{Result: jsontext.Value(`"page"`)}); err != nil {
				t.Errorf("post: %v", err)
			}
			ch := make(chan time.Time, 1)
			ch <- time.Now()
			return ch
		}
		out, err := b.Run(context.Background(), th("u_1", "th_1"), Offer{CallID: id}, time.Second)
		if err != nil || string(out.Result) != `"page"` {
			t.Fatalf("round %d: %s, %v; the page's answer must win", i, out.Result, err)
		}
	}
}

func TestForgetFinished(t *testing.T) {
	b := NewBridge()
	clk := newFakeClock(b)
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	done = start(t, context.Background(), b, clk, "u_1", "th_1", "c2")
	clk.fireAll()
	wait(t, done)

	clk.Add(keepFinished)
	for _, id := range []string{"c1", "c2"} {
		if err := b.Claim(th("u_1", "th_1"), id); !errors.Is(err, ErrConflict) {
			t.Errorf("%s at keepFinished: %v, want ErrConflict", id, err)
		}
	}
	clk.Add(time.Second)
	for _, id := range []string{"c1", "c2"} {
		if err := b.Claim(th("u_1", "th_1"), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim of %s past keepFinished: %v, want ErrNotFound", id, err)
		}
		if err := b.Post(th("u_1", "th_1"), id, Outcome{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("post of %s past keepFinished: %v, want ErrNotFound", id, err)
		}
	}
	r := local(b)
	r.mu.Lock()
	n := len(r.calls)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d calls kept past keepFinished", n)
	}

	// A waiting call is never forgotten, however long it waits.
	done = start(t, context.Background(), b, clk, "u_1", "th_1", "c3")
	clk.Add(time.Hour)
	if err := b.Claim(th("u_1", "th_1"), "c3"); err != nil {
		t.Errorf("claim of a call waiting an hour: %v", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c3", Outcome{Result: jsontext.Value(`"late"`)}); err != nil {
		t.Errorf("post: %v", err)
	}
	if r := wait(t, done); r.err != nil {
		t.Error(r.err)
	}
}

func TestToolResult(t *testing.T) {
	for _, c := range []struct {
		name    string
		out     Outcome
		content string
		isError bool
	}{
		{"string", Outcome{Result: jsontext.Value(`"at 1:23"`)}, "at 1:23", false},
		{"string with escapes", Outcome{Result: jsontext.Value(` "a\"b\u00e9\n" `)}, "a\"bé\n", false},
		{"empty string", Outcome{Result: jsontext.Value(`""`)}, "", false},
		{"number", Outcome{Result: jsontext.Value(`83.5`)}, "83.5", false},
		{"big number kept", Outcome{Result: jsontext.Value(`12345678901234567890`)}, "12345678901234567890", false},
		{"bool", Outcome{Result: jsontext.Value(`true`)}, "true", false},
		{"object compacted, key order kept", Outcome{Result: jsontext.Value(`{"b": 1, "a": [ 2 ]}`)}, `{"b":1,"a":[2]}`, false},
		{"array", Outcome{Result: jsontext.Value("[ \"x\",\n {\"z\" : null} ]")}, `["x",{"z":null}]`, false},
		{"html kept", Outcome{Result: jsontext.Value(`{"h":"<b>&</b>"}`)}, `{"h":"<b>&</b>"}`, false},
		{"null", Outcome{Result: jsontext.Value(`null`)}, "null", false},
		{"null with space", Outcome{Result: jsontext.Value(` null `)}, "null", false},
		{"undefined", Outcome{}, "", false},
		{"error", Outcome{Error: strp("boom")}, "boom", true},
		{"error wins over a result", Outcome{Error: strp("bad"), Result: jsontext.Value(`1`)}, "bad", true},
		{"empty error", Outcome{Error: strp("")}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.out.ToolResult()
			if r.Content != c.content || r.IsError != c.isError {
				t.Errorf("ToolResult = %q isError=%v, want %q isError=%v", r.Content, r.IsError, c.content, c.isError)
			}
		})
	}
	for _, bad := range []string{`{"a":`, `nul`, `"open`, `1 2`, "\"s\"\f", "\f1", `"s" "t"`} {
		r := Outcome{Result: jsontext.Value(bad)}.ToolResult()
		if !r.IsError || r.Content == "" {
			t.Errorf("invalid JSON %q: %+v, want an error result", bad, r)
		}
	}
}

// toolResultV1 is ToolResult as it was written on encoding/json (legacyjson:
// the reference the test holds ToolResult to).
func toolResultV1(o Outcome) (content string, isError bool) {
	var s string
	if t := bytes.TrimLeft(o.Result, " \t\r\n"); len(t) > 0 && t[0] == '"' && legacyjson.Unmarshal(o.Result, &s) == nil {
		return s, false
	}
	var buf bytes.Buffer
	if err := legacyjson.Compact(&buf, o.Result); err != nil {
		return "", true
	}
	return buf.String(), false
}

// ToolResult reads what a page posted as it did on encoding/json: invalid
// UTF-8 in a string becomes U+FFFD, other values keep their text.
func TestToolResultReadsAsEncodingJSON(t *testing.T) {
	for _, v := range []string{
		`"plain"`, " \t\r\n\"spaced\" ", `"\u00e9\u003c\ud83d\ude00"`, "\"\xff\xfe\"", `"\ud800 lone"`, `"\udc00\ud800"`,
		"{\"a\" : \"\xff\\ud800\\u003c\", \"a\": 1.0e2 , \"b\":[ true ,null ]}", ` [ 1 , 2.50 , -0 , 1E+2 ] `,
		`"unterminated`, `"a" "b"`, `"a"x`, "\f\"a\"", `{"a":1,}`, `tru`,
	} {
		o := Outcome{Result: jsontext.Value(v)}
		before := bytes.Clone(o.Result)
		got := o.ToolResult()
		content, isError := toolResultV1(o)
		if got.IsError != isError || !isError && got.Content != content {
			t.Errorf("ToolResult(%q) = %q isError=%v; on encoding/json %q isError=%v", v, got.Content, got.IsError, content, isError)
		}
		if !bytes.Equal(o.Result, before) {
			t.Errorf("ToolResult(%q) changed the posted result to %q", v, o.Result)
		}
	}
}

// TestOutcomeJSON checks the body shapes a page posts.
func TestOutcomeJSON(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                         "",
		`{"result":null}`:            "null",
		`{"result":"s"}`:             "s",
		`{"result":{"b":1, "a":2}}`:  `{"b":1,"a":2}`,
		`{"error":"x","result":"y"}`: "x",
	} {
		var o Outcome
		if err := json.Unmarshal([]byte(body), &o); err != nil {
			t.Fatal(err)
		}
		if got := o.ToolResult().Content; got != want {
			t.Errorf("%s: content %q, want %q", body, got, want)
		}
	}
}

func TestOpenOffersOldestFirst(t *testing.T) {
	b := NewBridge()
	never := make(chan time.Time)
	b.after = func(time.Duration) <-chan time.Time { return never }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := []string{"c5", "c1", "c9", "c3", "c7", "c2"}
	for _, id := range ids {
		go func() { _, _ = b.Run(ctx, th("u", "t"), Offer{CallID: id, Name: "n"}, time.Hour) }()
		// Wait until the relay has it, so the arrival order is known.
		for {
			r := local(b)
			r.mu.Lock()
			_, ok := r.calls[callKey{th("u", "t"), id}]
			r.mu.Unlock()
			if ok {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	s, offers := open(t, b, "u", "t")
	defer s.Close()
	var got []string
	for _, o := range offers {
		got = append(got, o.CallID)
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("offered %v, want arrival order %v", got, ids)
	}
}

// refused runs a call that the limits must refuse. Its context is done
// already: a call let in ends with ErrCallerGone instead.
func refused(b *Bridge, user, thread, id string) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Run(ctx, th(user, thread), Offer{CallID: id, Name: "where"}, time.Second)
	return err
}

func counts(t *testing.T, b *Bridge, calls, streams int) {
	t.Helper()
	if c, s := b.Waiting(); c != calls || s != streams {
		t.Errorf("Waiting() = %d calls, %d streams; want %d, %d", c, s, calls, streams)
	}
}

func TestPendingPerThreadLimit(t *testing.T) {
	b := NewBridge().WithLimits(Limits{PendingPerThread: 2})
	clk := newFakeClock(b)
	defer clk.fireAll()
	s, _ := open(t, b, "u_1", "th_1")
	defer s.Close()
	ctx := context.Background()
	done1 := start(t, ctx, b, clk, "u_1", "th_1", "c1")
	start(t, ctx, b, clk, "u_1", "th_1", "c2")

	if err := refused(b, "u_1", "th_1", "c3"); !errors.Is(err, ErrThreadFull) {
		t.Fatalf("a third call in the thread: %v, want ErrThreadFull", err)
	}
	if err := b.Claim(th("u_1", "th_1"), "c3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused call can be claimed: %v", err)
	}
	if got := drain(s); !equal(got, []string{"c1", "c2"}) {
		t.Errorf("the stream got %v; the refused call must not be offered", got)
	}
	counts(t, b, 2, 1)
	// Other threads, and the same thread id of another user, are apart.
	start(t, ctx, b, clk, "u_1", "th_2", "c3")
	start(t, ctx, b, clk, "u_2", "th_1", "c3")
	counts(t, b, 4, 1)

	// An answer frees its place.
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); err != nil {
		t.Fatal(err)
	}
	wait(t, done1)
	start(t, ctx, b, clk, "u_1", "th_1", "c3")
	if err := refused(b, "u_1", "th_1", "c4"); !errors.Is(err, ErrThreadFull) {
		t.Errorf("a third call again: %v, want ErrThreadFull", err)
	}
}

func TestPendingLimit(t *testing.T) {
	b := NewBridge().WithLimits(Limits{Pending: 3})
	clk := newFakeClock(b)
	ctx := context.Background()
	var runs []<-chan runResult
	for _, th := range []string{"th_1", "th_2", "th_3"} {
		runs = append(runs, start(t, ctx, b, clk, "u_1", th, "c1"))
	}
	if err := refused(b, "u_2", "th_9", "c9"); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth call: %v, want ErrFull", err)
	}
	counts(t, b, 3, 0)
	// A timeout frees places too.
	clk.fireAll()
	for _, r := range runs {
		if r := wait(t, r); !errors.Is(r.err, ErrTimeout) {
			t.Fatalf("%+v", r)
		}
	}
	counts(t, b, 0, 0)
	done := start(t, ctx, b, clk, "u_2", "th_9", "c9")
	clk.fireAll()
	wait(t, done)
}

func TestStreamsPerTokenLimit(t *testing.T) {
	b := NewBridge().WithLimits(Limits{StreamsPerToken: 2})
	s1, _, err1 := b.Open(th("u_1", "th_1"), "tokA")
	s2, _, err2 := b.Open(th("u_1", "th_1"), "tokA")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, _, err := b.Open(th("u_1", "th_1"), "tokA"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream of one token: %v, want ErrTooManyStreams", err)
	}
	// The limit is per token, not per thread.
	s3, _, err := b.Open(th("u_1", "th_1"), "tokB")
	if err != nil {
		t.Fatalf("another token of the thread: %v", err)
	}
	counts(t, b, 0, 3)
	// Closing twice frees one place, not two.
	s1.Close()
	s1.Close()
	s4, _, err := b.Open(th("u_1", "th_1"), "tokA")
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if _, _, err := b.Open(th("u_1", "th_1"), "tokA"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a double close freed two places: %v", err)
	}
	for _, s := range []*Stream{s2, s3, s4} {
		s.Close()
	}
	counts(t, b, 0, 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.tokens) != 0 || len(b.threads) != 0 {
		t.Errorf("closed streams left %d tokens, %d threads", len(b.tokens), len(b.threads))
	}
}

// limitError checks that err is a LimitError for option, wrapping want.
func limitError(t *testing.T, err, want error, option string) {
	t.Helper()
	var le *LimitError
	if !errors.Is(err, want) || !errors.As(err, &le) || le.Option != option || !strings.Contains(err.Error(), option) {
		t.Errorf("got %v, want %v naming %s", err, want, option)
	}
}

func TestPendingPerUserLimit(t *testing.T) {
	b := NewBridge().WithLimits(Limits{PendingPerUser: 2})
	clk := newFakeClock(b)
	defer clk.fireAll()
	ctx := context.Background()
	alice := func(thread string) Thread { return Thread{User: "alice", Install: "in_1", ID: thread} }
	done1 := startIn(t, ctx, b, clk, alice("th_1"), "c1")
	startIn(t, ctx, b, clk, alice("th_2"), "c2")

	// A new thread is the caller's choice: it does not make room.
	_, err := b.Run(ctx, alice("th_3"), Offer{CallID: "c3"}, time.Second)
	limitError(t, err, ErrUserFull, "max_pending_per_user")
	limitError(t, b.Admit(alice("th_3")), ErrUserFull, "max_pending_per_user")
	if err := b.Claim(alice("th_3"), "c3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused call can be claimed: %v", err)
	}
	// Another user, and the same user id in another installation, have
	// room of their own.
	bob := startIn(t, ctx, b, clk, Thread{User: "bob", Install: "in_1", ID: "th_1"}, "c1")
	startIn(t, ctx, b, clk, Thread{User: "alice", Install: "in_2", ID: "th_1"}, "c1")
	counts(t, b, 4, 0)
	if err := b.Post(Thread{User: "bob", Install: "in_1", ID: "th_1"}, "c1", Outcome{Result: jsontext.Value(`"bob"`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, bob); r.err != nil || string(r.out.Result) != `"bob"` {
		t.Errorf("bob's call: %+v", r)
	}

	// An answer frees alice's place.
	if err := b.Post(alice("th_1"), "c1", Outcome{}); err != nil {
		t.Fatal(err)
	}
	wait(t, done1)
	startIn(t, ctx, b, clk, alice("th_3"), "c3")
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.owners[owner{"alice", "in_1"}]; n != 2 {
		t.Errorf("alice counts %d calls, want 2", n)
	}
}

func TestStreamsPerThreadLimit(t *testing.T) {
	b := NewBridge()
	var streams []*Stream
	for i := range DefaultStreamsPerThread {
		// A token of its own each: the cap is the thread's, whatever
		// tokens the streams use.
		s, _, err := b.Open(th("u_1", "th_1"), fmt.Sprint("tok", i))
		if err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
		streams = append(streams, s)
	}
	_, _, err := b.Open(th("u_1", "th_1"), "another")
	limitError(t, err, ErrThreadStreams, "max_streams_per_thread")
	// Another thread, and the same thread of another installation, open.
	for _, other := range []Thread{th("u_1", "th_2"), {User: "u_1", Install: "in_1", ID: "th_1"}} {
		s, _, err := b.Open(other, "another")
		if err != nil {
			t.Fatalf("%+v: %v", other, err)
		}
		streams = append(streams, s)
	}
	streams[0].Close()
	s, _, err := b.Open(th("u_1", "th_1"), "another")
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	for _, s := range append(streams[1:], s) {
		s.Close()
	}
	counts(t, b, 0, 0)
}

func TestStreamsLimit(t *testing.T) {
	b := NewBridge().WithLimits(Limits{Streams: 3})
	var streams []*Stream
	for i := range 3 {
		s, _, err := b.Open(th(fmt.Sprint("u_", i), "th_1"), fmt.Sprint("tok", i))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	_, _, err := b.Open(th("u_9", "th_9"), "tok9")
	limitError(t, err, ErrStreamsFull, "max_streams")
	streams[0].Close()
	if s, _, err := b.Open(th("u_9", "th_9"), "tok9"); err != nil {
		t.Errorf("after a close: %v", err)
	} else {
		s.Close()
	}
	for _, s := range streams[1:] {
		s.Close()
	}
	counts(t, b, 0, 0)
}

// relayInstallsApart: two installations with the same user id and thread
// id are two threads. A page of one lists and gets none of the other's
// calls, and cannot claim or answer them (ErrNotFound, as for a call that
// does not exist); a page whose token names no installation sees only
// calls of none.
func relayInstallsApart(t *testing.T, b *Bridge, clk *fakeClock) {
	defer clk.fireAll()
	inA := Thread{User: "u_1", Install: "in_a", ID: "th_1"}
	inB := Thread{User: "u_1", Install: "in_b", ID: "th_1"}
	none := th("u_1", "th_1")
	pageB, _, _ := b.Open(inB, "tokB")
	pageNone, _, _ := b.Open(none, "tokNone")
	defer pageB.Close()
	defer pageNone.Close()

	done := startIn(t, context.Background(), b, clk, inA, "c1")
	for _, who := range []Thread{inB, none} {
		late, offers, _ := b.Open(who, "late"+who.Install)
		late.Close()
		if len(offers) != 0 {
			t.Errorf("a stream of %+v lists %+v", who, offers)
		}
		if err := b.Claim(who, "c1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim as %+v: %v, want ErrNotFound", who, err)
		}
		if err := b.Post(who, "c1", Outcome{Result: jsontext.Value(`"stolen"`)}); !errors.Is(err, ErrNotFound) {
			t.Errorf("post as %+v: %v, want ErrNotFound", who, err)
		}
	}
	if got := append(drain(pageB), drain(pageNone)...); len(got) != 0 {
		t.Errorf("the other installations' streams got %v", got)
	}
	pageA, offers, _ := b.Open(inA, "tokA")
	defer pageA.Close()
	if got := offerIDs(offers); !equal(got, []string{"c1"}) {
		t.Fatalf("A's page lists %v", got)
	}
	if err := b.Claim(inA, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Post(inA, "c1", Outcome{Result: jsontext.Value(`"a"`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `"a"` {
		t.Errorf("A's call: %+v", r)
	}
}

// TestFinishedForgotten: a call that timed out frees everything, answers
// 409 for keepFinished, then is forgotten.
func TestFinishedForgotten(t *testing.T) {
	b := NewBridge()
	clk := newFakeClock(b)
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	notYet(t, done)
	counts(t, b, 1, 0)

	clk.fireAll()
	if r := wait(t, done); !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("Run: %+v, want ErrTimeout", r)
	}
	counts(t, b, 0, 0)
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim after the timeout: %v, want ErrConflict", err)
	}
	r := local(b)
	b.mu.Lock()
	r.mu.Lock()
	if len(b.threads) != 0 || len(r.threads) != 0 || r.calls[callKey{th("u_1", "th_1"), "c1"}].offer.Input != nil {
		t.Error("a finished call still holds its thread or its input")
	}
	r.mu.Unlock()
	b.mu.Unlock()

	clk.Add(keepFinished + time.Second)
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim past keepFinished: %v, want ErrNotFound", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b.calls) != 0 || len(r.calls) != 0 || len(r.ended) != 0 || len(b.threads) != 0 || len(r.threads) != 0 || b.waiting != 0 {
		t.Errorf("left: %d calls (%d in the relay), %d ended, %d threads (%d in the relay), %d waiting",
			len(b.calls), len(r.calls), len(r.ended), len(b.threads), len(r.threads), b.waiting)
	}
}

// TestForgetFinishedBeyondPending: the finished calls the in-process
// relay remembers for 409 are bounded (by DefaultPending), oldest
// forgotten first.
func TestForgetFinishedBeyondPending(t *testing.T) {
	b := NewBridgeOn(newLocalRelay(clock.Real, 2))
	clk := newFakeClock(b)
	for _, id := range []string{"c1", "c2", "c3"} {
		done := start(t, context.Background(), b, clk, "u_1", "th_1", id)
		if err := b.Post(th("u_1", "th_1"), id, Outcome{}); err != nil {
			t.Fatal(err)
		}
		wait(t, done)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest finished call: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"c2", "c3"} {
		if err := b.Claim(th("u_1", "th_1"), id); !errors.Is(err, ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", id, err)
		}
	}
}

// TestRerunOutlivesItsFirstRun: an id run again after it finished is not
// forgotten when its first run expires.
func TestRerunOutlivesItsFirstRun(t *testing.T) {
	b := NewBridge()
	clk := newFakeClock(b)
	done := start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	clk.fireAll()
	wait(t, done)
	clk.Add(time.Minute)
	done = start(t, context.Background(), b, clk, "u_1", "th_1", "c1")
	clk.Add(keepFinished)
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("the second run, once the first expired: %v", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil {
		t.Error(r.err)
	}
}
