package ledger

import (
	"math"
	"strings"
	"testing"
)

// The Update script looks for a value's header in its first headerRange
// bytes: every header the ledger writes, with the longest state and op,
// ends within them.
func TestRedisHeaderInRange(t *testing.T) {
	r := &Redis{opBase: strings.Repeat("f", 16) + ":"}
	r.opSeq.Store(math.MaxUint64 - 1)
	op := r.nextOp()
	for _, s := range []State{Running, AwaitingClient, ActionRequired, Done} {
		buf, err := callValue(&Call{Key: "k", State: s}, op)
		if err != nil {
			t.Fatal(err)
		}
		v := buf.Bytes()
		if n := len(unmarkedHeader(s, op)); n > headerRange || !strings.HasPrefix(string(v), unmarkedHeader(s, op)) {
			t.Errorf("header of a call %s by op %s: %d bytes, %q; want at most %d", s, op, n, v[:min(len(v), n)], headerRange)
		}
	}
}

func unmarkedHeader(s State, op string) string { return "-" + string(s) + "\n" + op + "\n" }
