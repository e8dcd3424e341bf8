package gateway

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
)

func TestCheckIdentity(t *testing.T) {
	for _, c := range []struct {
		name string
		id   Identity
		ok   bool
	}{
		{"empty", Identity{}, true},
		{"plain", Identity{User: "u_1", Install: "in_1"}, true},
		{"email and space", Identity{User: "Ada Lovelace <ada@example.com>"}, true},
		{"non-ASCII", Identity{User: "kullanıcı-名前-🙂"}, true},
		{"user of 256 bytes", Identity{User: strings.Repeat("u", 256)}, true},
		{"user of 256 bytes in 2-byte runes", Identity{User: strings.Repeat("é", 128)}, true},
		{"user of 257 bytes", Identity{User: strings.Repeat("u", 257)}, false},
		{"user of 40,000 bytes", Identity{User: strings.Repeat("u", 40000)}, false},
		{"install of 257 bytes", Identity{User: "u", Install: strings.Repeat("i", 257)}, false},
		{"NUL", Identity{User: "u\x00"}, false},
		{"ledger key separator", Identity{User: "u\x1fin_1"}, false},
		{"newline", Identity{User: "u\nX-Evil: 1"}, false},
		{"tab", Identity{User: "u\t1"}, false},
		{"DEL", Identity{User: "u\x7f"}, false},
		{"C1 NEL", Identity{User: "u\u0085"}, false},
		{"C1 CSI", Identity{Install: "in\u009b"}, false},
		{"invalid UTF-8", Identity{User: "u\xff"}, false},
		{"lone surrogate", Identity{User: "u\xed\xa0\x80"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckIdentity(c.id)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			var re *RequestError
			if err != nil && (!errors.As(err, &re) || re.Code != "invalid_identity" || !errors.Is(err, ErrBadRequest)) {
				t.Errorf("err %v is not a 400 invalid_identity", err)
			}
		})
	}
}

func TestCheckCallID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"toolu_01", true},
		{"call_01hx.a:b-C", true},
		{"a", true},
		{"...", true},
		{".a", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{strings.Repeat("x", 129), false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"../x", false},
		{"a b", false},
		{"a%2Fb", false},
		{"a\r\nX-Evil: 1", false},
		{"a\x1fb", false},
		{"é", false},
		{"a?b", false},
		{"a#b", false},
	} {
		err := CheckCallID(c.id)
		if (err == nil) != c.ok {
			t.Errorf("CheckCallID(%q) = %v, want ok=%v", c.id, err, c.ok)
			continue
		}
		var re *RequestError
		if err != nil && (!errors.As(err, &re) || re.Code != "invalid_call_id" || !errors.Is(err, ErrBadRequest)) {
			t.Errorf("CheckCallID(%q): %v is not a 400 invalid_call_id", c.id, err)
		}
	}
	// Generated ids pass the check callers' ids must pass.
	for range 100 {
		if id := NewCallID(); CheckCallID(id) != nil {
			t.Fatalf("generated id %q fails CheckCallID", id)
		}
	}
}

// countingLedger is a ledger that counts what is asked of it and finds
// nothing.
type countingLedger struct{ creates, gets atomic.Int32 }

func (l *countingLedger) Create(_ context.Context, c *ledger.Call) (*ledger.Call, bool, error) {
	l.creates.Add(1)
	return nil, true, nil
}

func (l *countingLedger) Get(context.Context, string) (*ledger.Call, error) {
	l.gets.Add(1)
	return nil, ledger.ErrNotFound
}

func (l *countingLedger) Update(_ context.Context, c *ledger.Call, _ ledger.State) (*ledger.Call, error) {
	return c, nil
}

func (l *countingLedger) Wait(context.Context, string, ledger.State) (*ledger.Call, error) {
	return nil, ledger.ErrNotFound
}

func (l *countingLedger) Waiting(context.Context, string, string) ([]*ledger.Call, error) {
	return nil, nil
}

func (l *countingLedger) Spend(context.Context, string, time.Time) (bool, error) { return true, nil }

func (l *countingLedger) Close() error  { return nil }
func (l *countingLedger) Records() bool { return true }

// TestBoundsBeforeLedger: a bad identity or call id is refused by Invoke,
// Status and Resume before the ledger is asked anything and before the
// target is sent, so every front end (Tools API, MCP, resume) shares it.
func TestBoundsBeforeLedger(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}))
	led := new(countingLedger)
	gw.ledger = led
	ctx := context.Background()
	me := Identity{User: "u_1", Install: "in_1"}
	big := Identity{User: strings.Repeat("u", 40000)}

	for _, c := range []struct {
		name string
		call Call
		code string
	}{
		{"40,000-byte user", Call{Tool: "app", Identity: big}, "invalid_identity"},
		{"control character in install", Call{Tool: "app", Identity: Identity{User: "u", Install: "in\x1f"}}, "invalid_identity"},
		{"call id with a slash", Call{Tool: "app", Identity: me, CallID: "a/b"}, "invalid_call_id"},
		{"call id ..", Call{Tool: "app", Identity: me, CallID: ".."}, "invalid_call_id"},
		{"call id of 129 bytes", Call{Tool: "app", Identity: me, CallID: strings.Repeat("c", 129)}, "invalid_call_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.call.Input = jsontext.Value(`{}`)
			_, err := gw.Invoke(ctx, c.call)
			var re *RequestError
			if !errors.As(err, &re) || re.Code != c.code || !errors.Is(err, ErrBadRequest) {
				t.Errorf("Invoke: %v, want 400 %s", err, c.code)
			}
		})
	}
	for _, c := range []struct {
		name   string
		who    Identity
		callID string
	}{
		{"status of a 40,000-byte user", big, "c1"},
		{"status of a call id with a slash", me, "a/b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := gw.Status(ctx, c.who, c.callID); !errors.Is(err, ErrBadRequest) {
				t.Errorf("Status: %v, want 400", err)
			}
			_, err := gw.Resume(ctx, ResumeRequest{CallID: c.callID, Identity: c.who, Action: ActionSkip})
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("Resume: %v, want 400", err)
			}
		})
	}
	if n, m := led.creates.Load(), led.gets.Load(); n != 0 || m != 0 {
		t.Errorf("the ledger was asked %d creates and %d gets for refused calls", n, m)
	}
	select {
	case s := <-ch:
		t.Fatalf("a refused call reached the upstream: %+v", s)
	default:
	}

	// The bounds are inclusive: the longest user and call id run.
	if _, err := gw.Invoke(ctx, Call{Tool: "app", Input: jsontext.Value(`{}`), Identity: Identity{User: strings.Repeat("u", MaxIdentityLen)},
		CallID: strings.Repeat("c", MaxCallIDLen)}); err != nil {
		t.Fatalf("a call at the bounds: %v", err)
	}
	<-ch
	if led.creates.Load() != 1 {
		t.Errorf("a call at the bounds was not recorded")
	}
}
