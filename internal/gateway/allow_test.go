package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
)

// TestAllowComparesWhatTheTargetGets is policy.TestPlainNumbers's rule
// through Invoke: the
// body sends the amount's text as written, so the policy must judge that
// number exactly, or deny; a denied call reaches nothing.
func TestAllowComparesWhatTheTargetGets(t *testing.T) {
	limited := func(name, allow string) manifest.Tool {
		return manifest.Tool{
			Name: name, Description: "d", Allow: allow,
			InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
			Target:      dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/pay", Body: []byte(`"${input}"`)},
		}
	}
	gw, ch := newGateway(t,
		limited("pay", `input.amount <= 100`),
		limited("pay_big", `input.amount <= 9007199254740992`),
		limited("pay_any", `user == "u_1"`),
	)
	me := Identity{User: "u_1", Install: "in_1"}
	for _, c := range []struct {
		tool, amount string
		allowed      bool
	}{
		{"pay", "100", true},
		{"pay", "100.0", true},
		{"pay", "99.99", true},
		{"pay", "100.01", false},
		{"pay", "100.0000000000000001", false}, // 100 as a float64
		{"pay", "1e400", false},
		{"pay", "-1e400", false},
		{"pay", "-123456789012345678901234567890", false},
		{"pay_big", "9007199254740992", true},
		{"pay_big", "9007199254740993", false}, // 2^53 as a float64
		{"pay_big", "9007199254740993.0", false},
		{"pay_big", "9223372036854775807", false},
		// A policy that does not read the input is not held to its numbers.
		{"pay_any", "100.0000000000000001", true},
	} {
		t.Run(c.tool+" "+c.amount, func(t *testing.T) {
			input := `{"amount":` + c.amount + `}`
			a, err := gw.Invoke(context.Background(), Call{Tool: c.tool, Input: jsontext.Value(input), Identity: me})
			if !c.allowed {
				var re *RequestError
				if !errors.As(err, &re) || !errors.Is(err, ErrForbidden) {
					t.Fatalf("Invoke = %+v, %v; want forbidden", a, err)
				}
				select {
				case s := <-ch:
					t.Fatalf("a denied call reached the upstream: %s", s.body)
				default:
				}
				return
			}
			if err != nil || a.IsError {
				t.Fatalf("Invoke = %+v, %v; want it sent", a, err)
			}
			if s := <-ch; string(s.body) != input {
				t.Errorf("upstream got %s, want %s as written", s.body, input)
			}
		})
	}
}

// TestAllowInexactMessage checks what the caller and the log are told when
// a number makes the policy fail closed.
func TestAllowInexactMessage(t *testing.T) {
	gw, _ := newGateway(t, manifest.Tool{
		Name: "pay", Description: "d", Allow: `input.amount <= 100`,
		InputSchema: []byte(`{"type":"object"}`),
		Target:      dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/pay"},
	})
	tool, _ := gw.Tools().Lookup("pay")
	ok, err := gw.Allowed(tool, Call{Tool: "pay"}, map[string]any{"amount": jsonread.Number("100.0000000000000001")})
	if ok || err == nil {
		t.Fatalf("Allowed = %v, %v; want a denial with an error", ok, err)
	}
	for _, want := range []string{`allow "input.amount <= 100"`, "input.amount", "100.0000000000000001", "no exact"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_, err = gw.Invoke(context.Background(), Call{Tool: "pay", Input: jsontext.Value(`{"amount":100.0000000000000001}`), Identity: Identity{User: "u_1"}})
	if err == nil || !strings.Contains(err.Error(), "the policy could not be evaluated") {
		t.Errorf("Invoke error %v; want forbidden saying the policy could not be evaluated", err)
	}
}
