package ledger_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/ledger/ledgertest"
)

// The suite's helpers under the names this package's tests use.
var (
	newCall      = ledgertest.NewCall
	done         = ledgertest.Done
	mustCreate   = ledgertest.MustCreate
	waitAsync    = ledgertest.WaitAsync
	receive      = ledgertest.Receive
	stillWaiting = ledgertest.StillWaiting
)

const patience = ledgertest.Patience

// testLedger runs the conformance suite on a back end.
func testLedger(t *testing.T, open func(t *testing.T) ledger.Ledger) { ledgertest.Run(t, open) }

// testSpend runs the suite's one-time ids part on l.
func testSpend(t *testing.T, l ledger.Ledger) { ledgertest.Spend(t, l) }

func TestKeyAndDigest(t *testing.T) {
	if ledger.Key("a", "bc", "d") == ledger.Key("ab", "c", "d") {
		t.Error("Key does not keep its parts apart")
	}

	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := decode(`{"title":"x","tags":["b","a"],"meta":{"z":1,"y":{"q":true,"p":null}}}`)
	b := decode(`{"meta":{"y":{"p":null,"q":true},"z":1},"tags":["b","a"],"title":"x"}`)
	if ledger.InputDigest(a) != ledger.InputDigest(b) {
		t.Error("the same input in another key order has another digest")
	}
	for _, other := range []string{
		`{"title":"x","tags":["a","b"],"meta":{"z":1,"y":{"q":true,"p":null}}}`,
		`{"title":"x","tags":["b","a"],"meta":{"z":2,"y":{"q":true,"p":null}}}`,
		`{"title":"x","tags":["b","a"],"meta":{"z":1,"y":{"q":true}}}`,
		`{"title":"x ","tags":["b","a"],"meta":{"z":1,"y":{"q":true,"p":null}}}`,
	} {
		if ledger.InputDigest(decode(other)) == ledger.InputDigest(a) {
			t.Errorf("different input %s has the same digest", other)
		}
	}
	if d := ledger.InputDigest(a); len(d) != 64 {
		t.Errorf("digest %q is not hex SHA-256", d)
	}
}

// leaksNothing fails the test if opening and closing a ledger n times
// leaves goroutines behind (a sweeper or subscriber that Close missed).
func leaksNothing(t *testing.T, open func() (ledger.Ledger, error)) {
	t.Helper()
	base := runtime.NumGoroutine()
	for range 5 {
		l, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after opening and closing; %d before", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
