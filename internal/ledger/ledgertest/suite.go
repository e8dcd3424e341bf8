// Package ledgertest is the ledger's conformance suite: the contract
// every back end of ledger.Ledger meets (Run), for the back ends' own
// tests. A ledger is known Done when it passes Run.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/result"
)

// Patience bounds every wait in the suite: far more than any step needs,
// so that hitting it means a wake-up was lost.
const Patience = 10 * time.Second

// NewCall is a Running call under a key unique to the test.
func NewCall(t *testing.T, id string) *ledger.Call {
	t.Helper()
	now := time.Now().UTC().Round(0)
	return &ledger.Call{
		Key:     ledger.Key("user-1", "install-1", t.Name()+"/"+id),
		CallID:  id,
		Tool:    "ping",
		User:    "user-1",
		Install: "install-1",
		Digest:  ledger.InputDigest(map[string]any{"id": id}),
		State:   ledger.Running,
		Owner:   "instance-a",
		Created: now,
		Updated: now,
	}
}

// Done is c finished with a result.
func Done(c *ledger.Call, content string) *ledger.Call {
	d := *c
	d.State = ledger.Done
	d.Result = &result.Result{Content: content}
	d.Updated = d.Updated.Add(time.Second)
	return &d
}

// MustCreate creates c in l, failing the test if it is not created.
func MustCreate(t *testing.T, l ledger.Ledger, c *ledger.Call) {
	t.Helper()
	existing, created, err := l.Create(context.Background(), c)
	if err != nil || !created || existing != nil {
		t.Fatalf("Create(%q) = %v, %v, %v; want nil, true, nil", c.Key, existing, created, err)
	}
}

// WaitResult is what a Wait in a goroutine returned.
type WaitResult struct {
	Call *ledger.Call
	Err  error
}

// WaitAsync runs Wait in a goroutine.
func WaitAsync(ctx context.Context, l ledger.Ledger, key string, state ledger.State) <-chan WaitResult {
	ch := make(chan WaitResult, 1)
	go func() {
		c, err := l.Wait(ctx, key, state)
		ch <- WaitResult{c, err}
	}()
	return ch
}

// Receive takes a Wait's result, failing the test if none comes in time.
func Receive(t *testing.T, ch <-chan WaitResult) WaitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(Patience):
		t.Fatalf("Wait did not return within %s", Patience)
		return WaitResult{}
	}
}

// StillWaiting fails the test if a Wait returned on its own.
func StillWaiting(t *testing.T, ch <-chan WaitResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Wait returned before any change: %+v, %v", r.Call, r.Err)
	case <-time.After(100 * time.Millisecond):
	}
}

