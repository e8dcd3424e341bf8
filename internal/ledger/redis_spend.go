package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Spend implements Ledger with one SET NX: the key exists until until, as
// its expiry. The value is the write's op, so that a SET go-redis retried
// after losing the reply finds its own value and reports it fresh rather
// than spent by someone else. With Replicas set, it waits for them as
// Create does.
func (r *Redis) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	if err := checkSpend(id); err != nil {
		return false, err
	}
	ttl := max(until.Sub(r.clock.Now()), time.Millisecond)
	op := r.nextOp()
	cmd := redis.NewStringCmd(ctx, "set", r.prefix+"spent:"+id, op, "px", ttl.Milliseconds(), "nx", "get")
	r.send(ctx, cmd)
	prev, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil
	case err != nil:
		return false, r.unavailable(fmt.Sprintf("spending %q", id), err)
	}
	return prev == op, nil
}
