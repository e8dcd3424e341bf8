package clienttools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/ledger"
)

// With the Redis ledger the bridge keeps the calls' state in Redis, so that
// every gateway instance on the server and prefix is equal: a call offered
// on one reaches the pages streaming from any, a claim or a result posted on
// any counts everywhere, and the first outcome (result or timeout) wins.
//
// What Redis holds, under the ledger's prefix P and, for a Thread (user,
// installation, thread), T = hex SHA-256 of the three, the user and the
// installation each after its length (threadKey: no user, installation or
// thread text shapes a key, and ("a:b", "c") is not ("a", "b:c")):
//
//	P ct:T:c:<call id>  hash: s = w (waiting) | c (claimed) | d (finished),
//	                    o = the offer's JSON while it waits, r = the
//	                    posted outcome (read by the instance that runs the
//	                    call, whichever of its message or its timer comes
//	                    first), g = the message that drops the call, set
//	                    when its caller went away while a page streamed.
//	                    It expires the timeout and a minute after the
//	                    offer (an instance that died never finishes its
//	                    calls), keepFinished after it finished.
//	P ct:T:w            sorted set: the thread's unfinished call ids by
//	                    arrival (P ct:seq), for Open and for lapsing claims.
//	P ct:T:s            hash: instance id -> its open streams of the thread.
//	                    The entry of an instance that died is dropped by
//	                    the thread's next open or close of a stream.
//	P ct:live:<id>      an instance's heartbeat, set every streamBeat for
//	                    3 × streamBeat: the stream counts of an instance
//	                    whose heartbeat expired (it died) do not count.
//
// Each step that reads and writes is one Lua script, so it is atomic across
// instances. The scripts name call keys from a prefix they are given
// (a thread's calls are found from its sorted set), so they need one Redis
// server, not a cluster, as the ledger does.
//
// Changes travel on one channel, P ct, through one subscription per
// instance: an offer goes to every instance (each hands it to its own
// streams of the thread), a result to the instance waiting for it. An
// offer carries its sequence number, and a stream takes only offers later
// than the calls Open listed for it: a message late from the server never
// brings a stream a call that was claimed when it opened, nor one twice.
// Messages and values read back are bounded (maxMessage) and checked.
//
// Nothing polls. When the subscription comes back after the connection or
// the server was lost, the instance writes again what it holds — its
// heartbeat, its stream counts, its waiting calls (recorded again if the
// server lost them) — hands its streams the calls that wait unclaimed
// (their offers may have been missed; a page skips a call it has seen) and
// reads the results it missed. Meanwhile Run, Open, Claim and Post fail
// with ErrUnavailable; a Run that times out then ends here only.
//
// The lapse rule holds across instances: claims lapse when a stream
// closes and no instance has a live open stream of the thread left, and,
// for an instance that died with streams open, when the next stream opens
// and finds none live. Then too the calls whose caller went away are
// dropped (finished without an outcome, announced like a result so that
// the instance running the call ends it); a call whose caller goes away
// while no instance has a live stream of its thread is dropped at once.
//
// The limits (Limits) stay per instance: each counts its own waiting
// calls, in all, per user and per thread, and its own streams, in all, per
// thread and per token.

// maxMessage bounds an offer or an outcome the bridge writes to Redis or
// reads back: well above the request size limit's default (1 MiB) that
// bounds both, so that only a config that raised it far, or a hostile
// writer to the server, meets it.
const maxMessage = 8 << 20

// maxOpenOffers and maxOpenBytes bound the waiting calls Open reads back
// for a stream; the ones left out reach the page when it opens again.
const (
	maxOpenOffers = 1024
	maxOpenBytes  = 4 * maxMessage
)

// streamBeat is how often an instance renews its heartbeat; it lapses
// after three missed beats.
const streamBeat = 10 * time.Second

// ErrUnavailable: Redis could not be reached to offer, open, claim or post
// a call. The cause is in the gateway's log.
var ErrUnavailable = errors.New("client tools are unavailable: the gateway cannot reach its redis")

