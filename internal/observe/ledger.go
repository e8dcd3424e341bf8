package observe

import (
	"context"
	"errors"
	"time"

	"github.com/toolgate/toolgate/internal/ledger"
)

// Ledger operations, the op label of ledger_operations_total.
const (
	OpCreate = "create"
	OpGet    = "get"
	OpUpdate = "update"
	OpWait   = "wait"
	OpSpend  = "spend"
)

// Ledger results, the result label of ledger_operations_total.
const (
	ResultOK          = "ok"
	ResultNotFound    = "not_found"
	ResultConflict    = "conflict"
	ResultUnavailable = "unavailable"
	// ResultTimeout: a wait ended by its deadline or its caller.
	ResultTimeout = "timeout"
	// ResultError: any other failure (a stored call that cannot be read,
	// an unexpected error).
	ResultError = "error"
)

var (
	ledgerOps     = []string{OpCreate, OpGet, OpUpdate, OpWait, OpSpend}
	ledgerResults = []string{ResultOK, ResultNotFound, ResultConflict, ResultUnavailable, ResultTimeout, ResultError}
)

// ObservedLedger counts the operations of a ledger. One that records
// nothing (ledger.Off) is returned as it is: it does nothing to count.
func ObservedLedger(l ledger.Ledger, backend string, o Observer) ledger.Ledger {
	if l == nil || !l.Records() || o == nil || o == Nop {
		return l
	}
	return &observedLedger{Ledger: l, backend: backend, o: o}
}

type observedLedger struct {
	ledger.Ledger
	backend string
	o       Observer
}

func (l *observedLedger) Create(ctx context.Context, c *ledger.Call) (*ledger.Call, bool, error) {
	existing, created, err := l.Ledger.Create(ctx, c)
	l.o.LedgerOp(l.backend, OpCreate, resultOf(err))
	return existing, created, err
}

func (l *observedLedger) Get(ctx context.Context, key string) (*ledger.Call, error) {
	c, err := l.Ledger.Get(ctx, key)
	l.o.LedgerOp(l.backend, OpGet, resultOf(err))
	return c, err
}

func (l *observedLedger) Update(ctx context.Context, c *ledger.Call, from ledger.State) (*ledger.Call, error) {
	cur, err := l.Ledger.Update(ctx, c, from)
	l.o.LedgerOp(l.backend, OpUpdate, resultOf(err))
	return cur, err
}

func (l *observedLedger) Wait(ctx context.Context, key string, state ledger.State) (*ledger.Call, error) {
	c, err := l.Ledger.Wait(ctx, key, state)
	// A wait ended by its deadline or its caller is how waiting ends,
	// not a failure of the ledger.
	if err != nil && ctx.Err() != nil {
		l.o.LedgerOp(l.backend, OpWait, ResultTimeout)
		return c, err
	}
	l.o.LedgerOp(l.backend, OpWait, resultOf(err))
	return c, err
}

func (l *observedLedger) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	fresh, err := l.Ledger.Spend(ctx, id, until)
	l.o.LedgerOp(l.backend, OpSpend, resultOf(err))
	return fresh, err
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ledger.ErrNotFound):
		return ResultNotFound
	case errors.Is(err, ledger.ErrConflict):
		return ResultConflict
	case errors.Is(err, ledger.ErrUnavailable):
		return ResultUnavailable
	}
	return ResultError
}
