package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// createScript is a Create of a call with limits: SET NX GET and the
// count against each limit in one step, so that of concurrent Creates on
// any instance exactly Max pass a limit, and a call refused is neither
// recorded nor counted. Each limit is a sorted set of call keys
// (limitKey): a window's scored by when each call was created, pruned of
// those that left it; calls in flight scored by when each place lapses
// (placeLapse), pruned of those lapsed, and released by updateScript.
// Adding a call gives the set an expiry no earlier than its newest entry
// leaves it, so a limit no call counts against any more is not kept: a
// window's, a window from now (or from when the call was created, if
// later), which a later call only moves on; a set of places, the call's
// lapse if that is later than the set's expiry (deadlines differ by
// tool).
//
// One script rather than a check in front of the SET NX GET: counting
// adds no round trip to the Create's, and rides in its batch (do). A call
// without limits keeps the SET NX GET, which costs the server less (see
// callValue). BenchmarkRedisLimits, a Create and an Update with two
// limits against none (3 runs, on a 2-core machine shared with other
// builds): parallel 104-161 µs a call against 89-138, redis-server 61-71
// µs of CPU against 41-52 and this process 43-49 against 28-35; serial
// 236-425 µs against 182-239.
//
// KEYS[1] call, KEYS[2..] limits; ARGV: value, retention in ms, now in
// ms, key, then for each limit its Max, its window in ms (0: in flight)
// and the call's score in it. Returns nil when stored, the value already
// there when not, or {limit index from 0, ms until it lets a call
// through} when a limit is full.
var createScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
local now = tonumber(ARGV[3])
for i = 2, #KEYS do
	local a = 5 + (i - 2) * 3
	local max, win = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
	redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - win)
	if redis.call('ZCARD', KEYS[i]) >= max then
		local retry = win
		if win > 0 then
			local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
			if oldest[2] then retry = tonumber(oldest[2]) + win - now end
		end
		return {i - 2, retry}
	end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
for i = 2, #KEYS do
	local a = 5 + (i - 2) * 3
	redis.call('ZADD', KEYS[i], ARGV[a + 2], ARGV[4])
	local ttl = tonumber(ARGV[a + 2]) + tonumber(ARGV[a + 1]) - now
	if ttl < 1 then ttl = 1 end
	if tonumber(ARGV[a + 1]) > 0 then
		if ttl < tonumber(ARGV[a + 1]) then ttl = tonumber(ARGV[a + 1]) end
		redis.call('PEXPIRE', KEYS[i], ttl)
	elseif redis.call('PTTL', KEYS[i]) < ttl then
		redis.call('PEXPIRE', KEYS[i], ttl)
	end