// offerScript records a new call waiting for its page and announces it.
// With mode "again" (an instance writing back its waiting calls after Redis
// or the subscription was lost) a call still unfinished is left as it is,
// announced again if unclaimed (its first message may have been lost with
// a subscription; a page skips a call it has seen), and one finished
// answers its outcome.
//
// KEYS: call, waiting, seq. ARGV: offer, ttl ms, channel, message, id, mode.
// Returns {1} when recorded (or kept), {0} when the call already waits, {2,
// outcome or false} when it finished (mode again).
var offerScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 's')
if s and s ~= 'd' then
	if ARGV[6] ~= 'again' then return {0} end
	if s == 'w' then
		local seq = redis.call('ZSCORE', KEYS[2], ARGV[5]) or '0'
		redis.call('PUBLISH', ARGV[3], seq .. ' ' .. ARGV[4])
	end
	return {1}
end
if s == 'd' and ARGV[6] == 'again' then
	return {2, redis.call('HGET', KEYS[1], 'r')}
end
local seq = redis.call('INCR', KEYS[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'w', 'o', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[5])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
	redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], seq .. ' ' .. ARGV[4])
return {1}
`)

// claimScript claims a waiting call.
//
// KEYS: call. Returns 0 when there is no such call, 1 when it is claimed
// or finished, 2 when this claim won.
var claimScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 's')
if not s then return 0 end
if s ~= 'w' then return 1 end
redis.call('HSET', KEYS[1], 's', 'c')
return 2
`)

// finishScript ends a call with the page's outcome, or without one when
// it timed out (empty outcome); only the first finish counts. A posted
// outcome is announced to the instance that waits for it.
//
// KEYS: call, waiting. ARGV: outcome, keep ms, channel, message, id.
// Returns {0} when there is no such call, {1, outcome or false} when it had
// finished already, {2} when this finish won.
var finishScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 's')
if not s then return {0} end
if s == 'd' then return {1, redis.call('HGET', KEYS[1], 'r')} end
redis.call('HSET', KEYS[1], 's', 'd')
redis.call('HDEL', KEYS[1], 'o')
if ARGV[1] ~= '' then
	redis.call('HSET', KEYS[1], 'r', ARGV[1])
	redis.call('PUBLISH', ARGV[3], '0 ' .. ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[5])
return {2}
`)

// liveLua is the lapse rule, shared by the stream scripts. live reports
// whether an instance with a live heartbeat has a stream of the thread
// open, and whether an instance that died had one (its count is forgotten
// then); lapse makes the thread's claimed calls wait again, and drops the
// calls whose caller went away, announcing each.
//
// KEYS: waiting, streams. ARGV[2]: heartbeat key prefix, ARGV[3]: call key
// prefix, ARGV[4]: channel, ARGV[5]: keep ms. (ARGV[1], the instance, is
// the stream scripts'; each script's own arguments follow.)
const liveLua = `
local function live()
	local f = redis.call('HGETALL', KEYS[2])
	local any, dead = false, false
	for i = 1, #f, 2 do
		local open = (tonumber(f[i+1]) or 0) > 0
		if open and redis.call('EXISTS', ARGV[2] .. f[i]) == 1 then
			any = true
		else
			dead = dead or open
			redis.call('HDEL', KEYS[2], f[i])
		end
	end
	return any, dead
end
local function lapse()
	for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
		local k = ARGV[3] .. id
		local c = redis.call('HMGET', k, 's', 'g')
		if c[1] and c[1] ~= 'd' and c[2] then
			redis.call('HSET', k, 's', 'd')
			redis.call('HDEL', k, 'o')
			redis.call('PEXPIRE', k, ARGV[5])
			redis.call('ZREM', KEYS[1], id)
			redis.call('PUBLISH', ARGV[4], '0 ' .. c[2])
		elseif c[1] == 'c' then
			redis.call('HSET', k, 's', 'w')
		end
	end
