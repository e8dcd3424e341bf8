package clienttools

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
)

// These tests run two bridges on one real Redis, each with its own client,
// as two gateway instances would.

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: 1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisOf is b's Redis relay.
func redisOf(b *Bridge) *redisRelay { return b.relay.(*redisRelay) }

// instance is a bridge on Redis with a fake timer, as one gateway instance.
func instance(t *testing.T, addr, prefix string, beat time.Duration) (*Bridge, *fakeClock) {
	t.Helper()
	r, err := newRedisRelay(context.Background(), redisClient(t, addr), prefix, nil, beat)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBridgeOn(r)
	t.Cleanup(func() { r.Close() })
	return b, newFakeClock(b)
}

func twoInstances(t *testing.T) (a, b *Bridge, clkA *fakeClock, rs *redistest.Server) {
	rs = redistest.Start(t)
	a, clkA = instance(t, rs.Addr, "tg:", streamBeat)
	b, _ = instance(t, rs.Addr, "tg:", streamBeat)
	return a, b, clkA, rs
}

// next waits for the stream's next offer.
func next(t *testing.T, s *Stream) Offer {
	t.Helper()
	select {
	case o := <-s.C:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("no offer reached the stream")
		return Offer{}
	}
}

func TestRedisCallAcrossInstances(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	early, offers := open(t, b, "u_1", "th_1")
	defer early.Close()
	if len(offers) != 0 {
		t.Fatalf("a new thread lists %+v", offers)
	}

	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	if o := next(t, early); o.CallID != "c1" || string(o.Input) != `{"q":"x"}` || o.Name != "where" {
		t.Fatalf("B's stream got %+v", o)
	}
	// A stream opened on B now lists it, and a second call after it.
	done2 := start(t, context.Background(), a, clkA, "u_1", "th_1", "c2")
	late, offers := open(t, b, "u_1", "th_1")
	defer late.Close()
	if got := offerIDs(offers); !equal(got, []string{"c1", "c2"}) {
		t.Fatalf("Open on B lists %v, want [c1 c2] oldest first", got)
	}

	// The first claim anywhere wins.
	if err := a.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("claim on A: %v", err)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Fatalf("second claim on B: %v, want ErrConflict", err)
	}
	if err := b.Claim(th("u_1", "th_1"), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim of an unknown call: %v, want ErrNotFound", err)
	}
	s, offers := open(t, b, "u_1", "th_1")
	s.Close()
	if got := offerIDs(offers); !equal(got, []string{"c2"}) {
		t.Errorf("after the claim Open lists %v, want [c2]", got)
	}

	// The result posted on B wakes Run on A, its text as the page wrote it.
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`{"a": "<b>&"}`)}); err != nil {
		t.Fatalf("post on B: %v", err)
	}
	r := wait(t, done)
	if r.err != nil || string(r.out.Result) != `{"a": "<b>&"}` {
		t.Fatalf("Run on A: %+v %s", r, r.out.Result)
	}
	if err := a.Post(th("u_1", "th_1"), "c1", Outcome{}); !errors.Is(err, ErrConflict) {
		t.Errorf("second post, on A: %v, want ErrConflict", err)
	}
	if err := a.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim of an answered call: %v, want ErrConflict", err)
	}

	// An error and undefined travel as themselves.
	if err := b.Post(th("u_1", "th_1"), "c2", Outcome{Error: strp("boom")}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done2); r.err != nil || r.out.Error == nil || *r.out.Error != "boom" || r.out.Result != nil {
		t.Fatalf("Run of c2: %+v", r)
	}
	done3 := start(t, context.Background(), a, clkA, "u_1", "th_1", "c3")
	if err := b.Post(th("u_1", "th_1"), "c3", Outcome{}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done3); r.err != nil || r.out.Error != nil || r.out.Result != nil {
		t.Fatalf("Run of c3: %+v", r)
	}
}

