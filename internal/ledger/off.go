package ledger

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/clock"
)

// Off is the ledger of "ledger off": it records nothing. Every Create
// creates, so a repeated call id runs again; Get and Wait find nothing
// (ErrNotKept); Update succeeds and stores nothing; Spend remembers spent
// ids in this process only, and Create counts calls against their limits
// in this process only (an Update out of flight releases their places).
// Its Records is false: a call cannot pause on a card in it, and Waiting
// lists none.
var Off Ledger = off{counts: &offCounts, clock: clock.Real}

// ErrNotKept is what Off's Get and Wait return: an ErrNotFound that says
// why.
var ErrNotKept = fmt.Errorf("%w: calls are not recorded (ledger off)", ErrNotFound)

// off counts limits in counts, by clock (the system's but in tests).
type off struct {
	counts *lockedCounts
	clock  clock.Clock
}

func (o off) Create(_ context.Context, c *Call) (*Call, bool, error) {
	if err := checkCreate(c); err != nil {
		return nil, false, err
	}
	if err := checkLimits(c); err != nil {
		return nil, false, err
	}
	if len(c.Limits) > 0 {
		rec := stamp(c, o.clock)
		o.counts.mu.Lock()
		over := o.counts.q.take(rec.Limits, rec.Key, rec.Created, placeLapse(rec, DefaultRetention), o.clock.Now())
		o.counts.mu.Unlock()
		if over != nil {
			return nil, false, over
		}
	}
	return nil, true, nil
}

func (off) Get(context.Context, string) (*Call, error) { return nil, ErrNotKept }

func (o off) Update(_ context.Context, c *Call, from State) (*Call, error) {
	if inFlight(from) && !inFlight(c.State) && len(c.Limits) > 0 {
		o.counts.mu.Lock()
		o.counts.q.leaveFlight(c.Limits, c.Key)
		o.counts.mu.Unlock()
	}
	return c, nil
}

func (off) Wait(context.Context, string, State) (*Call, error) { return nil, ErrNotKept }

func (off) Records() bool { return false }

func (off) Close() error { return nil }

func (off) Waiting(context.Context, string, string) ([]*Call, error) { return nil, nil }