end
`

// openScript counts a new stream of this instance and returns the calls
// that wait unclaimed, oldest first. When no live stream is open but an
// instance that died had one, that was the thread's last stream: the
// claims lapse first, as its close would have made them.
//
// KEYS: waiting, streams, seq. ARGV: instance, heartbeat prefix, call
// prefix, channel, keep ms, max offers, max bytes. Returns list's.
var openScript = redis.NewScript(liveLua + listLua + `
local any, dead = live()
if dead and not any then lapse() end
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
return list()
`)

// listLua lists the thread's calls that wait unclaimed, oldest first,
// forgetting the ids of calls that expired. Its first element is the last
// offer's sequence number now: a call offered later is not in the list,
// and its message is the one to send.
//
// KEYS[1]: waiting, KEYS[3]: seq. ARGV[3]: call prefix, ARGV[6]: max
// offers, ARGV[7]: max bytes.
const listLua = `
local function list()
	local out, bytes = {redis.call('GET', KEYS[3]) or '0'}, 0
	for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
		local c = redis.call('HMGET', ARGV[3] .. id, 's', 'o')
		if not c[1] then
			redis.call('ZREM', KEYS[1], id)
		elseif c[1] == 'w' and c[2] and #out <= tonumber(ARGV[6]) and bytes + #c[2] <= tonumber(ARGV[7]) then
			out[#out+1] = c[2]
			bytes = bytes + #c[2]
		end
	end
	return out
end
`

// recountScript writes back this instance's count of open streams of the
// thread, after Redis or the subscription was lost, and returns the calls
// that wait unclaimed for those streams (offers published meanwhile were
// missed; a page skips a call it has seen). With no live stream left the
// claims lapse, as a close would have made them.
//
// KEYS: waiting, streams, seq. ARGV: instance, heartbeat prefix, call
// prefix, channel, keep ms, max offers, max bytes, count. Returns list's,
// or nothing.
var recountScript = redis.NewScript(liveLua + listLua + `
if tonumber(ARGV[8]) > 0 then
	redis.call('HSET', KEYS[2], ARGV[1], ARGV[8])
else
	redis.call('HDEL', KEYS[2], ARGV[1])
end
if not live() then
	lapse()
	return {}
end
return list()
`)

// closeScript counts a stream of this instance closed; when none live is
// left, the thread's claims lapse.
//
// KEYS: waiting, streams. ARGV: instance, heartbeat prefix, call prefix,
// channel, keep ms.
var closeScript = redis.NewScript(liveLua + `
if redis.call('HINCRBY', KEYS[2], ARGV[1], -1) <= 0 then
	redis.call('HDEL', KEYS[2], ARGV[1])
end
if not live() then lapse() end
return 1
`)

// leaveScript is a Run's step when its caller went away: the call is
// kept, marked with the message that drops it, while an instance has a
// live stream of its thread open; otherwise it is dropped now (finished
// without an outcome), and if an instance that died had the thread's last
// stream, its claims lapse as a close would have made them.
//
// KEYS: waiting, streams, call. ARGV: instance (unused), heartbeat prefix,
// call prefix, channel, keep ms, id, drop message. Returns {0} when there
// is no such call, {1, outcome or false} when it had finished, {2} when it
// is kept, {3} when it was dropped.
var leaveScript = redis.NewScript(liveLua + `
local s = redis.call('HGET', KEYS[3], 's')
if not s then return {0} end
if s == 'd' then return {1, redis.call('HGET', KEYS[3], 'r')} end
local any, dead = live()
if any then
	redis.call('HSET', KEYS[3], 'g', ARGV[7])
	return {2}
end
redis.call('HSET', KEYS[3], 's', 'd')
redis.call('HDEL', KEYS[3], 'o')
redis.call('PEXPIRE', KEYS[3], ARGV[5])
redis.call('ZREM', KEYS[1], ARGV[6])
if dead then lapse() end
return {3}
`)

// redisRelay is NewRedisRelay's relay.
type redisRelay struct {
	h       receiver
	client  *redis.Client
	prefix  string // P ct:
	channel string
	id      string // this instance
	beat    time.Duration
	logger  *zap.Logger

	pubsub *redis.PubSub
	// ctx bounds the background work (heartbeat, write-backs); Close
	// cancels it rather than wait for a Redis that is gone.
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
	// counting is held for writing by a write-back of the stream counts,
	// for reading by open and closeStream: the counts written back are
	// never those of a stream counted here and not yet in Redis, or the
	// reverse.
	counting sync.RWMutex
	countMu  sync.Mutex
	// streams counts this instance's open streams by thread, as Redis
	// has them; stale holds the threads whose count in Redis may be too
	// high: closing a stream could not reach it. Both are written back
	// when the subscription comes back.
	streams   map[Thread]int
	stale     map[Thread]struct{}
	closeOnce sync.Once
}

// messageOptions read and write the offers and messages in Redis as
// encoding/json did: a call's input, as the gateway took it, or a user or
// thread id may hold invalid UTF-8.
var messageOptions = jsontext.AllowInvalidUTF8(true)

// message is what travels on the channel: an offer ("o") for the streams
// of a Thread, or a call finished by another instance ("d": a posted
// outcome, or dropped) for the instance running it.
type message struct {
	Kind    string `json:"k"`
	User    string `json:"u"`
	Install string `json:"i,omitempty"`
	Thread  string `json:"t"`
	Call    string `json:"c,omitempty"`
	Offer   *Offer `json:"o,omitempty"`
}

// NewRedisRelay returns a relay that shares the calls, through Redis, with
// the bridges of every instance on the same server and prefix (the
// ledger's). It subscribes now and fails if Redis cannot be reached; then
// it rides out Redis going away, failing operations with ErrUnavailable
// meanwhile. Close it before closing the client.
func NewRedisRelay(ctx context.Context, client *redis.Client, prefix string, logger *zap.Logger) (Relay, error) {
	return newRedisRelay(ctx, client, prefix, logger, streamBeat)
}

func newRedisRelay(ctx context.Context, client *redis.Client, prefix string, logger *zap.Logger, beat time.Duration) (*redisRelay, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	r := &redisRelay{
		client: client, prefix: prefix + "ct:", channel: prefix + "ct",
		id: hex.EncodeToString(id[:]), beat: beat, logger: logger,
		streams: map[Thread]int{}, stale: map[Thread]struct{}{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.heartbeat(ctx); err != nil {
		r.cancel()
		return nil, fmt.Errorf("client tool bridge: %w", err)
	}
	// The first confirmation is read here so that no offer published
	// after NewRedisRelay returns can be missed: the messages wait in the
	// subscription until attach starts reading them.
	var err error
	if r.pubsub, err = ledger.Subscribe(ctx, client, r.channel); err != nil {
		r.cancel()
		return nil, fmt.Errorf("client tool bridge: subscribing to %s: %w", r.channel, err)
	}
	return r, nil
}

// attach starts handing the channel's messages to h, and the heartbeat:
// messages published since the subscription wait for it.
func (r *redisRelay) attach(h receiver) {
	r.h = h
	r.done.Add(2)
	go r.receive(r.pubsub.ChannelWithSubscriptions(
		redis.WithChannelHealthCheckInterval(3*time.Second),
		redis.WithChannelPingTimeout(time.Second),
		redis.WithChannelReconnectTimeout(time.Second),
	))
	go r.beating()
}

// Close ends the relay's subscription and heartbeat; the calls and
// streams it holds are left to expire.
func (r *redisRelay) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.cancel()
		err = r.pubsub.Close()
		r.done.Wait()
		// Its streams stop counting at once rather than when the
		// heartbeat would have expired.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.client.Del(ctx, r.liveKey()).Err()
	})
	return err
}

func (r *redisRelay) liveKey() string { return r.prefix + "live:" + r.id }

func (r *redisRelay) heartbeat(ctx context.Context) error {
	return r.client.Set(ctx, r.liveKey(), "1", 3*r.beat).Err()
}

func (r *redisRelay) beating() {
	defer r.done.Done()
	t := time.NewTicker(r.beat)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
			if err := r.heartbeat(ctx); err != nil {
				r.logger.Warn("client tool bridge: renewing the heartbeat in redis", zap.Error(err))
			}
			cancel()
		}
	}
}

// receive hands the channel's messages to the bridge, and writes back what
// this instance holds on each new subscription: messages published while
// the connection was down were lost, and Redis may have lost its state.
func (r *redisRelay) receive(msgs <-chan any) {
	defer r.done.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			r.handle(m.Payload)
		case *redis.Subscription:
			r.done.Add(1)
			go func() {
				defer r.done.Done()
				r.resync()
			}()
		}
	}
}

// handle reads a message: the offer's sequence number (0 for a result), a
// space, the message's JSON.
func (r *redisRelay) handle(payload string) {
	if len(payload) > maxMessage+4096 {
		r.logger.Warn("client tool bridge: dropped an oversized message", zap.Int("bytes", len(payload)))
		return
	}
	var m message
	num, text, _ := strings.Cut(payload, " ")
	seq, err := strconv.ParseUint(num, 10, 64)
	if err == nil {
		err = json.Unmarshal([]byte(text), &m, messageOptions)
	}
	if err != nil {
		r.logger.Warn("client tool bridge: dropped a malformed message", zap.Error(err))
		return
	}
	tk := Thread{m.User, m.Install, m.Thread}
	switch {
	case m.Kind == "o" && m.Offer != nil:
		r.h.deliver(tk, *m.Offer, seq)
	case m.Kind == "d":
		r.fetch(callKey{tk, m.Call})
	}
}

// fetch reads the outcome of a call this instance runs, when another
// instance posted it, and hands it to the waiting Run; or ends the Run
// with ErrCallerGone when the call was dropped.
func (r *redisRelay) fetch(k callKey) {
	if !r.h.runs(k) {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	v, err := r.client.HMGet(ctx, r.callKey(k), "s", "r").Result()
	if err != nil {
		// The Run takes it when it times out.
		r.logger.Warn("client tool bridge: reading a posted result", zap.Error(err))
		return
	}
	state, _ := v[0].(string)
	result, posted := v[1].(string)
	switch {
	case posted:
		if o, err := decodeOutcome(result); err == nil {
			r.h.answer(k, ending{out: o})
		}
	case state == "d":
		// Finished without an outcome by another instance: only a drop
		// does that (a timeout is the running instance's own).
		r.h.answer(k, ending{err: ErrCallerGone})
	}
}

// resync writes back this instance's heartbeat, stream counts and waiting
// calls, and takes the outcomes posted while it could not hear them.
func (r *redisRelay) resync() {
	ctx, cancel := context.WithTimeout(r.ctx, 4*opTimeout)
	defer cancel()
	// Opens and closes wait while the counts are written back; the calls
	// need no lock (recording one again is idempotent).
	r.counting.Lock()
	streams, calls := r.counts(), r.h.held()
	err := r.heartbeat(ctx)
	for tk, n := range streams {
		if err != nil {
			break
		}
		var offers []Offer
		if offers, err = r.recount(ctx, tk, n); err == nil {
			r.countMu.Lock()
			delete(r.stale, tk)
			r.countMu.Unlock()
		}
		// Sent whatever their number: these are the ones whose message
		// may have been lost.
		for _, o := range offers {
			r.h.deliver(tk, o, math.MaxUint64)
		}
	}
	r.counting.Unlock()
	for _, c := range calls {
		if err != nil {
			break
		}
		var finished bool
		var o *Outcome
		finished, o, err = r.offer(ctx, c.k, c.offer, c.timeout, true)
		switch {
		case err != nil || !finished:
		case o != nil:
			r.h.answer(c.k, ending{out: *o})
		case c.gone:
			// Finished without an outcome while this instance could
			// not hear it: dropped when the thread's last stream closed.
			r.h.answer(c.k, ending{err: ErrCallerGone})
		}
	}
	if err != nil {
		r.logger.Error("client tool bridge: writing back its calls and streams after redis came back", zap.Error(err))
	}
}

// counts returns this instance's open streams by thread, to write back:
// zero for a thread whose count in Redis may be stale.
func (r *redisRelay) counts() map[Thread]int {
	r.countMu.Lock()
	defer r.countMu.Unlock()
	streams := make(map[Thread]int, len(r.streams)+len(r.stale))
	for tk := range r.stale {
		streams[tk] = 0
	}
	for tk, n := range r.streams {
		streams[tk] = n
	}
	return streams
}

// count adds d to this instance's open streams of tk.
func (r *redisRelay) count(tk Thread, d int) {
	r.countMu.Lock()
	defer r.countMu.Unlock()
	if r.streams[tk] += d; r.streams[tk] <= 0 {
		delete(r.streams, tk)
	}
}

// threadKey is P ct:T.
func (r *redisRelay) threadKey(tk Thread) string {
	h := sha256.New()
	// Lengths first: ("ab", "c") and ("a", "bc") differ. A thread of no
	// installation hashes as before installations were in the key, so
	// that its calls outlive an upgrade; one of an installation begins
	// with "i", never a digit, so neither is ever the other.
	if tk.Install == "" {
		fmt.Fprintf(h, "%d:%s%s", len(tk.User), tk.User, tk.ID)
	} else {
		fmt.Fprintf(h, "i%d:%s%d:%s%s", len(tk.User), tk.User, len(tk.Install), tk.Install, tk.ID)
	}
	return r.prefix + hex.EncodeToString(h.Sum(nil))
}

func (r *redisRelay) callKey(k callKey) string { return r.threadKey(k.Thread) + ":c:" + k.callID }

// streamArgs are the arguments every stream script begins with (liveLua's).
func (r *redisRelay) streamArgs(tkey string, more ...any) []any {
	return append([]any{r.id, r.prefix + "live:", tkey + ":c:", r.channel, ms(keepFinished)}, more...)
}

// dropMessage is the message that announces k dropped.
func dropMessage(k callKey) ([]byte, error) {
	return json.Marshal(message{Kind: "d", User: k.User, Install: k.Install, Thread: k.ID, Call: k.callID}, messageOptions)
}

func (r *redisRelay) unavailable(what string, err error) error {
	r.logger.Error("client tool bridge: "+what, zap.Error(err))
	return ErrUnavailable
}

// offer records a call in Redis and announces it to every instance's
// streams. In mode "again" it reports a call that finished, and its
// outcome if it has one.
func (r *redisRelay) offer(ctx context.Context, k callKey, o Offer, ttl time.Duration, again bool) (finished bool, out *Outcome, err error) {
	mode := "new"
	if again {
		mode = "again"
	}
	data, err := json.Marshal(o, messageOptions)
	if err != nil {
		return false, nil, err
	}
	if len(data) > maxMessage {
		return false, nil, fmt.Errorf("the call's input is larger than %d bytes", maxMessage)
	}
	msg, err := json.Marshal(message{Kind: "o", User: k.User, Install: k.Install, Thread: k.ID, Offer: &o}, messageOptions)
	if err != nil {
		return false, nil, err
	}
	tkey := r.threadKey(k.Thread)
	v, err := offerScript.Run(ctx, r.client, []string{r.callKey(k), tkey + ":w", r.prefix + "seq"},
		data, ms(ttl+time.Minute), r.channel, msg, k.callID, mode).Slice()
	if err != nil {
		return false, nil, r.unavailable("offering a call", err)
	}
	switch n, _ := v[0].(int64); {
	case n == 0:
		return false, nil, errors.New("this client call is already waiting for its page")
	case n == 2 && len(v) == 2:
		if s, ok := v[1].(string); ok {
			out, err := decodeOutcome(s)
			if err != nil {
				return true, nil, err
			}
			return true, &out, nil
		}
		return true, nil, nil
	}
	return false, nil, nil
}

// finish ends a call in Redis with the page's outcome, or without one when
// it timed out (o nil). It reports whether this finish won, and when it did
// not and the call had a result, that result.
func (r *redisRelay) finish(ctx context.Context, k callKey, o *Outcome) (bool, *Outcome, error) {
	var data string
	var msg []byte
	if o != nil {
		data = encodeOutcome(*o)
		if len(data) > maxMessage+1 {
			return false, nil, fmt.Errorf("the result is larger than %d bytes", maxMessage)
		}
		var err error
		if msg, err = dropMessage(k); err != nil {
			return false, nil, err
		}
	}
	v, err := finishScript.Run(ctx, r.client, []string{r.callKey(k), r.threadKey(k.Thread) + ":w"},
		data, ms(keepFinished), r.channel, msg, k.callID).Slice()
	if err != nil {
		return false, nil, r.unavailable("finishing a call", err)
	}
	switch n, _ := v[0].(int64); n {
	case 0:
		return false, nil, ErrNotFound
	case 2:
		return true, nil, nil
	}
	if len(v) == 2 {
		if s, ok := v[1].(string); ok {
			if out, err := decodeOutcome(s); err == nil {
				return false, &out, nil
			}
		}
	}
	return false, nil, nil
}

func (r *redisRelay) claim(ctx context.Context, k callKey) error {
	n, err := claimScript.Run(ctx, r.client, []string{r.callKey(k)}).Int()
	switch {
	case err != nil:
		return r.unavailable("claiming a call", err)
	case n == 0:
		return ErrNotFound
	case n == 1:
		return ErrConflict
	}
	return nil
}

// open counts a stream of tk open and returns the calls waiting unclaimed,
// and the last offer's number then.
func (r *redisRelay) open(ctx context.Context, tk Thread) ([]Offer, uint64, error) {
	r.counting.RLock()
	defer r.counting.RUnlock()
	tkey := r.threadKey(tk)
	v, err := openScript.Run(ctx, r.client, []string{tkey + ":w", tkey + ":s", r.prefix + "seq"},
		r.streamArgs(tkey, maxOpenOffers, maxOpenBytes)...).StringSlice()
	if err != nil {
		return nil, 0, r.unavailable("opening a stream", err)
	}
	r.count(tk, 1)
	offers, since := decodeList(v)
	return offers, since, nil
}

// recount writes back this instance's count of open streams of tk and
// returns the calls waiting unclaimed for them.
func (r *redisRelay) recount(ctx context.Context, tk Thread, n int) ([]Offer, error) {
	tkey := r.threadKey(tk)
	v, err := recountScript.Run(ctx, r.client, []string{tkey + ":w", tkey + ":s", r.prefix + "seq"},
		r.streamArgs(tkey, maxOpenOffers, maxOpenBytes, n)...).StringSlice()
	if err != nil {
		return nil, err
	}
	offers, _ := decodeList(v)
	return offers, nil
}

// decodeList reads list's reply: the last offer's number, then offers.
func decodeList(v []string) ([]Offer, uint64) {
	if len(v) == 0 {
		return nil, 0
	}
	since, _ := strconv.ParseUint(v[0], 10, 64)
	offers := make([]Offer, 0, len(v)-1)
	for _, s := range v[1:] {
		var o Offer
		if len(s) > maxMessage || json.Unmarshal([]byte(s), &o, messageOptions) != nil {
			continue // not one of ours: never shown to a page
		}
		offers = append(offers, o)
	}
	return offers, since
}

// closeStream counts a stream of tk closed, here and in Redis; when Redis
// cannot be reached, its count there is written back later.
func (r *redisRelay) closeStream(ctx context.Context, tk Thread) error {
	r.counting.RLock()
	defer r.counting.RUnlock()
	r.count(tk, -1)
	tkey := r.threadKey(tk)
	err := closeScript.Run(ctx, r.client, []string{tkey + ":w", tkey + ":s"}, r.streamArgs(tkey)...).Err()
	if err != nil {
		r.countMu.Lock()
		r.stale[tk] = struct{}{}
		r.countMu.Unlock()
		return r.unavailable("closing a stream", err)
	}
	return nil
}

// leave drops k, whose caller went away, unless an instance has a live
// stream of its thread: then it reports kept, and the call is dropped when
// the thread's last stream closes. posted is the outcome of a call that
// had one already.
func (r *redisRelay) leave(ctx context.Context, k callKey) (kept bool, posted *Outcome, err error) {
	msg, err := dropMessage(k)
	if err != nil {
		return false, nil, err
	}
	tkey := r.threadKey(k.Thread)
	v, err := leaveScript.Run(ctx, r.client, []string{tkey + ":w", tkey + ":s", r.callKey(k)},
		r.streamArgs(tkey, k.callID, msg)...).Slice()
	if err != nil {
		return false, nil, r.unavailable("dropping a call whose caller went away", err)
	}
	switch n, _ := v[0].(int64); {
	case n == 2:
		return true, nil, nil
	case n == 1 && len(v) == 2:
		if s, ok := v[1].(string); ok {
			if out, err := decodeOutcome(s); err == nil {
				return false, &out, nil
			}
		}
	}
	return false, nil, nil
}

// encodeOutcome writes an outcome for Redis byte for byte as the page
// posted it: a JSON encoder would rewrite the value's text (escaping <, >
// and &), which must stay as the page serialized it. The first byte
// says what follows: r a value, e an error text, u undefined. It is never
// empty, which finishScript reads as a timeout.
func encodeOutcome(o Outcome) string {
	switch {
	case o.Error != nil:
		return "e" + *o.Error
	case len(o.Result) == 0:
		return "u"
	}
	return "r" + string(o.Result)
}

func decodeOutcome(s string) (Outcome, error) {
	if len(s) > maxMessage+1 {
		return Outcome{}, fmt.Errorf("a result in redis is larger than %d bytes", maxMessage)
	}
	switch {
	case s == "u":
		return Outcome{}, nil
	case len(s) > 0 && s[0] == 'e':
		msg := s[1:]
		return Outcome{Error: &msg}, nil
	case len(s) > 0 && s[0] == 'r':
		return Outcome{Result: jsontext.Value(s[1:])}, nil
	}
	return Outcome{}, errors.New("a result in redis is not one the bridge wrote")
}

// ms is d in milliseconds, as PEXPIRE takes it.
func ms(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}