func TestRedisPostOnTheRunningInstance(t *testing.T) {
	a, _, clkA, _ := twoInstances(t)
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	if err := a.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`7`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != "7" {
		t.Fatalf("Run: %+v", r)
	}
}

func TestRedisTimeoutFinishesEverywhere(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	clkA.fireAll()
	if r := wait(t, done); !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("Run on A after its timer: %+v, want ErrTimeout", r)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim on B after the timeout: %v, want ErrConflict", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); !errors.Is(err, ErrConflict) {
		t.Errorf("post on B after the timeout: %v, want ErrConflict", err)
	}
	s, offers := open(t, b, "u_1", "th_1")
	s.Close()
	if len(offers) != 0 {
		t.Errorf("a timed-out call is listed: %+v", offers)
	}
}

// TestRedisResultBeatsTimer: a result posted on B before A's timer fires
// wins even when its message has not reached A yet.
func TestRedisResultBeatsTimer(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	// The result is in Redis but A does not hear of it: its message is
	// dropped as another instance's would be while A's link was down.
	k := callKey{th("u_1", "th_1"), "c1"}
	won, _, err := b.relay.finish(context.Background(), k, &Outcome{Result: jsontext.Value(`"late"`)})
	if err != nil || !won {
		t.Fatalf("finish on B: %v %v", won, err)
	}
	clkA.fireAll()
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `"late"` {
		t.Fatalf("Run on A: %+v, want the result posted first", r)
	}
}

func TestRedisRunSameIDOnTwoInstances(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	_, err := b.Run(context.Background(), th("u_1", "th_1"), Offer{CallID: "c1"}, time.Second)
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Fatalf("the same call waiting on B: %v, want refused", err)
	}
	clkA.fireAll()
	wait(t, done)
}

func TestRedisLapseAcrossInstances(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	onA, _ := open(t, a, "u_1", "th_1")
	onB, _ := open(t, b, "u_1", "th_1")
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	next(t, onB)
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatal(err)
	}

	// A's stream is still open: the claim holds.
	onB.Close()
	if err := a.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim while a stream is open on A: %v, want ErrConflict", err)
	}
	s, offers := open(t, b, "u_1", "th_1")
	s.Close()
	if len(offers) != 0 {
		t.Fatalf("a claimed call is listed while A's stream is open: %+v", offers)
	}

	// A's closes too: no stream is left anywhere, the claim lapses at
	// once: a claim then wins.
	onA.Close()
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("claim after the last stream closed: %v", err)
	}
	// A claim made with no stream open holds when one opens, and lapses
	// when that one closes; the next stream gets the call again.
	s, offers = open(t, a, "u_1", "th_1")
	if len(offers) != 0 {
		t.Fatalf("a call claimed with no stream open is listed: %+v", offers)
	}
	s.Close()
	again, offers := open(t, b, "u_1", "th_1")
	defer again.Close()
	if got := offerIDs(offers); !equal(got, []string{"c1"}) {
		t.Fatalf("after every stream closed Open lists %v, want [c1]", got)
	}
	if err := a.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatalf("claim after the lapse: %v", err)
	}
	clkA.fireAll()
	wait(t, done)
}

