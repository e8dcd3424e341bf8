package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxSpendID bounds the ids Spend takes: a nonce is a few dozen bytes, and
// an id from a caller must not grow the store by its own length.
const MaxSpendID = 128

// checkSpend enforces what every back end's Spend takes.
func checkSpend(id string) error {
	switch {
	case id == "":
		return errors.New("ledger: spending an empty id")
	case len(id) > MaxSpendID:
		return fmt.Errorf("ledger: spending an id of %d bytes; at most %d", len(id), MaxSpendID)
	}
	return nil
}

// spentSet is the spent ids of one process, for ledger off: a token spent
// there cannot be spent again until it expires or the process stops (a
// gateway without a ledger is one instance with no memory of its own past).
type spentSet struct {
	mu   sync.Mutex
	ids  map[string]time.Time
	next time.Time // when the earliest kept id expires: sweep then
}

func (s *spentSet) spend(id string, until, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]time.Time{}
	}
	if !s.next.IsZero() && !now.Before(s.next) {
		s.next = time.Time{}
		for k, exp := range s.ids {
			if !exp.After(now) {
				delete(s.ids, k)
			} else if s.next.IsZero() || exp.Before(s.next) {
				s.next = exp
			}
		}
	}
	if exp, ok := s.ids[id]; ok && exp.After(now) {
		return false
	}
	s.ids[id] = until
	if s.next.IsZero() || until.Before(s.next) {
		s.next = until
	}
	return true
}

// offSpent is ledger off's spent ids: one set per process.
var offSpent spentSet

func (off) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	if err := checkSpend(id); err != nil {
		return false, err
	}
	return offSpent.spend(id, until, time.Now()), nil
}
