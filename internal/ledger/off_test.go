package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/ledger/ledgertest"
)

// Off records nothing: every Create creates, even of a key created before,
// an Update stores nothing, and nothing is found.
func TestOff(t *testing.T) {
	ctx := context.Background()
	c := newCall(t, "1")
	for i := range 2 {
		if existing, created, err := ledger.Off.Create(ctx, c); existing != nil || !created || err != nil {
			t.Fatalf("Create %d = %v, %v, %v; want created", i, existing, created, err)
		}
	}
	if _, created, err := ledger.Off.Create(ctx, done(c, "x")); created || err == nil {
		t.Errorf("Create of a done call = %v, %v; want the contract's error", created, err)
	}
	d := done(c, "x")
	if got, err := ledger.Off.Update(ctx, d, ledger.Running); got != d || err != nil {
		t.Errorf("Update = %v, %v; want the call, stored nowhere", got, err)
	}
	if _, err := ledger.Off.Get(ctx, c.Key); !errors.Is(err, ledger.ErrNotKept) || !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get = %v; want ErrNotKept, an ErrNotFound", err)
	}
	if _, err := ledger.Off.Wait(ctx, c.Key, ledger.Running); !errors.Is(err, ledger.ErrNotKept) {
		t.Errorf("Wait = %v; want ErrNotKept", err)
	}
	testSpend(t, ledger.Off)
	// An id past its expiry may be spent again.
	past := time.Now().Add(-time.Second)
	if ok, err := ledger.Off.Spend(ctx, "off-expired", past); !ok || err != nil {
		t.Fatalf("Spend = %v, %v", ok, err)
	}
	if ok, err := ledger.Off.Spend(ctx, "off-expired", past); !ok || err != nil {
		t.Errorf("Spend of an expired id = %v, %v; want fresh", ok, err)
	}
	if err := ledger.Off.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func TestOffQuotas(t *testing.T) {
	ledgertest.RunQuotas(t, func(t *testing.T, clk clock.Clock) ledger.Ledger { return ledger.NewOff(clk) })
}
