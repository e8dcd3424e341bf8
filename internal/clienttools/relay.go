package clienttools

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
)

// Relay is where the client calls meet their pages: it holds what every
// instance that shares it must agree on — each call's state (waiting,
// claimed, finished) and outcome, the open streams of each thread and the
// lapse rule — and tells its bridge of offers and of calls finished
// elsewhere. The bridge keeps what one process holds: its Runs, its
// streams, its limits. NewLocalRelay is the relay of one instance,
// NewRedisRelay the one shared through Redis; a relay is known done when
// it passes the relay suite (relay_suite_test.go). A relay speaks the
// bridge's own keys, so it lives in this package.
type Relay interface {
	// attach gives the relay its bridge, once, before any other call:
	// offers and finished calls are told to h from then on.
	attach(h receiver)

	// offer records a new call waiting for a page of its thread and
	// hands it, numbered, to every bridge's streams of the thread. A call
	// already waiting is an error. With again (a write-back of what a
	// bridge holds, after the relay lost it) a call still unfinished is
	// left as it is, and one finished is reported with its outcome, if
	// it has one.
	offer(ctx context.Context, k callKey, o Offer, ttl time.Duration, again bool) (finished bool, out *Outcome, err error)

	// finish ends a call with a page's outcome, or without one when it
	// timed out (o nil); only the first finish counts. It reports whether
	// this one won and, when it did not, the outcome the call had. An
	// unknown call is ErrNotFound. A finished call answers ErrConflict to
	// claims for keepFinished, then is forgotten.
	finish(ctx context.Context, k callKey, o *Outcome) (won bool, posted *Outcome, err error)

	// claim claims a waiting call: ErrNotFound for no such call,
	// ErrConflict for one claimed or finished.
	claim(ctx context.Context, k callKey) error

	// open counts a stream of tk open and returns the calls waiting
	// unclaimed, oldest first, and the last offer's number: offers handed
	// to the bridge later with a number up to it are listed already.
	open(ctx context.Context, tk Thread) (offers []Offer, since uint64, err error)

	// closeStream counts a stream of tk closed. When none is left open,
	// the thread's claims lapse, and its calls whose caller went away
	// are dropped: finished without an outcome, their bridge told so.
	closeStream(ctx context.Context, tk Thread) error

	// leave drops k, whose caller went away, unless a stream of its
	// thread is open: then it reports kept, and the call is dropped when
	// the thread's last stream closes. posted is the outcome of a call
	// that had one already.
	leave(ctx context.Context, k callKey) (kept bool, posted *Outcome, err error)

	// Close stops the relay's background work.
	Close() error
}

// receiver is what a relay tells its bridge (the bridge's hub).
type receiver interface {
	// deliver hands an offer, with its number, to the streams of tk.
	deliver(tk Thread, o Offer, seq uint64)
	// runs reports whether a Run of this process waits for k.
	runs(k callKey) bool
	// answer ends the Run that waits for k, if any.
	answer(k callKey, e ending)
	// held returns the calls this process's Runs wait for.
	held() []heldCall
}

// keepFinished is how long a finished call answers 409 rather than 404.
const keepFinished = 10 * time.Minute

// NewLocalRelay returns the relay of one gateway instance: it keeps the
// calls in this process's memory, and remembers at most DefaultPending
// finished calls (for keepFinished) to answer 409 rather than 404.
func NewLocalRelay() Relay { return newLocalRelay(clock.Real, DefaultPending) }

func newLocalRelay(clk clock.Clock, keep int) *localRelay {
	return &localRelay{clock: clk, keep: keep, calls: map[callKey]*localCall{}, threads: map[Thread]*localThread{}}
}

// localRelay is NewLocalRelay's relay.
type localRelay struct {
	h     receiver
	clock clock.Clock
	keep  int // finished calls remembered, at most

	mu      sync.Mutex
	seq     uint64 // the last offer's number
	calls   map[callKey]*localCall
	threads map[Thread]*localThread
	// ended holds the finished calls oldest first: they expire from its
	// front, so no operation scans every call.
	ended []localEnded
}

// localCall is a call in the relay.
type localCall struct {
	offer    Offer
	seq      uint64
	claimed  bool
	gone     bool      // dropped when the thread's last stream closes
	finished time.Time // zero while it waits
	out      *Outcome  // the posted outcome, once finished with one
}

// localThread is a thread's open streams and unfinished calls; it exists
// while it has either.
type localThread struct {
	streams int
	waiting map[string]*localCall
}

type localEnded struct {
	k callKey
	c *localCall
}

func (r *localRelay) attach(h receiver) { r.h = h }

