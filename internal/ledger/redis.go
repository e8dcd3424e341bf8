package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

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

	// AllowEviction accepts a server whose maxmemory-policy is not
	// noeviction, which OpenRedis otherwise refuses (EvictionError), as
	// it refuses each later connection to one (a failover): a server
	// that evicts may drop a call's record, and a repeat of the call
	// then runs it again. With it, a warning is logged instead.
	// Default: false.
	AllowEviction bool

	// Replicas is how many replicas must confirm each write (Redis's
	// WAIT, for up to replicaWait) before it counts, so that a failover
	// to a replica cannot lose a call whose target ran. A write they do
	// not confirm fails with ErrUnavailable; the server may keep it, but
	// a Create is taken back (its call does not run). Default: 0, a
	// write counts once the server has it.
	Replicas int

	// Logger is told of the server's maxmemory-policy when it is not
	// noeviction or cannot be read, and of too few replicas at open.
	// Default: none.
	Logger *zap.Logger
}

// Redis is a Ledger in Redis, shared by every gateway instance that uses
// the same server and prefix. Each call is one string key (see callValue):
// a Create is one SET NX (one script, createScript, for a call with
// limits), an Update one small Lua script, so that a check and its write
// are one atomic step across instances, and each costs one round trip.
// Beside the calls: a sorted set per limit (prefix "quota:" and the
// limit's key) and per caller's list of calls waiting for a person
// (prefix "waiting:", user, U+001F, install), each expiring once nothing
// in it counts.
type Redis struct {
	client    *redis.Client
	pubsub    *redis.PubSub
	addr      string
	prefix    string
	channel   string
	retention time.Duration
	replicas  int
	clock     clock.Clock
	waiters   *waiters

	// opBase and opSeq name each write, so that a write go-redis retries
	// after losing the reply recognises itself instead of reporting its
	// own effect as someone else's (a Create that returns created=false
	// for its own call would wait on itself until its deadline).
	opBase string
	opSeq  atomic.Uint64

	// batchMu guards busy, whether a batch of Creates and Updates is in
	// flight, and pending, what waits for the next (see do).
	batchMu sync.Mutex
	busy    bool
	pending []*queued

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

	// replicaWait is how long a write waits for its replicas (WAIT) when
	// RedisOptions.Replicas is set: half of redisTimeout, because the
	// WAIT's answer must come within the read timeout of the pipeline
	// that carries it, with the write before it.
	replicaWait = redisTimeout / 2
)

// A call's value is a header, then the JSON of the Call:
//
//	<mark><state>\n<op>\n<JSON>
//
// mark is '-', or 'w' once a Wait (on any instance) is blocked on the call:
// an Update publishes the change only then, so that a call nobody waits for
// (nearly every call) costs no message to every instance. op is the id of
// the write that stored the value. The header lets the Update script read
// the state and op without decoding JSON, and lets a write that go-redis
// retried after losing its reply recognise itself instead of reporting its
// own effect as someone else's (a Create that returns created=false for its
// own call would wait on itself until its deadline).
//
// A string, not a hash of fields: SET NX GET records a new call without a
// script (Lua costs the server about 3 µs a script before it does anything,
// and a hash's HMGET, HSET and PEXPIRE as much again). Calls stored as
// hashes by an earlier toolgate read as ErrCorrupt: never run again.
const (
	unmarked = '-'
	marked   = 'w'
)