// TestRedisDeadInstanceLapses: an instance that dies with a stream open
// does not keep its thread streamed: once its heartbeat expires, the next
// stream opened finds no live one and the claims lapse.
func TestRedisDeadInstanceLapses(t *testing.T) {
	rs := redistest.Start(t)
	a, clkA := instance(t, rs.Addr, "tg:", streamBeat)
	const beat = 100 * time.Millisecond
	b, _ := instance(t, rs.Addr, "tg:", beat)
	onB, _ := open(t, b, "u_1", "th_1")
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	next(t, onB)
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatal(err)
	}
	// While B lives, its stream counts.
	s, offers := open(t, a, "u_1", "th_1")
	s.Close()
	if len(offers) != 0 {
		rb := redisOf(b)
		counts, _ := rb.client.HGetAll(context.Background(), rb.threadKey(th("u_1", "th_1"))+":s").Result()
		live, _ := rb.client.PTTL(context.Background(), rb.liveKey()).Result()
		t.Fatalf("listed while B's stream is open: %+v (counts %v, B is %s, its heartbeat's ttl %v)", offers, counts, rb.id, live)
	}

	// B dies: its heartbeat stops, its stream is never closed.
	r := redisOf(b)
	r.closeOnce.Do(func() {
		r.cancel()
		r.pubsub.Close()
		r.done.Wait()
	})
	time.Sleep(3*beat + 200*time.Millisecond)

	s, offers = open(t, a, "u_1", "th_1")
	defer s.Close()
	if got := offerIDs(offers); !equal(got, []string{"c1"}) {
		t.Fatalf("after B died Open on A lists %v, want [c1]", got)
	}
	clkA.fireAll()
	wait(t, done)
}

