package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// checkLimits enforces what every back end's Create takes of c.Limits.
func checkLimits(c *Call) error {
	for _, l := range c.Limits {
		switch {
		case l.Key == "":
			return fmt.Errorf("ledger: call %q counts against a limit without a key", c.Key)
		case l.Max < 0:
			return fmt.Errorf("ledger: call %q counts against limit %q of max %d", c.Key, l.Key, l.Max)
		case l.Window < 0:
			return fmt.Errorf("ledger: call %q counts against limit %q of window %ds", c.Key, l.Key, l.Window)
		}
	}
	return nil
}

// placeLapse is when c's place in its limits on calls in flight lapses:
// at its deadline, when a repeat gives it up as outcome unknown, or, for
// a call without one, once a retention has passed since it was created
// (as long as a call in flight is surely kept).
func placeLapse(c *Call, retention time.Duration) time.Time {
	if !c.Deadline.IsZero() {
		return c.Deadline
	}
	return c.Created.Add(retention)
}

// windowRetry is the RetryAfter of a full window whose oldest counted
// call was created at oldest: until it leaves the window, at least a
// millisecond.
func windowRetry(l Limit, oldest, now time.Time) time.Duration {
	return max(oldest.Add(l.WindowDuration()).Sub(now), time.Millisecond)
}

// counted is a call counted against a limit (or waiting for a person):
// when it was created, and its key.
type counted struct {
	at  time.Time
	key string
}

func compareCounted(a, b counted) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.key, b.key)
}

// counts are the limits of one process: the bolt ledger's (under its
// log's lock: what a Create counts and the record it writes are one
// step) and ledger off's. A window holds the calls created in it, oldest
// first, never more than its Max; the calls in flight hold a place until
// an Update moves them out of flight or their place lapses. In memory,
// because the file serves one process: counting adds no read or write of
// the file. BenchmarkBoltLimits (a Create and an Update with two limits
// against none, fsync off, twice 3 runs on a 2-core machine shared with
// other builds) finds what the noise hides: serial 93-163 µs a call
// against 61-157, 66-115 µs of CPU against 68-90; parallel 67-166 µs
// against 65-147, 68-93 µs of CPU against 72-142. What a call with limits
// surely costs more is its record, longer by its limits (about 170 bytes,
// encoded for the log and again for the B+tree).
type counts struct {
	windows map[string]*window              // by Limit.Key
	places  map[string]map[string]time.Time // by Limit.Key: call key → lapse
	swept   time.Time
}

// window is the calls counted against one window limit, oldest first, and
// the window's length and Max as last checked.
type window struct {
	span  time.Duration
	max   int
	calls []counted
}

// countsSweepEvery is how often take drops what has left every window
// and every lapsed place, so that keys no call counts against any more
// (a user gone quiet) do not stay in memory.
const countsSweepEvery = time.Minute

// take counts the call key (created at created, its places lapsing at
// lapse) against each of limits at now, or, if one is full, counts
// nothing and returns the first full one's refusal. A key in limits
// twice counts once.
func (q *counts) take(limits []Limit, key string, created, lapse, now time.Time) *OverLimitError {
	if now.Sub(q.swept) >= countsSweepEvery {
		q.sweep(now)
	}
	for _, l := range limits {
		if over := q.full(l, now); over != nil {
			return over
		}
	}
	for i, l := range limits {
		if slices.ContainsFunc(limits[:i], func(o Limit) bool { return o.Key == l.Key }) {
			continue
		}
		if l.Concurrent() {
			if q.places == nil {
				q.places = map[string]map[string]time.Time{}
			}
			if q.places[l.Key] == nil {
				q.places[l.Key] = map[string]time.Time{}
			}
			q.places[l.Key][key] = lapse
			continue
		}
		w := q.window(l)
		c := counted{created, key}
		i, _ := slices.BinarySearchFunc(w.calls, c, compareCounted)
		w.calls = slices.Insert(w.calls, i, c)
	}
	return nil
}

// window returns l's window, made if new, with l's length and Max.
func (q *counts) window(l Limit) *window {
	if q.windows == nil {
		q.windows = map[string]*window{}
	}
	w := q.windows[l.Key]
	if w == nil {
		w = &window{}
		q.windows[l.Key] = w
	}
	w.span, w.max = l.WindowDuration(), l.Max
	return w
}