// updateScript replaces a call if its state is still the expected one, and
// announces the change if a Wait marked the call. A retried run of the same
// write reports success. A value whose header does not parse is returned as
// a conflict, for the caller to find it damaged.
//
// It reads only the value's first headerRange bytes, which hold the header
// of any call the ledger writes (mark, state, op: under 50 bytes), and the
// whole value only on a conflict or when the header is not in them (a
// missing or damaged value): every string that enters Lua is copied and
// hashed byte by byte (the bounds are strings: Redis formats a Lua number
// with snprintf's %.17g).
//
// The new value is still an argument, hashed as it enters Lua. Staging it
// under a key of its own (a SET in the same pipeline) that the script
// renames over the call kept it out of Lua, for 5% fewer server
// instructions with a 1 KiB result and 57% fewer with 16 KiB (callgrind),
// but in CPU time it saved nothing at 1 KiB (redis-server 46 µs a call
// against 48, median of 4 runs) and 8% at 16 KiB, for a third command, six
// more allocations a call in the gateway, and a value left behind by a
// pipeline cut between its two commands.
//
// In the same step it keeps the caller's waiting list (Waiting) and the
// call's places in its limits on calls in flight (Create): a call that
// enters or stays in ActionRequired is put in its caller's list, which
// lives as long as its longest-kept call; one that leaves it is taken out;
// and one that leaves flight gives up its places. The Update of a call
// without a list to change and without such limits passes none of these
// (no more keys or arguments than before), and pays nothing for them.
//
// KEYS[1] call, then the caller's waiting list if ARGV[7] is set, then
// the limits whose places to release; ARGV: from, op, value, retention in
// ms, channel, key, then, for the list, 'a' (add, with ARGV[8] the call's
// Created in ms) or 'r' (remove). Returns 1 when replaced, the stored
// value on a conflict, nil when missing.
var updateScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], '0', '` + strconv.Itoa(headerRange-1) + `')
local i = string.find(h, '\n', 2, true)
local j = i and string.find(h, '\n', i + 1, true)
if not j then
	h = redis.call('GET', KEYS[1])
	if not h then return false end
	i = string.find(h, '\n', 2, true)
	j = i and string.find(h, '\n', i + 1, true)
	if not j then return h end
end
if string.sub(h, i + 1, j - 1) == ARGV[2] then return 1 end
if string.sub(h, 2, i - 1) ~= ARGV[1] then return redis.call('GET', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
local k = 2
if ARGV[7] == 'a' then
	redis.call('ZADD', KEYS[2], ARGV[8], ARGV[6])
	if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
	k = 3
elseif ARGV[7] == 'r' then
	redis.call('ZREM', KEYS[2], ARGV[6])
	k = 3
end
for i = k, #KEYS do redis.call('ZREM', KEYS[i], ARGV[6]) end
if string.byte(h) == 119 then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
`)

// headerRange is how much of a value updateScript reads first.
const headerRange = 64

// markScript reads a call for a Wait and, if it is still in the state the
// Wait waits to leave, marks it so that the Update that moves it on
// publishes. Marking and reading are one step: an Update either ran before
// (the read sees it) or after (it sees the mark). SETRANGE keeps the key's
// expiry.
//
// KEYS[1] call; ARGV: the state waited on.
// Returns the value as read, nil when missing.
var markScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
if string.byte(v) ~= 45 then return v end
local i = string.find(v, '\n', 2, true)
if i and string.find(v, '\n', i + 1, true) and string.sub(v, 2, i - 1) == ARGV[1] then
	redis.call('SETRANGE', KEYS[1], 0, 'w')
end
return v
`)