func TestRedisIsolation(t *testing.T) {
	a, b, clkA, rs := twoInstances(t)
	other, _ := instance(t, rs.Addr, "other:", streamBeat)
	mine, _ := open(t, b, "ab", "c")
	otherPrefix, _ := open(t, other, "ab", "c")
	defer mine.Close()
	defer otherPrefix.Close()

	// Calls of another user with the same thread, the same user in
	// another thread, and a pair that concatenates the same.
	var runs []<-chan runResult
	for _, ut := range [][2]string{{"zz", "c"}, {"ab", "d"}, {"a", "bc"}} {
		runs = append(runs, start(t, context.Background(), a, clkA, ut[0], ut[1], "c-"+ut[0]+ut[1]))
	}
	runs = append(runs, start(t, context.Background(), a, clkA, "ab", "c", "own"))
	// Offers travel in order: the stream's first is its own.
	if o := next(t, mine); o.CallID != "own" {
		t.Fatalf("the stream of (ab, c) got %+v", o)
	}
	for _, id := range []string{"c-zzc", "c-abd", "c-abc"} {
		if err := b.Claim(th("ab", "c"), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim of another thread's %s: %v, want ErrNotFound", id, err)
		}
		if err := b.Post(th("ab", "c"), id, Outcome{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("post to another thread's %s: %v, want ErrNotFound", id, err)
		}
	}
	_, offers := open(t, b, "ab", "c")
	if got := offerIDs(offers); !equal(got, []string{"own"}) {
		t.Errorf("Open of (ab, c) lists %v", got)
	}

	// Another prefix on the same server sees nothing.
	select {
	case o := <-otherPrefix.C:
		t.Errorf("a bridge with another prefix got %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	if err := other.Claim(th("ab", "c"), "own"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim under another prefix: %v, want ErrNotFound", err)
	}
	_, offers = open(t, other, "ab", "c")
	if len(offers) != 0 {
		t.Errorf("Open under another prefix lists %+v", offers)
	}
	clkA.fireAll()
	for _, r := range runs {
		wait(t, r)
	}
}

// TestRedisInstallsApart: across instances, a page of another
// installation with the same user and thread ids sees, claims and answers
// none of a call, which its own installation's page answers; and the keys
// of two Threads whose texts concatenate alike differ.
func TestRedisInstallsApart(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	inA := Thread{User: "u_1", Install: "in_a", ID: "th_1"}
	inB := Thread{User: "u_1", Install: "in_b", ID: "th_1"}
	pageB, _, err := b.Open(inB, "tokB")
	if err != nil {
		t.Fatal(err)
	}
	defer pageB.Close()
	pageNone, _ := open(t, b, "u_1", "th_1")
	defer pageNone.Close()

	done := startIn(t, context.Background(), a, clkA, inA, "c1")
	pageA, offers, err := b.Open(inA, "tokA")
	if err != nil {
		t.Fatal(err)
	}
	defer pageA.Close()
	if got := offerIDs(offers); !equal(got, []string{"c1"}) {
		t.Fatalf("A's page on B lists %v", got)
	}
	for _, who := range []Thread{inB, th("u_1", "th_1")} {
		if err := b.Claim(who, "c1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim as %+v: %v, want ErrNotFound", who, err)
		}
		if err := b.Post(who, "c1", Outcome{Result: jsontext.Value(`"stolen"`)}); !errors.Is(err, ErrNotFound) {
			t.Errorf("post as %+v: %v, want ErrNotFound", who, err)
		}
		s, offers, err := b.Open(who, "late"+who.Install)
		if err != nil || len(offers) != 0 {
			t.Errorf("a stream of %+v lists %+v (%v)", who, offers, err)
		}
		s.Close()
	}
	for _, s := range []*Stream{pageB, pageNone} {
		select {
		case o := <-s.C:
			t.Errorf("another installation's stream got %+v", o)
		case <-time.After(50 * time.Millisecond):
		}
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

	keys := map[string]Thread{}
	for _, tk := range []Thread{
		{User: "a:b", Install: "c", ID: "t"}, {User: "a", Install: "b:c", ID: "t"},
		{User: "ab", Install: "c", ID: "t"}, {User: "a", Install: "bc", ID: "t"},
		{User: "a", Install: "b", ID: "ct"}, {User: "a", ID: "bct"}, {User: "a", Install: "1:b", ID: "t"},
	} {
		k := redisOf(a).threadKey(tk)
		if other, dup := keys[k]; dup {
			t.Errorf("%+v and %+v share the key %s", tk, other, k)
		}
		keys[k] = tk
	}
}

// TestRedisCallerGone: a call whose caller goes away while no instance
// has a stream of its thread open is dropped at once, everywhere; one kept
// for a stream open on another instance is answered from there, or
// dropped when that stream, the thread's last, closes.
func TestRedisCallerGone(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	defer clkA.fireAll()

	ctx, cancel := context.WithCancel(context.Background())
	done := start(t, ctx, a, clkA, "u_1", "th_1", "c1")
	cancel()
	if r := wait(t, done); !errors.Is(r.err, ErrCallerGone) {
		t.Fatalf("Run with no stream open: %+v, want ErrCallerGone", r)
	}
	counts(t, a, 0, 0)
	page, offers := open(t, b, "u_1", "th_1")
	if len(offers) != 0 {
		t.Errorf("a stream opened later lists %+v", offers)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("claim of the dropped call: %v, want ErrConflict", err)
	}

	// Kept for the stream on B, which answers it.
	ctx, cancel = context.WithCancel(context.Background())
	done = start(t, ctx, a, clkA, "u_1", "th_1", "c2")
	next(t, page)
	cancel()
	notYet(t, done)
	answerKept(t, b, "c2", `"kept"`, done)

	// Kept and claimed, then the thread's last stream closes on B: A's
	// Run ends at once, and its place is free.
	ctx, cancel = context.WithCancel(context.Background())
	done = start(t, ctx, a, clkA, "u_1", "th_1", "c3")
	stays := start(t, context.Background(), a, clkA, "u_1", "th_1", "c4")
	next(t, page)
	next(t, page)
	if err := b.Claim(th("u_1", "th_1"), "c3"); err != nil {
		t.Fatal(err)
	}
	cancel()
	notYet(t, done)
	page.Close()
	if r := wait(t, done); !errors.Is(r.err, ErrCallerGone) {
		t.Fatalf("Run once the last stream closed: %+v, want ErrCallerGone", r)
	}
	counts(t, a, 1, 0)
	again, offers := open(t, b, "u_1", "th_1")
	defer again.Close()
	if got := offerIDs(offers); !equal(got, []string{"c4"}) {
		t.Errorf("the next stream lists %v, want [c4]", got)
	}
	notYet(t, stays)
}

// TestRedisRestart: while Redis is down the bridge's operations fail with
// ErrUnavailable; when it is back (empty: it kept nothing) a call waiting
// on A and a stream open on B are written back, and the call is answered.
func TestRedisRestart(t *testing.T) {
	a, b, clkA, rs := twoInstances(t)
	onB, _ := open(t, b, "u_1", "th_1")
	defer onB.Close()
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	next(t, onB)

	rs.Stop()
	if _, err := a.Run(context.Background(), th("u_1", "th_1"), Offer{CallID: "c2"}, time.Second); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Run while Redis is down: %v, want ErrUnavailable", err)
	}
	if err := b.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Claim while Redis is down: %v, want ErrUnavailable", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Post while Redis is down: %v, want ErrUnavailable", err)
	}
	if _, _, err := b.Open(th("u_1", "th_1"), "tok"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open while Redis is down: %v, want ErrUnavailable", err)
	}
	if _, streams := b.Waiting(); streams != 1 {
		t.Errorf("a stream that failed to open is counted: %d open", streams)
	}

	rs.Restart(t)
	// A writes c1 back once its subscription is back.
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = b.Claim(th("u_1", "th_1"), "c1"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("claim after Redis came back: %v", err)
	}
	// B writes its stream count back once its own subscription is back;
	// then closing another stream lapses nothing.
	rb := redisOf(b)
	streams := rb.threadKey(th("u_1", "th_1")) + ":s"
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, _ := rb.client.HGet(context.Background(), streams, rb.id).Int(); n == 1 {
			break
		}
	}
	s, _ := open(t, b, "u_1", "th_1")
	s.Close()
	if err := a.Claim(th("u_1", "th_1"), "c1"); !errors.Is(err, ErrConflict) {
		t.Errorf("the claim lapsed while B's first stream is open: %v", err)
	}
	if err := b.Post(th("u_1", "th_1"), "c1", Outcome{Result: jsontext.Value(`"back"`)}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || string(r.out.Result) != `"back"` {
		t.Fatalf("Run on A: %+v", r)
	}
}

