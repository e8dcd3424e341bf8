package ledger

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clock"
)

// RedisOptions configures OpenRedis.
type RedisOptions struct {
	// Addr is the server's host:port.
	Addr string

	// Password authenticates to the server. Default: none.
	Password string

	// TLS, when set, makes every connection TLS with this config (its
	// ServerName, when empty, is Addr's host). Default: plain TCP.
	TLS *tls.Config

	// DB is the database number. Default: 0.
	DB int

	// Prefix starts every key and the pub/sub channel, so several
	// gateways (or other programs) can share one server. Gateways that
	// share calls must use the same prefix. Default: "toolgate:".
	Prefix string

	// Retention is how long a call is kept after its last change (for a
	// call in flight, after its deadline if that is later): the key's TTL,
	// set again on every write. Default: 24h (DefaultRetention).
	Retention time.Duration

	// Clock stamps calls without times and dates their keys' expiry.
	// Default: the system clock.
	Clock clock.Clock
}

// Redis is a Ledger in Redis, shared by every gateway instance that uses
// the same server and prefix. Each call is a hash (state, data = JSON of
// the Call, op = the id of the write that stored it) whose writes are Lua
// scripts, so a check and its write are one atomic step across instances.
type Redis struct {
	client    *redis.Client
	pubsub    *redis.PubSub
	addr      string
	prefix    string
	channel   string
	retention time.Duration
	clock     clock.Clock
	waiters   *waiters

	// opBase and opSeq name each write, so that a write go-redis retries
	// after losing the reply recognises itself instead of reporting its
	// own effect as someone else's (a Create that returns created=false
	// for its own call would wait on itself until its deadline).
	opBase string
	opSeq  atomic.Uint64

	fannedOut chan struct{}
	closeOnce sync.Once
	closeErr  error
}

const (
	// redisTimeout bounds each network step (dial, read, write) so that
	// a server that is gone fails the call quickly instead of holding it.
	redisTimeout = time.Second

	// redisHealthCheck is how often an idle subscription is pinged, to
	// find a connection that died without a word.
	redisHealthCheck = 3 * time.Second
)

// createScript records a call unless its key exists. A retried run of the
// same write (same op) reports success.
//
// KEYS[1] call; ARGV: state, data, op, retention in ms.
// Returns {1} when recorded, {0, data} when another call is there.
var createScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'data', 'op')
if cur[1] then
	if cur[2] == ARGV[3] then return {1} end
	return {0, cur[1]}
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'data', ARGV[2], 'op', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1}
`)

// updateScript replaces a call if its state is still the expected one and
// announces the change. A retried run of the same write reports success.
//
// KEYS[1] call; ARGV: from, state, data, op, retention in ms, channel, key.
// Returns {1} when replaced, {0, data} on a conflict, nil when missing.
var updateScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'state', 'data', 'op')
if not cur[1] then return false end
if cur[3] == ARGV[4] then return {1} end
if cur[1] ~= ARGV[1] then return {0, cur[2]} end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'data', ARGV[3], 'op', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {1}
`)

// OpenRedis connects to the server and subscribes to the prefix's channel
// of changes. It fails if the server cannot be reached now; afterwards the
// same *Redis rides out the server going away and coming back, failing
// calls with ErrUnavailable meanwhile. Calls in flight are left alone:
// other instances may be running them.
func OpenRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if opts.Addr == "" {
		return nil, errors.New("opening ledger: no redis address")
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("opening ledger at redis %s: negative retention %s", opts.Addr, opts.Retention)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Prefix == "" {
		opts.Prefix = "toolgate:"
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("opening ledger at redis %s: %w", opts.Addr, err)
	}

	client := redis.NewClient(&redis.Options{
		Addr:                  opts.Addr,
		Password:              opts.Password,
		DB:                    opts.DB,
		TLSConfig:             opts.TLS,
		DialTimeout:           redisTimeout,
		ReadTimeout:           redisTimeout,
		WriteTimeout:          redisTimeout,
		ContextTimeoutEnabled: true,
		// go-redis dials five times per attempt by default, and
		// retries each command three times: with a server that is gone
		// that holds a call for seconds before it can fail.
		DialerRetries: 2,
		MaxRetries:    2,
	})
	r := &Redis{
		client:    client,
		addr:      opts.Addr,
		prefix:    opts.Prefix,
		channel:   opts.Prefix + "done",
		retention: opts.Retention,
		clock:     clock.Or(opts.Clock),
		waiters:   newWaiters(),
		opBase:    hex.EncodeToString(seed[:]) + ":",
		fannedOut: make(chan struct{}),
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, r.unavailable("opening ledger", err)
	}

	// One subscription serves every Wait of this instance. The first
	// confirmation is read here so that no Update published after
	// OpenRedis returns can be missed.
	r.pubsub = client.Subscribe(ctx, r.channel)
	msg, err := r.pubsub.Receive(ctx)
	if err == nil {
		if _, ok := msg.(*redis.Subscription); !ok {
			err = fmt.Errorf("unexpected %T while subscribing", msg)
		}
	}
	if err != nil {
		_ = r.pubsub.Close()
		_ = client.Close()
		return nil, r.unavailable("subscribing to "+r.channel, err)
	}
	go r.fanOut(r.pubsub.ChannelWithSubscriptions(
		redis.WithChannelHealthCheckInterval(redisHealthCheck),
		redis.WithChannelPingTimeout(redisTimeout),
		redis.WithChannelReconnectTimeout(redisTimeout),
	))
	return r, nil
}