// Run is the contract every back end meets. open returns a fresh,
// empty ledger and closes it when the test ends.
func Run(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ctx := context.Background()

	t.Run("create new then existing", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		MustCreate(t, l, c)

		again := *c
		again.Owner = "instance-b"
		again.State = ledger.AwaitingClient
		again.Digest = "other"
		existing, created, err := l.Create(ctx, &again)
		if err != nil || created {
			t.Fatalf("second Create = %v, %v; want created=false and no error", created, err)
		}
		if !reflect.DeepEqual(existing, c) {
			t.Fatalf("second Create returned %+v; want the first call %+v", existing, c)
		}
		got, err := l.Get(ctx, c.Key)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("Get after second Create = %+v, %v; want the first call unchanged", got, err)
		}
	})

	t.Run("create refuses a call that is not in flight", func(t *testing.T) {
		l := open(t)
		c := Done(NewCall(t, "1"), "x")
		if _, created, err := l.Create(ctx, c); err == nil || created {
			t.Fatalf("Create of a Done call = %v, %v; want an error", created, err)
		}
		if _, err := l.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("refused Create wrote something: Get = %v", err)
		}
	})

	t.Run("get missing", func(t *testing.T) {
		l := open(t)
		got, err := l.Get(ctx, ledger.Key("u", "i", "missing"))
		if !errors.Is(err, ledger.ErrNotFound) || got != nil {
			t.Fatalf("Get(missing) = %+v, %v; want ErrNotFound", got, err)
		}
	})

	t.Run("update compare and swap", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		MustCreate(t, l, c)

		d := Done(c, "first")
		got, err := l.Update(ctx, d, ledger.Running)
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("Update(running→Done) = %+v, %v; want %+v", got, err, d)
		}
		if stored, err := l.Get(ctx, c.Key); err != nil || !reflect.DeepEqual(stored, d) {
			t.Fatalf("Get after Update = %+v, %v; want %+v", stored, err, d)
		}

		// A second writer that still believes the call is running loses
		// and learns what the winner wrote.
		late := Done(c, "second")
		cur, err := l.Update(ctx, late, ledger.Running)
		if !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("stale Update error = %v; want ErrConflict", err)
		}
		if !reflect.DeepEqual(cur, d) {
			t.Fatalf("stale Update returned %+v; want the stored call %+v", cur, d)
		}
		if stored, _ := l.Get(ctx, c.Key); stored == nil || stored.Result.Content != "first" {
			t.Fatalf("stale Update changed the call: %+v", stored)
		}
	})

	t.Run("update missing", func(t *testing.T) {
		l := open(t)
		c := Done(NewCall(t, "1"), "x")
		got, err := l.Update(ctx, c, ledger.Running)
		if !errors.Is(err, ledger.ErrNotFound) || got != nil {
			t.Fatalf("Update(missing) = %+v, %v; want ErrNotFound", got, err)
		}
		if _, err := l.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Update of a missing call created it: Get = %v", err)
		}
	})

	t.Run("wait returns at once when the state differs", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		MustCreate(t, l, c)
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		got, err := l.Wait(wctx, c.Key, ledger.AwaitingClient)
		if err != nil || got.State != ledger.Running {
			t.Fatalf("Wait(not awaiting_client) = %+v, %v; want the running call at once", got, err)
		}
		if _, err := l.Wait(wctx, ledger.Key("u", "i", "missing"), ledger.Running); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Wait(missing) = %v; want ErrNotFound", err)
		}
	})

	t.Run("wait wakes on update", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		MustCreate(t, l, c)
		ch := WaitAsync(ctx, l, c.Key, ledger.Running)
		StillWaiting(t, ch)

		d := Done(c, "woken")
		if _, err := l.Update(ctx, d, ledger.Running); err != nil {
			t.Fatal(err)
		}
		r := Receive(t, ch)
		if r.Err != nil || !reflect.DeepEqual(r.Call, d) {
			t.Fatalf("Wait = %+v, %v; want %+v", r.Call, r.Err, d)
		}
	})

	// An Update that lands between a waiter's registration and its first
	// read must still wake it; racing them many times finds a lost
	// wake-up as a Wait that never returns.
	t.Run("wait racing update", func(t *testing.T) {
		l := open(t)
		for i := range 100 {
			c := NewCall(t, fmt.Sprint(i))
			MustCreate(t, l, c)
			ch := WaitAsync(ctx, l, c.Key, ledger.Running)
			if _, err := l.Update(ctx, Done(c, "x"), ledger.Running); err != nil {
				t.Fatal(err)
			}
			if r := Receive(t, ch); r.Err != nil || r.Call.State != ledger.Done {
				t.Fatalf("call %d: Wait = %+v, %v; want Done", i, r.Call, r.Err)
			}
		}
	})

	t.Run("wait honours cancel", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		MustCreate(t, l, c)
		wctx, cancel := context.WithCancel(ctx)
		ch := WaitAsync(wctx, l, c.Key, ledger.Running)
		StillWaiting(t, ch)
		cancel()
		if r := Receive(t, ch); !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("Wait after cancel = %+v, %v; want context.Canceled", r.Call, r.Err)
		}
	})

	t.Run("concurrent create", func(t *testing.T) {
		l := open(t)
		base := NewCall(t, "1")
		const n = 50
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			created = make([]bool, n)
			seen    = make([]*ledger.Call, n)
			errs    = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				c := *base
				c.Owner = fmt.Sprint("owner-", i)
				<-start
				seen[i], created[i], errs[i] = l.Create(ctx, &c)
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Create %d: %v", i, errs[i])
			}
			if created[i] {
				if winner >= 0 {
					t.Fatalf("Creates %d and %d both recorded the call", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no Create recorded the call")
		}
		want := fmt.Sprint("owner-", winner)
		for i := range n {
			if i != winner && (seen[i] == nil || seen[i].Owner != want) {
				t.Fatalf("Create %d saw %+v; want the winner's call (owner %s)", i, seen[i], want)
			}
		}
		if got, err := l.Get(ctx, base.Key); err != nil || got.Owner != want {
			t.Fatalf("Get = %+v, %v; want owner %s", got, err, want)
		}
	})

	t.Run("every field round-trips", func(t *testing.T) {
		l := open(t)
		at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
		c := &ledger.Call{
			Key:      ledger.Key("user-1", "install-1", t.Name()),
			CallID:   "call-1",
			Tool:     "bookmarks.add",
			User:     "user-1",
			Install:  "install-1",
			Source:   "chat",
			ThreadID: "thread-9",
			Digest:   ledger.InputDigest(map[string]any{"url": "https://a.example/?x=1&y=<2>"}),
			State:    ledger.AwaitingClient,
			Owner:    "instance-a",
			Deadline: at.Add(2 * time.Minute),
			Created:  at,
			Updated:  at.Add(time.Millisecond),
		}
		MustCreate(t, l, c)
		if got, err := l.Get(ctx, c.Key); err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("Get after Create =\n%+v, %v; want\n%+v", got, err, c)
		}

		full := *c
		full.State = ledger.ActionRequired
		full.Card = jsontext.Value(`{"type":"confirm","title":"Add <b>it</b> & go?","buttons":[{"id":"ok","n":1.5e3}],"nested":{"a":null}}`)
		full.Result = &result.Result{IsError: true, Content: "c ✓", Markdown: "**m** <i>", EmbedURL: "https://a.example/e?a=1&b=2", Card: result.CardEmbed}
		full.Resume = &ledger.Resume{ButtonID: "ok", Action: "skip", Device: "phone-1"}
		full.Updated = at.Add(time.Hour)
		if _, err := l.Update(ctx, &full, ledger.AwaitingClient); err != nil {
			t.Fatal(err)
		}
		got, err := l.Get(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Card) != string(full.Card) {
			t.Fatalf("card came back as\n%s\nwant\n%s", got.Card, full.Card)
		}
		if !reflect.DeepEqual(got, &full) {
			t.Fatalf("Get after Update =\n%+v\nwant\n%+v", got, &full)
		}
	})

	t.Run("zero times are stamped", func(t *testing.T) {
		l := open(t)
		c := NewCall(t, "1")
		c.Created, c.Updated = time.Time{}, time.Time{}
		before := time.Now()
		MustCreate(t, l, c)
		got, err := l.Get(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Created.Before(before.Add(-time.Second)) || got.Updated.Before(before.Add(-time.Second)) {
			t.Fatalf("zero times stored as %v, %v; want about %v", got.Created, got.Updated, before)
		}
	})

	t.Run("spend once", func(t *testing.T) {
		Spend(t, open(t))
	})

	t.Run("max result size", func(t *testing.T) {
		maxResultSize(t, ledger.LimitResults(open(t), 2048))
	})
}