func TestRedisOutcomeEncoding(t *testing.T) {
	for _, o := range []Outcome{{}, {Result: jsontext.Value(`null`)}, {Result: jsontext.Value(` [1, "\u003c"] `)}, {Error: strp("")}, {Error: strp("e\xff")}} {
		got, err := decodeOutcome(encodeOutcome(o))
		if err != nil || string(got.Result) != string(o.Result) || (got.Error == nil) != (o.Error == nil) || (o.Error != nil && *got.Error != *o.Error) {
			t.Errorf("%+v came back as %+v, %v", o, got, err)
		}
	}
	for _, s := range []string{"", "x", "{}"} {
		if _, err := decodeOutcome(s); err == nil {
			t.Errorf("decodeOutcome(%q) took it", s)
		}
	}
}

// TestRedisResyncDeliversMissedOffers: an offer whose message an instance
// missed (its subscription was down) reaches its open streams when the
// subscription comes back.
func TestRedisResyncDeliversMissedOffers(t *testing.T) {
	a, b, _, _ := twoInstances(t)
	onB, _ := open(t, b, "u_1", "th_1")
	defer onB.Close()
	// A call recorded as A's offer records it, its message lost.
	k := callKey{th("u_1", "th_1"), "c1"}
	r := redisOf(a)
	data, _ := json.Marshal(Offer{CallID: "c1", Name: "where"})
	tkey := r.threadKey(k.Thread)
	err := offerScript.Run(context.Background(), r.client, []string{r.callKey(k), tkey + ":w", r.prefix + "seq"},
		data, ms(time.Minute), r.prefix+"nowhere", "{}", "c1", "new").Err()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-onB.C:
		t.Fatalf("offer without a message reached the stream: %+v", o)
	case <-time.After(50 * time.Millisecond):
	}
	redisOf(b).resync()
	if o := next(t, onB); o.CallID != "c1" {
		t.Fatalf("after the resync B's stream got %+v", o)
	}
}