// takeBackScript deletes a call that a Create stored, if nothing changed
// it since (it holds the Create's op), takes it out of the limits it was
// counted against, and wakes the Waits a repeat of the call may have
// begun on it (which then find it gone).
//
// KEYS[1] call, then its limits; ARGV: op, channel, key.
// Returns 1 when deleted, else 0.
var takeBackScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local i = string.find(v, '\n', 2, true)
local j = i and string.find(v, '\n', i + 1, true)
if not j or string.sub(v, i + 1, j - 1) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[3]) end
if string.byte(v) == 119 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return 1
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
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("opening ledger at redis %s: negative replicas %d", opts.Addr, opts.Replicas)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	guard := &policyGuard{addr: opts.Addr, allow: opts.AllowEviction, logger: opts.Logger}
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
		OnConnect:     guard.check,
	})
	r := &Redis{
		client:    client,
		addr:      opts.Addr,
		prefix:    opts.Prefix,
		channel:   opts.Prefix + "done",
		retention: opts.Retention,
		replicas:  opts.Replicas,
		clock:     clock.Or(opts.Clock),
		waiters:   newWaiters(),
		opBase:    hex.EncodeToString(seed[:]) + ":",
		fannedOut: make(chan struct{}),
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if refused := (*EvictionError)(nil); errors.As(err, &refused) {
			return nil, fmt.Errorf("opening ledger at redis %s: %w", opts.Addr, refused)
		}
		return nil, r.unavailable("opening ledger", err)
	}
	guard.opened.Store(true)
	if r.replicas > 0 {
		// Too few replicas now may be a moment's: the ledger opens, and
		// its writes fail until they are back.
		if n, err := client.Wait(ctx, r.replicas, replicaWait).Result(); err != nil || n < int64(r.replicas) {
			opts.Logger.Error("the Redis server has fewer replicas than the ledger's replicas option asks to confirm each write: calls answer 503 until they connect",
				zap.String("addr", opts.Addr), zap.Int("replicas", r.replicas), zap.Int64("confirmed", n), zap.Error(err))
		}
	}

	// One subscription serves every Wait of this instance. The first
	// confirmation is read here so that no Update published after
	// OpenRedis returns can be missed.
	var err error
	if r.pubsub, err = Subscribe(ctx, client, r.channel); err != nil {
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

// queued is a command waiting for the next batch. done is closed once it
// has its reply, or once its caller is to send the batch lead (which it
// heads).
type queued struct {
	cmd  redis.Cmder
	done chan struct{}
	lead []*queued
}

// do runs cmd, a Create's or an Update's, and leaves its reply or error in
// it. While a command is in flight, those that come meanwhile wait and then
// go together, in one write and one read on both sides instead of one
// each: those syscalls, more than the commands, are what a call costs the
// server, and a good part of what it costs the gateway. A command that
// finds none in flight goes at once: alone, it waits for no one. go-redis
// sends a batch again whole if its connection fails; each write recognises
// itself by its op if it ran the first time.
//
// A waiting command cannot give up when its ctx ends: it may be the one
// to send the next batch. The wait is bounded by the batch in flight's
// timeouts (redisTimeout a step, MaxRetries).
func (r *Redis) do(ctx context.Context, cmd redis.Cmder) {
	r.batchMu.Lock()
	if !r.busy {
		r.busy = true
		r.batchMu.Unlock()
		r.send(ctx, cmd)
		r.next()
		return
	}
	q := &queued{cmd: cmd, done: make(chan struct{})}
	r.pending = append(r.pending, q)
	r.batchMu.Unlock()
	<-q.done
	if q.lead == nil {
		return
	}
	// The caller's ctx does not end a batch that carries others' commands.
	cmds := make([]redis.Cmder, len(q.lead))
	for i, q := range q.lead {
		cmds[i] = q.cmd
	}
	r.send(context.WithoutCancel(ctx), cmds...)
	for _, q := range q.lead[1:] {
		close(q.done)
	}
	r.next()
}

// send runs writes in one round trip and leaves their replies or errors in
// them. With Replicas set, a WAIT follows them in the same pipeline, so on
// the same connection, whose writes it waits for; if fewer replicas than
// asked confirm them in replicaWait, each write that succeeded fails.
func (r *Redis) send(ctx context.Context, cmds ...redis.Cmder) {
	if r.replicas == 0 && len(cmds) == 1 {
		_ = r.client.Process(ctx, cmds[0])
		return
	}
	pipe := r.client.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	var wait *redis.IntCmd
	if r.replicas > 0 {
		wait = redis.NewIntCmd(ctx, "wait", r.replicas, replicaWait.Milliseconds())
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx)
	if wait == nil {
		return
	}
	n, err := wait.Result()
	if err == nil && n >= int64(r.replicas) {
		return
	}
	unconfirmed := &unconfirmedError{confirmed: n, asked: r.replicas, err: err}
	for _, cmd := range cmds {
		if e := cmd.Err(); e == nil || errors.Is(e, redis.Nil) {
			cmd.SetErr(unconfirmed)
		}
	}
}

// unconfirmedError is a write that fewer replicas than asked confirmed
// within replicaWait (or whose WAIT failed, err). The server may have it.
type unconfirmedError struct {
	confirmed int64
	asked     int
	err       error
}

func (e *unconfirmedError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("waiting for %d replicas to confirm the write: %v", e.asked, e.err)
	}
	return fmt.Sprintf("%d of the %d replicas asked for confirmed the write within %s", e.confirmed, e.asked, replicaWait)
}