end
return false
`)

// limitKey is the sorted set of the calls counted against l.
func (r *Redis) limitKey(l Limit) string { return r.prefix + "quota:" + l.Key }

// waitingKey is the sorted set of the calls of user in install that wait
// for a person, scored by when each was created.
func (r *Redis) waitingKey(user, install string) string {
	return r.prefix + "waiting:" + user + "\x1f" + install
}

func unixMilli(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// createCounted runs createScript for rec, whose value is value. err is
// redis.Nil when it stored the call; over names the full limit.
func (r *Redis) createCounted(ctx context.Context, rec *Call, value []byte) (prev string, over *OverLimitError, err error) {
	now := r.clock.Now()
	args := make([]any, 0, 3+len(rec.Limits)*4+4)
	args = append(args, "evalsha", createScript.Hash(), 1+len(rec.Limits), r.callKey(rec.Key))
	for _, l := range rec.Limits {
		args = append(args, r.limitKey(l))
	}
	args = append(args, value, r.ttl(rec), unixMilli(now), rec.Key)
	for _, l := range rec.Limits {
		score := rec.Created
		if l.Concurrent() {
			score = placeLapse(rec, r.retention)
		}
		args = append(args, l.Max, l.WindowDuration().Milliseconds(), unixMilli(score))
	}
	reply, err := r.write(ctx, createScript, args)
	if err != nil {
		return "", nil, err
	}
	switch reply := reply.(type) {
	case string:
		return reply, nil, nil
	case []any:
		if len(reply) == 2 {
			i, iok := reply[0].(int64)
			ms, mok := reply[1].(int64)
			if iok && mok && i >= 0 && int(i) < len(rec.Limits) {
				l := rec.Limits[i]
				retry := max(time.Duration(ms)*time.Millisecond, time.Millisecond)
				if l.Concurrent() {
					retry = ConcurrentRetry
				}
				return "", &OverLimitError{Limit: l, RetryAfter: retry}, nil
			}
		}
	}
	return "", nil, fmt.Errorf("unexpected script reply %#v", reply)
}

// updateArgs is the EVALSHA of updateScript for rec, moved from from: the
// caller's waiting list when rec enters, stays in or leaves
// ActionRequired, and its limits on calls in flight when it leaves
// flight.
func (r *Redis) updateArgs(rec *Call, from State, op string, value []byte) []any {
	keys := []any{r.callKey(rec.Key)}
	var list []any
	switch {
	case rec.State == ActionRequired:
		keys = append(keys, r.waitingKey(rec.User, rec.Install))
		list = []any{"a", unixMilli(rec.Created)}
	case from == ActionRequired:
		keys = append(keys, r.waitingKey(rec.User, rec.Install))
		list = []any{"r"}
	}
	if inFlight(from) && !inFlight(rec.State) {
		for _, l := range rec.Limits {
			if l.Concurrent() {
				keys = append(keys, r.limitKey(l))
			}
		}
	}
	args := append([]any{"evalsha", updateScript.Hash(), len(keys)}, keys...)
	args = append(args, string(from), op, value, r.ttl(rec), r.channel, rec.Key)
	return append(args, list...)
}

// dropWaitingScript takes out of a caller's waiting list the calls that
// are gone, damaged or no longer wait, as they are now: one that came
// back to ActionRequired since Waiting read it stays.
//
// KEYS[1] list, KEYS[2..] calls; ARGV: the calls' keys.
var dropWaitingScript = redis.NewScript(`
for i = 2, #KEYS do
	local h = redis.call('GETRANGE', KEYS[i], '0', '` + strconv.Itoa(headerRange-1) + `')
	local j = string.find(h, '\n', 2, true)
	if not j or string.sub(h, 2, j - 1) ~= '` + string(ActionRequired) + `' then redis.call('ZREM', KEYS[1], ARGV[i - 1]) end
end
return 0
`)

// maxWaitingReads bounds the pages of a caller's waiting list one Waiting
// reads: entries whose calls are gone are dropped as they are read, so a
// list is rarely more than one page past its live calls.
const maxWaitingReads = 10

// Waiting implements Ledger: a page of the caller's list (oldest first),
// then the calls in one MGET, skipping the entries whose calls are gone,
// damaged (they cannot be shown, nor answered) or no longer wait, and
// dropping them (dropWaitingScript).
func (r *Redis) Waiting(ctx context.Context, user, install string) ([]*Call, error) {
	list := r.waitingKey(user, install)
	var out []*Call
	var gone, goneKeys []string
	for page := int64(0); page < maxWaitingReads && len(out) < MaxWaiting; page++ {
		keys, err := r.client.ZRange(ctx, list, page*MaxWaiting, (page+1)*MaxWaiting-1).Result()
		if err != nil {
			return nil, r.unavailable("reading the calls waiting for a person", err)
		}
		if len(keys) == 0 {
			break
		}
		callKeys := make([]string, len(keys))
		for i, k := range keys {
			callKeys[i] = r.callKey(k)
		}
		vals, err := r.client.MGet(ctx, callKeys...).Result()
		if err != nil {
			return nil, r.unavailable("reading the calls waiting for a person", err)
		}
		for i, v := range vals {
			s, ok := v.(string)
			var c *Call
			if ok {
				c, err = decodeValue(keys[i], s)
			}
			if !ok || err != nil || c.State != ActionRequired {
				gone, goneKeys = append(gone, keys[i]), append(goneKeys, callKeys[i])
				continue
			}
			if c.User != user || c.Install != install || len(out) == MaxWaiting {
				continue
			}
			out = append(out, c)
		}
		if len(keys) < MaxWaiting {
			break
		}
	}
	if len(gone) > 0 {
		// Best effort: an entry left is skipped again next time.
		args := make([]any, len(gone))
		for i, k := range gone {
			args[i] = k
		}
		_ = dropWaitingScript.Run(ctx, r.client, append([]string{list}, goneKeys...), args...).Err()
	}
	return out, nil
}
