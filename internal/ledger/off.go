package ledger

import (
	"context"
	"fmt"
)

// Off is the ledger of "ledger off": it records nothing. Every Create
// creates, so a repeated call id runs again; Get and Wait find nothing
// (ErrNotKept); Update succeeds and stores nothing; Spend remembers spent
// ids in this process only. Its Records is false: a call cannot pause on a
// card in it.
var Off Ledger = off{}

// ErrNotKept is what Off's Get and Wait return: an ErrNotFound that says
// why.
var ErrNotKept = fmt.Errorf("%w: calls are not recorded (ledger off)", ErrNotFound)

type off struct{}

func (off) Create(_ context.Context, c *Call) (*Call, bool, error) {
	if err := checkCreate(c); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}

func (off) Get(context.Context, string) (*Call, error) { return nil, ErrNotKept }

func (off) Update(_ context.Context, c *Call, _ State) (*Call, error) { return c, nil }

func (off) Wait(context.Context, string, State) (*Call, error) { return nil, ErrNotKept }

func (off) Records() bool { return false }

func (off) Close() error { return nil }

func (off) Waiting(context.Context, string, string) ([]*Call, error) { return nil, nil }
