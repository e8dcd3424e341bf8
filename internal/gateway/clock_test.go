package gateway

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
)

// TestClockGovernsCalls: the gateway's clock, not the system's, stamps a
// call and its deadline, and says when a call in flight has outlived it.
// The clock is set a century ahead, where no system clock is.
func TestClockGovernsCalls(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/i/${input.id}"}))
	t0 := time.Date(2126, 1, 2, 3, 4, 5, 0, time.UTC)
	manual := clock.NewManual(t0)
	gw.clock = manual
	bolt, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{Clock: manual})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	gw.ledger = bolt
	ctx := context.Background()
	me := Identity{User: "u_1"}

	// A new call is stamped, and its deadline set, on the clock.
	call := Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"a"}`), Identity: me}
	if _, err := gw.Invoke(ctx, call); err != nil {
		t.Fatal(err)
	}
	<-ch
	rec, err := bolt.Get(ctx, ledger.Key(me.User, me.Install, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(gw.inFlightLimit()); !rec.Created.Equal(t0) || !rec.Deadline.Equal(want) {
		t.Errorf("created %v, deadline %v; want %v and %v", rec.Created, rec.Deadline, t0, want)
	}
	if got := gw.newCallID(); got[:len("call_")+9] != newCallID(t0)[:len("call_")+9] {
		t.Errorf("a call id made at %v starts %s, not as one made on the clock", t0, got)
	}

	// A call in flight whose deadline passed on the clock, though not on
	// the system's, is closed as outcome unknown at once.
	input := jsontext.Value(`{"id":"b"}`)
	decoded, _ := decodeInput(input)
	stale := &ledger.Call{Key: ledger.Key(me.User, me.Install, "c2"), CallID: "c2", Tool: "app", User: me.User,
		Source: SourceAPI, Digest: inputDigest(input, decoded, nil), State: ledger.Running, Owner: "gone",
		Created: t0, Updated: t0, Deadline: t0.Add(time.Minute)}
	if _, _, err := bolt.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	manual.Add(2 * time.Minute)
	done := make(chan *Answer, 1)
	go func() {
		a, err := gw.Invoke(ctx, Call{Tool: "app", CallID: "c2", Input: input, Identity: me})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	select {
	case a := <-done:
		if a == nil || a.Status != StatusDone || !a.Result.Equal(outcomeUnknown) {
			t.Errorf("repeat of a call past its deadline = %+v, want outcome unknown", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the repeat waited for a call whose deadline passed on the gateway's clock")
	}
	select {
	case s := <-ch:
		t.Errorf("the call past its deadline was run: %+v", s)
	default:
	}
}
