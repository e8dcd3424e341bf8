package ledger

import (
	"context"
	"errors"
)

// Waiting implements Ledger.
func (b *Bolt) Waiting(ctx context.Context, user, install string) ([]*Call, error) {
	return nil, errors.New("ledger: not yet")
}

// Waiting implements Ledger.
func (r *Redis) Waiting(ctx context.Context, user, install string) ([]*Call, error) {
	return nil, errors.New("ledger: not yet")
}
