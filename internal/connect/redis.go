package connect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store on the Redis ledger's server: every gateway instance on
// the same server and prefix shares its values and its locks. Values are
// under prefix "conn:" and the key, with the server's own expiry; locks
// under prefix "connlock:" and the key, apart from the values. Its ttls
// run on the server's clock.
//
// Take is GETDEL and Lock a SET NX with the GET option, which the ledger
// uses already (Redis 7.0 or later). A retried command whose first reply
// was lost (go-redis retries on a broken connection) may then lose a
// Take's value, never hand it out twice, and still finds its own lock.
type Redis struct {
	client *redis.Client
	prefix string
}

// NewRedis returns the Store on client under prefix (the ledger's
// Prefix). The client stays its owner's: Close leaves it open.
func NewRedis(client *redis.Client, prefix string) *Redis {
	return &Redis{client: client, prefix: prefix}
}

// unlockTimeout bounds an unlock, which has no context of its own: the
// request that took the lock may be gone. An unlock that fails leaves the
// lock to its ttl.
const unlockTimeout = 5 * time.Second

// unlockScript deletes a lock only if it is still the holder's: one
// whose ttl ended may have been taken by another since.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

func (r *Redis) key(key string) string     { return r.prefix + "conn:" + key }
func (r *Redis) lockKey(key string) string { return r.prefix + "connlock:" + key }

// failed wraps a Redis error. Neither the key nor the value is in it:
// a key may hold a flow's state, a value a token.
func (r *Redis) failed(doing string, err error) error {
	return fmt.Errorf("connections at redis %s: %s: %w", r.client.Options().Addr, doing, err)
}

func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := r.client.Get(ctx, r.key(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.failed("reading", err)
	}
	return v, nil
}

func (r *Redis) Put(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	// go-redis reads an expiration of -1 as KEEPTTL: a Put without a
	// ttl would keep the old value's.
	if ttl < 0 {
		ttl = 0
	}
	if err := r.client.Set(ctx, r.key(key), val, ttl).Err(); err != nil {
		return r.failed("writing", err)
	}
	return nil
}

func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, r.key(key)).Err(); err != nil {
		return r.failed("deleting", err)
	}
	return nil
}

func (r *Redis) Take(ctx context.Context, key string) ([]byte, error) {
	v, err := r.client.GetDel(ctx, r.key(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.failed("taking", err)
	}
	return v, nil
}

// Lock sets the lock's key to a token of this holding's if it is not
// set, for ttl (at least a millisecond, the server's unit); a ttl of zero
// or less is refused. The unlock deletes it only while it still holds
// the token.
func (r *Redis) Lock(ctx context.Context, key string, ttl time.Duration) (func(), bool, error) {
	if ttl <= 0 {
		return nil, false, fmt.Errorf("connections: lock for %s: want a positive ttl", ttl)
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	token := hex.EncodeToString(raw[:])
	k := r.lockKey(key)
	ms := max(ttl.Milliseconds(), 1)
	// GET answers the token a retry of this command set already, or
	// another holder's; nil when this one set it.
	held, err := r.client.Do(ctx, "set", k, token, "px", ms, "nx", "get").Text()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return nil, false, r.failed("locking", err)
	case held != token:
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		_ = unlockScript.Run(ctx, r.client, []string{k}, token).Err()
	}, true, nil
}

// Close does nothing: the client is the ledger's, which closes it.
func (r *Redis) Close() error { return nil }

// Interface guards
var _ Store = (*Redis)(nil)