func (e *unconfirmedError) Unwrap() error { return e.err }

// next hands what waits to the first waiter to send, or marks none in
// flight.
func (r *Redis) next() {
	r.batchMu.Lock()
	batch := r.pending
	r.pending = nil
	if len(batch) == 0 {
		r.busy = false
	}
	r.batchMu.Unlock()
	if len(batch) > 0 {
		batch[0].lead = batch
		close(batch[0].done)
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

// callValue encodes the stored value of c, written by op (see unmarked),
// into a buffer of valueBufs, for releaseValue once the value is sent.
func callValue(c *Call, op string) (*bytes.Buffer, error) {
	v := valueBufs.Get().(*bytes.Buffer)
	v.Reset()
	v.WriteByte(unmarked)
	v.WriteString(string(c.State))
	v.WriteByte('\n')
	v.WriteString(op)
	v.WriteByte('\n')
	// Into the buffer's room, which is the size of the values before it
	// once the pool is warm: json.Marshal and a copy after the header
	// allocated each value twice (BenchmarkRedisCall parallel: 3.9 KB of
	// the 6.8 a call allocated).
	if err := json.MarshalWrite(v, c, callOptions); err != nil {
		releaseValue(v)
		return nil, fmt.Errorf("ledger: encoding call %q: %w", c.Key, err)
	}
	return v, nil
}

// valueBufs are the buffers of callValue. A value is sent by the time the
// command that carries it has its reply (do), and go-redis keeps no
// reference to it after.
var valueBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// releaseValue returns v to valueBufs, unless it grew larger than values
// usually are (a result of up to DefaultMaxResultSize is kept whole).
func releaseValue(v *bytes.Buffer) {
	if v.Cap() <= 2*DefaultMaxResultSize {
		valueBufs.Put(v)
	}
}

// splitValue returns the op and the JSON of a stored value.
func splitValue(key string, v string) (op, data string, err error) {
	if len(v) == 0 || (v[0] != unmarked && v[0] != marked) {
		return "", "", fmt.Errorf("%w: call %q: stored value has no header", ErrCorrupt, key)
	}
	_, rest, ok := strings.Cut(v[1:], "\n")
	if ok {
		op, data, ok = strings.Cut(rest, "\n")
	}
	if !ok {
		return "", "", fmt.Errorf("%w: call %q: stored value has no header", ErrCorrupt, key)
	}
	return op, data, nil
}

// decodeValue reads a stored value.
func decodeValue(key, v string) (*Call, error) {
	_, data, err := splitValue(key, v)
	if err != nil {
		return nil, err
	}
	return decodeCall(key, []byte(data))
}

// redisError wraps a failed command: a value of another type under a call's
// key (a hash, as an earlier toolgate stored calls) is a call that cannot be
// read, and everything else a server that cannot be used now.
func (r *Redis) redisError(what string, key string, err error) error {
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("%w: call %q: stored in another form (by an earlier version?): %w", ErrCorrupt, key, err)
	}
	return r.unavailable(what, err)
}

// Create implements Ledger with one SET NX GET: the server answers nil when
// it stored the call, and the value already there when not. A call with
// limits is one createScript instead, which counts it in the same step:
// still one command, in the same batch as the others.
func (r *Redis) Create(ctx context.Context, c *Call) (*Call, bool, error) {
	if err := checkCreate(c); err != nil {
		return nil, false, err
	}
	if err := checkLimits(c); err != nil {
		return nil, false, err
	}
	rec := stamp(c, r.clock)
	op := r.nextOp()
	v, err := callValue(rec, op)
	if err != nil {
		return nil, false, err
	}
	defer releaseValue(v)
	var prev string
	if len(rec.Limits) == 0 {
		cmd := redis.NewStringCmd(ctx, "set", r.callKey(c.Key), v.Bytes(), "px", r.ttl(rec), "nx", "get")
		r.do(ctx, cmd)
		prev, err = cmd.Result()
	} else {
		var over *OverLimitError
		if prev, over, err = r.createCounted(ctx, rec, v.Bytes()); over != nil {
			return nil, false, over
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil, true, nil
	}
	if err != nil && redis.HasErrorPrefix(err, "OOM") {
		// A server out of memory (noeviction) refuses the SET before it
		// looks: a repeat of a call it holds still gets its record,
		// while a new call fails and does not run.
		if cur, gerr := r.Get(ctx, c.Key); gerr == nil {
			return cur, false, nil
		}
	}
	if unconfirmed := (*unconfirmedError)(nil); errors.As(err, &unconfirmed) {
		// The call is not run, so the server may forget it: taking it
		// back lets a repeat, once the replicas confirm again, run it
		// rather than wait for it until its deadline and find it
		// "outcome unknown". If this fails too, that is what happens.
		keys := []string{r.callKey(c.Key)}
		for _, l := range rec.Limits {
			keys = append(keys, r.limitKey(l))
		}
		_ = takeBackScript.Run(context.WithoutCancel(ctx), r.client, keys, op, r.channel, c.Key).Err()
	}
	if err != nil {
		return nil, false, r.redisError(fmt.Sprintf("recording call %q", c.Key), c.Key, err)
	}
	prevOp, data, err := splitValue(c.Key, prev)
	if err != nil {
		return nil, false, err
	}
	if prevOp == op {
		return nil, true, nil
	}
	cur, err := decodeCall(c.Key, []byte(data))
	if err != nil {
		return nil, false, err
	}
	return cur, false, nil
}

// Get implements Ledger.
func (r *Redis) Get(ctx context.Context, key string) (*Call, error) {
	v, err := r.client.Get(ctx, r.callKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.redisError(fmt.Sprintf("reading call %q", key), key, err)
	}
	return decodeValue(key, v)
}

// write sends args, an EVALSHA of script, as writes go (do: batched, its
// WAIT with it), and returns its reply. A server that does not have the
// script yet (or no more: it restarted) ran nothing: the script is loaded
// and the write sent again.
func (r *Redis) write(ctx context.Context, script *redis.Script, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	r.do(ctx, cmd)
	reply, err := cmd.Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = script.Load(ctx, r.client).Err(); err == nil {
			cmd = redis.NewCmd(ctx, args...)
			r.do(ctx, cmd)
			reply, err = cmd.Result()
		}
	}
	return reply, err
}

// Update implements Ledger.
func (r *Redis) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	rec := stamp(c, r.clock)
	op := r.nextOp()
	v, err := callValue(rec, op)
	if err != nil {
		return nil, err
	}
	defer releaseValue(v)
	reply, err := r.write(ctx, updateScript, r.updateArgs(rec, from, op, v.Bytes()))
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.redisError(fmt.Sprintf("updating call %q", c.Key), c.Key, err)
	}
	switch reply := reply.(type) {
	case int64:
		// Waiters here need not wait for a message from the server
		// (which is sent only if one marked the call).
		r.waiters.notify(c.Key)
		return rec, nil
	case string:
		cur, err := decodeValue(c.Key, reply)
		if err != nil {
			return nil, err
		}
		return cur, ErrConflict
	}
	return nil, r.unavailable(fmt.Sprintf("updating call %q", c.Key), fmt.Errorf("unexpected script reply %#v", reply))
}

// Wait implements Ledger. It wakes on this instance's Updates at once and
// on other instances' through the shared subscription: each of its reads
// marks the call (markScript), so that the Update that moves the call on,
// on any instance, publishes it.
func (r *Redis) Wait(ctx context.Context, key string, state State) (*Call, error) {
	return r.waiters.wait(ctx, key, state, func(ctx context.Context, key string) (*Call, error) {
		v, err := markScript.Run(ctx, r.client, []string{r.callKey(key)}, string(state)).Text()
		if errors.Is(err, redis.Nil) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, r.redisError(fmt.Sprintf("reading call %q", key), key, err)
		}
		return decodeValue(key, v)
	})
}

// Close ends the subscription, releases every Wait and closes the client.
// Records implements Ledger: the Redis ledger keeps every call.
func (r *Redis) Records() bool { return true }

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
