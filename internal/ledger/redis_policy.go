package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// EvictionError is a Redis server whose maxmemory-policy lets it evict the
// ledger's keys. Every call key has a TTL, so even the volatile-* policies
// (the default of most managed Redis) may drop one user's records to make
// room for another's, and a repeat of an evicted call runs it again.
type EvictionError struct {
	// Policy is the server's maxmemory-policy.
	Policy string
}

// Error has no Unwrap on purpose: go-redis unwraps an OnConnect error
// once before returning it.
func (e *EvictionError) Error() string {
	return fmt.Sprintf("the server's maxmemory-policy is %s: keys the ledger holds can be evicted and a call run twice; set maxmemory-policy noeviction, or write allow_eviction in the ledger block to accept that", e.Policy)
}

// policyGuard checks the maxmemory-policy of the server behind every new
// connection (it is the client's OnConnect), so that a failover to a
// server configured otherwise is caught when the ledger first connects to
// it, not only at open. A connection to a server that may evict is
// refused, unless allow is set: the calls that needed it fail closed
// (ErrUnavailable, 503) and nothing runs. A server that will not say
// (CONFIG disabled or renamed, as managed Redis often has it) is let
// through, with a warning.
//
// Each state is logged when it starts, not at every connection: a server
// that is refused is dialled again by every call.
type policyGuard struct {
	addr   string
	allow  bool
	logger *zap.Logger

	// opened is set once OpenRedis has its first connection: a refusal
	// before it is OpenRedis's error, and after it a log line.
	opened atomic.Bool

	mu   sync.Mutex
	last string // the state logged last: a policy, or unreadable
}

// unreadable is the guard's state for a server whose policy could not be
// read.
const unreadable = "(unreadable)"

// check is the client's OnConnect.
func (g *policyGuard) check(ctx context.Context, cn *redis.Conn) error {
	policy, err := readPolicy(ctx, cn)
	if err != nil {
		if !wouldNotSay(err) {
			return err // the connection failed, or the server is not ready
		}
		g.enter(unreadable, func(string) {
			g.logger.Warn("could not read the Redis server's maxmemory-policy (CONFIG is disabled or renamed, as on many managed Redis services): make sure it is noeviction; with a policy that evicts, keys the ledger holds can be evicted and a call run twice",
				zap.String("addr", g.addr), zap.Error(err))
		})
		return nil
	}
	switch {
	case policy == "noeviction":
		g.enter(policy, func(prev string) {
			if prev != "" {
				g.logger.Info("the Redis server's maxmemory-policy is noeviction", zap.String("addr", g.addr))
			}
		})
		return nil
	case g.allow:
		g.enter(policy, func(string) {
			g.logger.Warn("allow_eviction: the Redis server may evict keys the ledger holds, and a repeat of an evicted call runs it again",
				zap.String("addr", g.addr), zap.String("maxmemory-policy", policy))
		})
		return nil
	}
	refused := &EvictionError{Policy: policy}
	if g.opened.Load() {
		g.enter(policy, func(string) {
			g.logger.Error("refusing the Redis server: calls answer 503 until its maxmemory-policy is noeviction",
				zap.String("addr", g.addr), zap.Error(refused))
		})
	}
	return refused
}

// enter makes state the guard's, calling log with the one it leaves if it
// is a change.
func (g *policyGuard) enter(state string, log func(prev string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if state != g.last {
		prev := g.last
		g.last = state
		log(prev)
	}
}

// readPolicy asks the server behind cn for its maxmemory-policy.
func readPolicy(ctx context.Context, cn *redis.Conn) (string, error) {
	conf, err := cn.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", err
	}
	policy, ok := conf["maxmemory-policy"]
	if !ok {
		return "", noPolicy{}
	}
	return policy, nil
}

// wouldNotSay tells a server that refuses CONFIG GET (unknown command,
// no permission, or an answer without the setting) from a connection
// that failed or a server that is busy for now, which are tried again.
func wouldNotSay(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	for _, busy := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, busy) {
			return false
		}
	}
	return true
}

// noPolicy is a CONFIG GET that answered without the setting: the server
// would not say.
type noPolicy struct{}

func (noPolicy) Error() string {
	return "CONFIG GET maxmemory-policy answered without it"
}
func (noPolicy) RedisError() {}
