package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
)

// With the ledger off (ledger.Off, which a nil Config.Ledger means, and
// whose Records is false) the one
// invoke path records nothing: a repeated call id runs again, no call can
// be looked up or resumed, and a card is an error result, since nothing
// can pause.
func TestLedgerOff(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/i/${input.id}"}))
	if gw.ledger.Records() {
		t.Fatalf("a gateway without a ledger has %T, which records; want ledger.Off", gw.ledger)
	}
	ctx := context.Background()
	me := Identity{User: "u_1", Install: "in_1"}
	call := Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"a"}`), Identity: me}
	for i := range 2 {
		a, err := gw.Invoke(ctx, call)
		if err != nil || a.Status != StatusDone || a.IsError || a.Content != "got /i/a" || a.CallID != "c1" {
			t.Fatalf("call %d: %+v, %v", i, a, err)
		}
		select {
		case <-ch:
		default:
			t.Fatalf("call %d of a repeated call id did not reach the target", i)
		}
	}
	// Another input under the same call id is no misuse: nothing is kept.
	if a, err := gw.Invoke(ctx, Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"b"}`), Identity: me}); err != nil || a.Content != "got /i/b" {
		t.Fatalf("another input under the call id: %+v, %v", a, err)
	}
	<-ch

	for name, do := range map[string]func() error{
		"status": func() error { _, err := gw.Status(ctx, me, "c1"); return err },
		"resume": func() error {
			_, err := gw.Resume(ctx, ResumeRequest{CallID: "c1", Identity: me, Action: ActionSkip})
			return err
		},
	} {
		err := do()
		var re *RequestError
		if !errors.As(err, &re) || re.Code != "unknown_call" || re.Msg != "calls are not recorded (ledger off)" || !errors.Is(err, ErrUnknownCall) {
			t.Errorf("%s with the ledger off: %v; want unknown_call, calls are not recorded", name, err)
		}
	}
}

func TestLedgerOffCard(t *testing.T) {
	rig := newCardRig(t)
	rig.gw = New(Config{Tools: rig.gw.Tools(), Issuer: rig.gw.issuer, Client: rig.gw.client, Ledger: ledger.Off})
	a := rig.invoke(t, "a_card", "plain", "card_1")
	if a.Status != StatusDone || !a.IsError || a.Content != "the handler answered an action-required card, but cards need the call ledger (ledger off)" || a.Card != nil {
		t.Fatalf("a card with the ledger off: %+v", a)
	}
	if n := rig.a.count("/card/plain"); n != 1 {
		t.Errorf("the handler was called %d times", n)
	}
}

// With the ledger off nothing is recorded for a repeat to read, so a call
// ends with its caller, as it always did: the target sees it cancelled.
func TestLedgerOffCallerLeaves(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(gone)
	}))
	defer up.Close()
	gw := saveGateway(t, up.URL, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Answer, 1)
	go func() {
		a, _ := gw.Invoke(ctx, Call{Tool: "save", Input: jsontext.Value(`{}`), Identity: Identity{User: "u_1"}})
		done <- a
	}()
	<-arrived
	cancel()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the target's request was not cancelled with its caller")
	}
	if a := <-done; a == nil || !a.IsError {
		t.Errorf("the call whose caller left answered %+v; want an error result", a)
	}
}