// maxResultSize: a result whose JSON is at most the limit is kept
// whole; one larger is recorded as an error result that names both sizes,
// read so by a Get and by a waiter, and the call is still Done (a repeat
// is not run). Escapes count: JSON writes a control character as 6 bytes.
func maxResultSize(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	// {"isError":false,"content":""} is 30 bytes of the 2048.
	for _, tc := range []struct {
		name    string
		content string
		size    int // of the JSON, when over
	}{
		{"at the limit", strings.Repeat("x", 2048-30), 0},
		{"a byte over", strings.Repeat("x", 2048-29), 2049},
		{"escapes over", strings.Repeat("\x01", 400), 30 + 6*400},
	} {
		c := NewCall(t, tc.name)
		MustCreate(t, l, c)
		waiting := WaitAsync(ctx, l, c.Key, ledger.Running)
		if _, err := l.Update(ctx, Done(c, tc.content), ledger.Running); err != nil {
			t.Fatalf("%s: Update: %v", tc.name, err)
		}
		got, err := l.Get(ctx, c.Key)
		if err != nil {
			t.Fatalf("%s: Get: %v", tc.name, err)
		}
		w := Receive(t, waiting)
		if w.Err != nil || !reflect.DeepEqual(w.Call, got) {
			t.Errorf("%s: waiter got %+v, %v; want %+v", tc.name, w.Call, w.Err, got)
		}
		if got.State != ledger.Done || got.Result == nil {
			t.Fatalf("%s: stored %+v; want Done with a result", tc.name, got)
		}
		if tc.size == 0 {
			if got.Result.IsError || got.Result.Content != tc.content {
				t.Errorf("%s: result kept as %.60q (error %v); want it whole", tc.name, got.Result.Content, got.Result.IsError)
			}
			continue
		}
		want := fmt.Sprintf("result too large to replay: the call ran once and answered %d bytes, more than the ledger keeps (max_result_size 2048 bytes)", tc.size)
		if !got.Result.IsError || !strings.HasPrefix(got.Result.Content, want) {
			t.Errorf("%s: result kept as %.200q (error %v); want an error result starting %q", tc.name, got.Result.Content, got.Result.IsError, want)
		}
		if existing, created, err := l.Create(ctx, NewCall(t, tc.name)); err != nil || created || !reflect.DeepEqual(existing, got) {
			t.Errorf("%s: repeat = %+v, %v, %v; want the stored call", tc.name, existing, created, err)
		}
	}
}

// Spend: of concurrent Spends of one id exactly one is fresh; an id
// spent stays spent; others are independent; bad ids are refused.
func Spend(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	id := strings.ReplaceAll(t.Name(), "/", "-")
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := l.Spend(ctx, id, until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				fresh.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := fresh.Load(); n != 1 {
		t.Fatalf("%d of 20 concurrent Spends were fresh; want 1", n)
	}
	if ok, err := l.Spend(ctx, id, until.Add(time.Hour)); ok || err != nil {
		t.Fatalf("Spend again = %v, %v; want false", ok, err)
	}
	if ok, err := l.Spend(ctx, id+"-other", until); !ok || err != nil {
		t.Fatalf("Spend of another id = %v, %v; want true", ok, err)
	}
	for _, bad := range []string{"", strings.Repeat("n", ledger.MaxSpendID+1)} {
		if ok, err := l.Spend(ctx, bad, until); ok || err == nil {
			t.Errorf("Spend(%d bytes) = %v, %v; want an error", len(bad), ok, err)
		}
	}
}
