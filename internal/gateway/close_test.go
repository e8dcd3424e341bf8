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

// releasedLedger is a ledger that is down: the first Update fails at once,
// as Redis's do while it restarts, and each later one (a retry) stays in
// flight until its context ends. Once released is set, as Caddy's Cleanup
// releases the ledger after the gateway's Close, every call is counted in
// touched: none may come.
type releasedLedger struct {
	ledger.Ledger
	updates  atomic.Int32
	inFlight chan struct{}
	released atomic.Bool
	touched  atomic.Int32
}

func (l *releasedLedger) Update(ctx context.Context, c *ledger.Call, from ledger.State) (*ledger.Call, error) {
	if l.released.Load() {
		l.touched.Add(1)
	}
	if l.updates.Add(1) > 1 {
		select {
		case l.inFlight <- struct{}{}:
		default:
		}
		<-ctx.Done()
	}
	return nil, fmt.Errorf("%w: the server is restarting", ledger.ErrUnavailable)
}

func newReleasedLedger(t *testing.T) *releasedLedger {
	t.Helper()
	bolt, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	return &releasedLedger{Ledger: bolt, inFlight: make(chan struct{}, 1)}
}

// closeWithin calls Close and fails t unless it returns nil within d.
func closeWithin(t *testing.T, gw *Gateway, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- gw.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(d):
		t.Fatal("Close did not return")
	}
}

// TestCloseEndsRetries: a retry to record a call, in flight when Close is
// called, ends before Close returns, so nothing touches the ledger after;
// Close may be called again.
func TestCloseEndsRetries(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/i/${input.id}"}))
	led := newReleasedLedger(t)
	gw.ledger = led
	call := Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"a"}`), Identity: Identity{User: "u_1"}}
	if a, err := gw.Invoke(context.Background(), call); err != nil || a.Content != "got /i/a" {
		t.Fatalf("Invoke = %+v, %v; want the target's result", a, err)
	}
	<-ch
	select {
	case <-led.inFlight:
	case <-time.After(5 * time.Second):
		t.Fatal("no retry to record the call")
	}

	closeWithin(t, gw, 3*time.Second)
	led.released.Store(true)
	time.Sleep(3 * recordRetry / 10) // past the retry's next pause
	if n := led.touched.Load(); n != 0 {
		t.Fatalf("the ledger was called %d times after Close returned", n)
	}
	closeWithin(t, gw, time.Second)
}

// TestCloseStopsNewRetries: after Close, a call that cannot be recorded at
// once is not tried again in the background.
func TestCloseStopsNewRetries(t *testing.T) {
	gw, _ := newGateway(t)
	led := newReleasedLedger(t)
	gw.ledger = led
	closeWithin(t, gw, time.Second)

	c := &ledger.Call{Key: ledger.Key("u_1", "", "c1"), CallID: "c1", Tool: "app", State: ledger.Done,
		Deadline: gw.clock.Now().Add(time.Minute)}
	gw.record(context.Background(), c, ledger.Running)
	time.Sleep(3 * recordRetry / 10)
	if n := led.updates.Load(); n != 1 {
		t.Fatalf("%d updates after Close, want the one try and no retry", n)
	}
}