// fanOut wakes the waiters of each changed key. go-redis reconnects and
// subscribes again on its own when the connection drops; changes published
// in between were missed, so on each new subscription every waiter reads
// again.
func (r *Redis) fanOut(msgs <-chan any) {
	defer close(r.fannedOut)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			r.waiters.notify(m.Payload)
		case *redis.Subscription:
			r.waiters.notifyAll()
		}
	}
}

func (r *Redis) callKey(key string) string {
	return r.prefix + "call:" + key
}

// ttl is the time to live of c's key, in milliseconds as PEXPIRE takes
// them: the retention from now, or from keptFrom(c) when that is later, so
// that a call in flight outlives its deadline by the retention.
func (r *Redis) ttl(c *Call) string {
	d := r.retention + max(keptFrom(c).Sub(r.clock.Now()), 0)
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

func (r *Redis) nextOp() string {
	return r.opBase + strconv.FormatUint(r.opSeq.Add(1), 36)
}

// unavailable wraps a Redis failure so callers can tell it (ErrUnavailable)
// while the cause stays in the message and the chain.
func (r *Redis) unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s at redis %s: %w", ErrUnavailable, what, r.addr, err)
}

// scriptReply reads the {1} or {0, data} reply of the scripts.
func scriptReply(v any) (ok bool, data string, err error) {
	a, isSlice := v.([]any)
	if !isSlice || len(a) == 0 {
		return false, "", fmt.Errorf("unexpected script reply %#v", v)
	}
	if n, _ := a[0].(int64); n == 1 {
		return true, "", nil
	}
	if len(a) != 2 {
		return false, "", fmt.Errorf("unexpected script reply %#v", v)
	}
	data, isString := a[1].(string)
	if !isString {
		return false, "", fmt.Errorf("unexpected script reply %#v", v)
	}
	return false, data, nil
}

// Create implements Ledger.
func (r *Redis) Create(ctx context.Context, c *Call) (*Call, bool, error) {
	if err := checkCreate(c); err != nil {
		return nil, false, err
	}
	rec := stamp(c, r.clock)
	data, err := encodeCall(rec)
	if err != nil {
		return nil, false, err
	}
	v, err := createScript.Run(ctx, r.client, []string{r.callKey(c.Key)},
		string(c.State), data, r.nextOp(), r.ttl(rec)).Result()
	if err != nil {
		return nil, false, r.unavailable(fmt.Sprintf("recording call %q", c.Key), err)
	}
	ok, existing, err := scriptReply(v)
	if err != nil {
		return nil, false, r.unavailable(fmt.Sprintf("recording call %q", c.Key), err)
	}
	if ok {
		return nil, true, nil
	}
	cur, err := decodeCall(c.Key, []byte(existing))
	if err != nil {
		return nil, false, err
	}
	return cur, false, nil
}

// Get implements Ledger.
func (r *Redis) Get(ctx context.Context, key string) (*Call, error) {
	data, err := r.client.HGet(ctx, r.callKey(key), "data").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.unavailable(fmt.Sprintf("reading call %q", key), err)
	}
	return decodeCall(key, data)
}

// Update implements Ledger.
func (r *Redis) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	rec := stamp(c, r.clock)
	data, err := encodeCall(rec)
	if err != nil {
		return nil, err
	}
	v, err := updateScript.Run(ctx, r.client, []string{r.callKey(c.Key)},
		string(from), string(c.State), data, r.nextOp(), r.ttl(rec), r.channel, c.Key).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.unavailable(fmt.Sprintf("updating call %q", c.Key), err)
	}
	ok, current, err := scriptReply(v)
	if err != nil {
		return nil, r.unavailable(fmt.Sprintf("updating call %q", c.Key), err)
	}
	if !ok {
		cur, err := decodeCall(c.Key, []byte(current))
		if err != nil {
			return nil, err
		}
		return cur, ErrConflict
	}
	// Waiters here need not wait for the message to come back from the
	// server (nor for a subscription that is reconnecting).
	r.waiters.notify(c.Key)
	return rec, nil
}

// Wait implements Ledger. It wakes on this instance's Updates at once and
// on other instances' through the shared subscription.
func (r *Redis) Wait(ctx context.Context, key string, state State) (*Call, error) {
	return r.waiters.wait(ctx, key, state, r.Get)
}

// Close ends the subscription, releases every Wait and closes the client.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() {
		err := r.pubsub.Close()
		<-r.fannedOut
		r.waiters.close()
		r.closeErr = errors.Join(err, r.client.Close())
		if r.closeErr != nil {
			r.closeErr = fmt.Errorf("closing ledger at redis %s: %w", r.addr, r.closeErr)
		}
	})
	return r.closeErr
}

// Interface guards
var _ Ledger = (*Redis)(nil)