// TestRedisStaleCountAfterOutage: a stream closed while Redis was down
// could not be counted closed; when Redis is back (with its data) the
// instance writes its count back, and the claims of the thread, left with
// no stream, lapse.
func TestRedisStaleCountAfterOutage(t *testing.T) {
	rs := redistest.StartPersistent(t)
	a, clkA := instance(t, rs.Addr, "tg:", streamBeat)
	b, _ := instance(t, rs.Addr, "tg:", streamBeat)
	onB, _ := open(t, b, "u_1", "th_1")
	done := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	next(t, onB)
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	onB.Close()
	rs.Restart(t)

	var offers []Offer
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && len(offers) == 0; time.Sleep(100 * time.Millisecond) {
		var s *Stream
		var err error
		if s, offers, err = a.Open(th("u_1", "th_1"), "tok"); err == nil {
			s.Close()
		}
	}
	if got := offerIDs(offers); !equal(got, []string{"c1"}) {
		t.Fatalf("after B wrote its count back Open on A lists %v, want [c1]", got)
	}
	clkA.fireAll()
	wait(t, done)
}

// TestRedisLateOfferMessage: the message of an offer made before a stream
// opened, arriving late, does not bring the stream a call it did not list
// (claimed meanwhile) nor one it listed; a later offer's does.
func TestRedisLateOfferMessage(t *testing.T) {
	a, b, clkA, _ := twoInstances(t)
	first, _ := open(t, b, "u_1", "th_1")
	defer first.Close()
	done1 := start(t, context.Background(), a, clkA, "u_1", "th_1", "c1")
	done2 := start(t, context.Background(), a, clkA, "u_1", "th_1", "c2")
	next(t, first)
	next(t, first)
	if err := b.Claim(th("u_1", "th_1"), "c1"); err != nil {
		t.Fatal(err)
	}
	s, offers := open(t, b, "u_1", "th_1")
	defer s.Close()
	if got := offerIDs(offers); !equal(got, []string{"c2"}) {
		t.Fatalf("Open lists %v, want [c2]", got)
	}
	tk := th("u_1", "th_1")
	b.deliver(tk, Offer{CallID: "c1"}, 1)
	b.deliver(tk, Offer{CallID: "c2"}, 2)
	done3 := start(t, context.Background(), a, clkA, "u_1", "th_1", "c3")
	if o := next(t, s); o.CallID != "c3" {
		t.Fatalf("the stream got %+v, want c3 (offered after it opened)", o)
	}
	clkA.fireAll()
	for _, d := range []<-chan runResult{done1, done2, done3} {
		wait(t, d)
	}
}

// BenchmarkClientCallRoundTrip runs one client call end to end: offered,
// delivered to a stream, claimed, answered. "memory" is one instance;
// "redis" offers on A and answers from a stream on B.
func BenchmarkClientCallRoundTrip(b *testing.B) {
	run := func(b *testing.B, on, page *Bridge) {
		s, _, err := page.Open(th("u_1", "th_1"), "tok")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		go func() {
			for o := range s.C {
				if page.Claim(th("u_1", "th_1"), o.CallID) == nil {
					_ = page.Post(th("u_1", "th_1"), o.CallID, Outcome{Result: jsontext.Value(`1`)})
				}
			}
		}()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := on.Run(context.Background(), th("u_1", "th_1"), Offer{CallID: strconv.Itoa(i), Name: "n", Input: jsontext.Value(`{}`)}, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		br := NewBridge()
		run(b, br, br)
	})
	b.Run("redis", func(b *testing.B) {
		rs := redistest.Start(b)
		newOne := func() *Bridge {
			c := redis.NewClient(&redis.Options{Addr: rs.Addr})
			b.Cleanup(func() { c.Close() })
			r, err := NewRedisRelay(context.Background(), c, "tg:", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { r.Close() })
			br := NewBridgeOn(r)
			return br
		}
		run(b, newOne(), newOne())
	})
}