// full prunes l's key at now and returns its refusal if it is full.
func (q *counts) full(l Limit, now time.Time) *OverLimitError {
	if l.Concurrent() {
		places := q.places[l.Key]
		if len(places) < l.Max {
			return nil
		}
		q.prunePlaces(l.Key, now)
		if len(q.places[l.Key]) < l.Max {
			return nil
		}
		return &OverLimitError{Limit: l, RetryAfter: ConcurrentRetry}
	}
	calls := q.pruneWindow(l.Key, l.WindowDuration(), now)
	if len(calls) < l.Max {
		return nil
	}
	if len(calls) == 0 { // Max 0: nothing ever passes
		return &OverLimitError{Limit: l, RetryAfter: l.WindowDuration()}
	}
	return &OverLimitError{Limit: l, RetryAfter: windowRetry(l, calls[0].at, now)}
}

// pruneWindow drops from key's window the calls created span or longer
// before now, and returns what is left.
func (q *counts) pruneWindow(key string, span time.Duration, now time.Time) []counted {
	w := q.windows[key]
	if w == nil {
		return nil
	}
	from := now.Add(-span)
	n := 0
	for n < len(w.calls) && !w.calls[n].at.After(from) {
		n++
	}
	if n == len(w.calls) {
		delete(q.windows, key)
		return nil
	}
	w.calls = slices.Delete(w.calls, 0, n)
	return w.calls
}

// prunePlaces drops key's places that lapsed by now.
func (q *counts) prunePlaces(key string, now time.Time) {
	places := q.places[key]
	for k, lapse := range places {
		if !lapse.After(now) {
			delete(places, k)
		}
	}
	if len(places) == 0 {
		delete(q.places, key)
	}
}

// sweep prunes every key at now.
func (q *counts) sweep(now time.Time) {
	q.swept = now
	for key := range q.places {
		q.prunePlaces(key, now)
	}
	for key, w := range q.windows {
		q.pruneWindow(key, w.span, now)
	}
}

// giveBack takes back what take counted for key: its record could not be
// written.
func (q *counts) giveBack(limits []Limit, key string) {
	for _, l := range limits {
		if l.Concurrent() {
			q.release(l.Key, key)
			continue
		}
		w := q.windows[l.Key]
		if w == nil {
			continue
		}
		if i := slices.IndexFunc(w.calls, func(c counted) bool { return c.key == key }); i >= 0 {
			w.calls = slices.Delete(w.calls, i, i+1)
			if len(w.calls) == 0 {
				delete(q.windows, l.Key)
			}
		}
	}
}

// leaveFlight releases key's places in limits: its call left flight.
func (q *counts) leaveFlight(limits []Limit, key string) {
	for _, l := range limits {
		if l.Concurrent() {
			q.release(l.Key, key)
		}
	}
}

func (q *counts) release(limitKey, key string) {
	if places := q.places[limitKey]; places != nil {
		delete(places, key)
		if len(places) == 0 {
			delete(q.places, limitKey)
		}
	}
}

// load counts a stored call found at open: in each window of limits that
// created is still in. Calls in flight were closed, so no place is taken.
// Windows are put in order, and kept to their Max, by loaded.
func (q *counts) load(limits []Limit, key string, created, now time.Time) {
	for i, l := range limits {
		if l.Concurrent() || !created.After(now.Add(-l.WindowDuration())) ||
			slices.ContainsFunc(limits[:i], func(o Limit) bool { return o.Key == l.Key }) {
			continue
		}
		w := q.window(l)
		w.calls = append(w.calls, counted{created, key})
	}
}

// loaded sorts the windows load filled and keeps the newest Max calls of
// each: a window never holds more.
func (q *counts) loaded() {
	for key, w := range q.windows {
		slices.SortFunc(w.calls, compareCounted)
		if over := len(w.calls) - w.max; over > 0 {
			w.calls = slices.Delete(w.calls, 0, over)
		}
		if len(w.calls) == 0 {
			delete(q.windows, key)
		} else {
			w.calls = slices.Clip(w.calls)
		}
	}
}

// lockedCounts is counts with a lock of its own, for ledger off.
type lockedCounts struct {
	mu sync.Mutex
	q  counts
}

// offCounts is ledger off's counts: one per process, as its spent ids.
var offCounts lockedCounts
