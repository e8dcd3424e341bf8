package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
)

// restartingLedger is a ledger whose Updates fail as unavailable while down is
// set, as Redis's do while it restarts; each such failure is reported.
type restartingLedger struct {
	ledger.Ledger
	down   atomic.Bool
	failed chan struct{}
}

func (l *restartingLedger) Update(ctx context.Context, c *ledger.Call, from ledger.State) (*ledger.Call, error) {
	if l.down.Load() {
		select {
		case l.failed <- struct{}{}:
		default:
		}
		return nil, fmt.Errorf("%w: the server is restarting", ledger.ErrUnavailable)
	}
	return l.Ledger.Update(ctx, c, from)
}

// TestRecordWhenLedgerReturns: a call whose result cannot be recorded at
// once (the ledger is down when the target answers) answers its caller,
// and is recorded when the ledger returns; a repeat meanwhile waits and gets
// that result, not a second run and not "outcome unknown".
func TestRecordWhenLedgerReturns(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/i/${input.id}"}))
	bolt, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	led := &restartingLedger{Ledger: bolt, failed: make(chan struct{}, 1)}
	gw.ledger = led
	ctx := context.Background()
	call := Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"a"}`), Identity: Identity{User: "u_1"}}

	led.down.Store(true)
	first, err := gw.Invoke(ctx, call)
	if err != nil || first.IsError || first.Content != "got /i/a" {
		t.Fatalf("Invoke with the ledger down at the end = %+v, %v; want the target's result", first, err)
	}
	<-ch
	// A repeat waits for the call in flight...
	repeat := make(chan *Answer, 1)
	go func() {
		a, err := gw.Invoke(ctx, call)
		if err != nil {
			t.Error(err)
		}
		repeat <- a
	}()
	// ...while the background tries fail, until the ledger returns.
	select {
	case <-led.failed:
	case <-time.After(5 * time.Second):
		t.Fatal("no try to record the call again")
	}
	led.down.Store(false)
	select {
	case a := <-repeat:
		if a == nil || a.Status != StatusDone || !a.Result.Equal(first.Result) {
			t.Fatalf("repeat = %+v, want the first answer %+v", a, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the repeat did not answer once the ledger returned")
	}
	if got, err := gw.Status(ctx, call.Identity, "c1"); err != nil || !got.Result.Equal(first.Result) {
		t.Errorf("Status = %+v, %v; want the recorded result", got, err)
	}
	select {
	case s := <-ch:
		t.Errorf("the target ran again: %+v", s)
	default:
	}
}