func (r *localRelay) offer(_ context.Context, k callKey, o Offer, _ time.Duration, again bool) (bool, *Outcome, error) {
	r.mu.Lock()
	r.expire()
	if c := r.calls[k]; c != nil {
		switch {
		case c.finished.IsZero() && !again:
			r.mu.Unlock()
			return false, nil, errors.New("this client call is already waiting for its page")
		case c.finished.IsZero():
			r.mu.Unlock()
			return false, nil, nil
		case again:
			r.mu.Unlock()
			return true, c.out, nil
		}
	}
	r.seq++
	c := &localCall{offer: o, seq: r.seq}
	r.calls[k] = c
	r.thread(k.Thread).waiting[k.callID] = c
	seq := r.seq
	r.mu.Unlock()
	r.h.deliver(k.Thread, o, seq)
	return false, nil, nil
}

func (r *localRelay) finish(_ context.Context, k callKey, o *Outcome) (bool, *Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	c := r.calls[k]
	switch {
	case c == nil:
		return false, nil, ErrNotFound
	case !c.finished.IsZero():
		return false, c.out, nil
	}
	if o != nil {
		out := *o
		c.out = &out
	}
	r.end(k, c)
	return true, nil, nil
}

func (r *localRelay) claim(_ context.Context, k callKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	c := r.calls[k]
	switch {
	case c == nil:
		return ErrNotFound
	case !c.finished.IsZero() || c.claimed:
		return ErrConflict
	}
	c.claimed = true
	return nil
}

func (r *localRelay) open(_ context.Context, tk Thread) ([]Offer, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	t := r.thread(tk)
	t.streams++
	waiting := make([]*localCall, 0, len(t.waiting))
	for _, c := range t.waiting {
		if !c.claimed {
			waiting = append(waiting, c)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].seq < waiting[j].seq })
	offers := make([]Offer, len(waiting))
	for i, c := range waiting {
		offers[i] = c.offer
	}
	return offers, r.seq, nil
}

func (r *localRelay) closeStream(_ context.Context, tk Thread) error {
	r.mu.Lock()
	t := r.threads[tk]
	if t == nil || t.streams == 0 {
		r.mu.Unlock()
		return nil
	}
	var dropped []callKey
	if t.streams--; t.streams == 0 {
		for id, c := range t.waiting {
			c.claimed = false
			if c.gone {
				k := callKey{tk, id}
				r.end(k, c)
				dropped = append(dropped, k)
			}
		}
		if len(t.waiting) == 0 {
			delete(r.threads, tk)
		}
	}
	r.mu.Unlock()
	for _, k := range dropped {
		r.h.answer(k, ending{err: ErrCallerGone})
	}
	return nil
}

func (r *localRelay) leave(_ context.Context, k callKey) (bool, *Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[k]
	switch {
	case c == nil:
		return false, nil, nil
	case !c.finished.IsZero():
		return false, c.out, nil
	case r.threads[k.Thread] != nil && r.threads[k.Thread].streams > 0:
		c.gone = true
		return true, nil, nil
	}
	r.end(k, c)
	return false, nil, nil
}

func (r *localRelay) Close() error { return nil }

// thread returns tk's thread, made if need be. Callers hold r.mu.
func (r *localRelay) thread(tk Thread) *localThread {
	t := r.threads[tk]
	if t == nil {
		t = &localThread{waiting: map[string]*localCall{}}
		r.threads[tk] = t
	}
	return t
}

// end finishes c: it is remembered, without its input, for keepFinished.
// Callers hold r.mu.
func (r *localRelay) end(k callKey, c *localCall) {
	c.finished = r.clock.Now()
	c.offer.Input = nil
	if t := r.threads[k.Thread]; t != nil {
		delete(t.waiting, k.callID)
		if len(t.waiting) == 0 && t.streams == 0 {
			delete(r.threads, k.Thread)
		}
	}
	r.ended = append(r.ended, localEnded{k, c})
	r.expire()
}

// expire forgets the finished calls past keepFinished, and the oldest
// beyond keep of them (those answer 404 rather than 409 sooner). It looks
// only at the front of r.ended. Callers hold r.mu.
func (r *localRelay) expire() {
	now := r.clock.Now()
	for len(r.ended) > 0 {
		e := r.ended[0]
		if now.Sub(e.c.finished) <= keepFinished && len(r.ended) <= r.keep {
			return
		}
		r.ended[0] = localEnded{} // let the call go before the array does
		r.ended = r.ended[1:]
		// The id may have run again since: forget only this run.
		if r.calls[e.k] == e.c {
			delete(r.calls, e.k)
		}
	}
}
