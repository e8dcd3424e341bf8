// Package clienttools is the bridge to the user's page for client tools:
// a call waits here until a page of its thread claims it, runs it and
// posts the result, or until the client tool timeout. A thread is one
// user's in one installation (Thread): a page sees only its own.
//
// NewBridge keeps everything in this process's memory: one gateway
// instance. NewRedisBridge shares the calls, claims, results and the
// streams' lapse rule with every instance on the same Redis (redis.go).
package clienttools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// DefaultTimeout is how long a call waits for its page.
const DefaultTimeout = 120 * time.Second

// Errors of the page endpoints.
var (
	// ErrNotFound: no such call for this page's user, installation and
	// thread; a call of another installation is not found either.
	ErrNotFound = errors.New("no such client call for this page")
	// ErrConflict: claimed by another page, or already answered or timed out.
	ErrConflict = errors.New("the client call is claimed, answered or timed out")
)

// Offer is a call as a page receives it.
type Offer struct {
	CallID string         `json:"callId"`
	Name   string         `json:"name"`
	Input  jsontext.Value `json:"input"`
	// Traceparent is the W3C traceparent of the call's span, when the call
	// is traced, so that the page's own spans join its trace.
	Traceparent string `json:"traceparent,omitempty"`
}

// Outcome is what the page posted.
type Outcome struct {
	// Result is the returned value as the page serialized it; nil when the
	// function returned undefined.
	Result jsontext.Value `json:"result,omitempty"`
	// Error is set when the function threw or its value could not be
	// serialized.
	Error *string `json:"error,omitempty"`
}

// ToolResult maps an outcome to a tool result: a string is itself, another
// value its JSON text as the page wrote it (compacted), undefined the empty
// string, an error the error text flagged as error.
func (o Outcome) ToolResult() result.Result {
	if o.Error != nil {
		return result.Result{IsError: true, Content: *o.Error}
	}
	if len(o.Result) == 0 {
		return result.Result{}
	}
	// Only a JSON string is itself: null would decode into a string too,
	// but it is a value whose JSON text is "null".
	var s string
	if jsontext.Value(o.Result).Kind() == '"' && json.Unmarshal(o.Result, &s, jsontext.AllowInvalidUTF8(true)) == nil {
		return result.Result{Content: s}
	}
	// Compact works in place: o.Result is the caller's.
	text := jsontext.Value(bytes.Clone(o.Result))
	if err := text.Compact(); err != nil {
		return result.Failure("the page posted a result that is not JSON: %v", err)
	}
	return result.Result{Content: string(text)}
}

// Thread is whose client calls a page sees: one user's thread in one
// installation. Install is empty for a user of no installation; a page
// whose token names none sees only such calls.
type Thread struct {
	User    string
	Install string
	ID      string
}

// owner is what the pending calls per user are counted by.
type owner struct{ user, install string }

func (t Thread) owner() owner { return owner{t.User, t.Install} }

type callKey struct {
	Thread
	callID string
}

type pending struct {
	offer   Offer
	seq     uint64        // arrival order: a page gets waiting calls oldest first
	timeout time.Duration // the Run's, for writing the call back to Redis
	offered bool          // recorded in Redis: a write-back may record it again
	claimed bool
	// gone is set when the call's caller went away while a page of its
	// thread was streaming: the call is kept for that page, and dropped
	// when the thread's last stream closes.
	gone bool
	// finished is set once the call has an outcome or timed out; the entry
	// stays a while so late claims and results get 409, not 404.
	finished time.Time
	// done gets the call's ending from whoever finishes it other than its
	// own Run: a page's outcome, or ErrCallerGone.
	done chan ending
}

// ending is how a call ended: an outcome, or an error.
type ending struct {
	out Outcome
	err error
}

// thread is what one Thread holds: its open streams and its calls that
// wait for a page. It exists while it holds either.
type thread struct {
	streams map[*Stream]struct{}
	waiting map[string]*pending // by call id
}

// ended is a finished call in the order calls finished.
type ended struct {
	k callKey
	p *pending
}

// Stream is an open event stream of one page.
type Stream struct {
	// C delivers new calls of the stream's thread.
	C     <-chan Offer
	c     chan Offer
	b     *Bridge
	tk    Thread
	token string
	// With Redis, offers that arrive while Open reads the waiting calls
	// are held in early, then sent after those if later than since, the
	// last offer's number when they were read; so are the ones after.
	opening bool
	early   []numbered
	since   uint64
}

// numbered is an offer and its number in Redis.
type numbered struct {
	Offer
	seq uint64
}

// Limits bound what the pages and their waiting calls hold in memory. A
// zero field takes its default. Each is named as the pages config names
// it, and a LimitError names the one that turned a call or stream away.
type Limits struct {
	// PendingPerThread (max_pending_per_thread) caps the calls of one
	// Thread that wait for a page. Default: 64.
	PendingPerThread int
	// PendingPerUser (max_pending_per_user) caps the calls of one user of
	// one installation that wait for a page, all threads together: a
	// thread is the caller's choice, so the per-thread cap alone does not
	// keep one user from filling Pending. Default: 256.
	PendingPerUser int
	// Pending (max_pending) caps the calls that wait for a page in all. It
	// also bounds how many finished calls are remembered to answer 409.
	// Default: 10000.
	Pending int
	// StreamsPerToken (max_streams_per_token) caps the open streams of one
	// page token. Default: 16.
	StreamsPerToken int
	// StreamsPerThread (max_streams_per_thread) caps the open streams of
	// one Thread, whatever tokens they use. Default: 16.
	StreamsPerThread int
	// Streams (max_streams) caps the open streams in all. Default: 10000.
	Streams int
}

// Default limits.
const (
	DefaultPendingPerThread = 64
	DefaultPendingPerUser   = 256
	DefaultPending          = 10000
	DefaultStreamsPerToken  = 16
	DefaultStreamsPerThread = 16
	DefaultStreams          = 10000
)

// What a bridge over one of its limits refuses, each in a LimitError.
var (
	// ErrThreadFull: Run of a call whose thread has PendingPerThread
	// calls waiting.
	ErrThreadFull = errors.New("too many client tool calls waiting in this thread")
	// ErrUserFull: Run of a call whose user has PendingPerUser calls
	// waiting.
	ErrUserFull = errors.New("too many client tool calls waiting for this user")
	// ErrFull: Run of a call while Pending calls wait in all.
	ErrFull = errors.New("too many client tool calls waiting on this gateway")
	// ErrTooManyStreams: Open for a page token with StreamsPerToken
	// streams open.
	ErrTooManyStreams = errors.New("too many open call streams for this page token")
	// ErrThreadStreams: Open for a thread with StreamsPerThread streams
	// open.
	ErrThreadStreams = errors.New("too many open call streams of this thread")
	// ErrStreamsFull: Open while Streams streams are open in all.
	ErrStreamsFull = errors.New("too many open call streams on this gateway")
)

// LimitError is a call or a stream turned away over one of Limits. It
// wraps the limit's error (ErrThreadFull, ErrUserFull, ErrFull,
// ErrTooManyStreams, ErrThreadStreams or ErrStreamsFull).
type LimitError struct {
	Err error
	// Option names the limit as the pages config does, e.g.
	// max_pending_per_user.
	Option string
	// Limit is its value.
	Limit int
}

func (e *LimitError) Error() string { return fmt.Sprintf("%v (%s is %d)", e.Err, e.Option, e.Limit) }
func (e *LimitError) Unwrap() error { return e.Err }

// ErrCallerGone is Run's error when its caller went away (ctx done) while
// no page of the thread was streaming: the call is dropped then, not left
// to hold its place until the timeout for a page that may never come.
var ErrCallerGone = errors.New("the caller went away while no page of the thread was open to run the call")

// Bridge holds the client calls in flight and the pages' open streams.
type Bridge struct {
	mu      sync.Mutex
	seq     uint64
	limits  Limits
	calls   map[callKey]*pending // waiting, and finished for keepFinished
	threads map[Thread]*thread
	owners  map[owner]int  // calls that wait for a page, by user
	waiting int            // calls that wait for a page
	streams int            // open streams
	tokens  map[string]int // open streams by page token
	// ended holds the finished calls oldest first: they expire from its
	// front, so no operation scans every call.
	ended []ended
	// stale holds the threads whose stream count in Redis may be too
	// high: closing a stream could not reach it. They are written back
	// when the subscription comes back.
	stale map[Thread]struct{}

	// relay shares the bridge through Redis; nil for one instance.
	relay *relay

	// After is the clock's timer, replaceable in tests.
	After func(time.Duration) <-chan time.Time
	// Clock tells the time; tests replace it.
	Clock clock.Clock
}

// keepFinished is how long a finished call answers 409 rather than 404.
const keepFinished = 10 * time.Minute

// NewBridge returns an empty bridge with the default limits.
func NewBridge() *Bridge {
	b := &Bridge{
		calls:   map[callKey]*pending{},
		threads: map[Thread]*thread{},
		owners:  map[owner]int{},
		tokens:  map[string]int{},
		stale:   map[Thread]struct{}{},
		After:   time.After,
		Clock:   clock.Real,
	}
	b.SetLimits(Limits{})
	return b
}

// SetLimits sets the limits for what comes next; what the bridge holds
// already stays. One bridge outlives config reloads: the config loaded
// last sets them.
func (b *Bridge) SetLimits(l Limits) {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&l.PendingPerThread, DefaultPendingPerThread},
		{&l.PendingPerUser, DefaultPendingPerUser},
		{&l.Pending, DefaultPending},
		{&l.StreamsPerToken, DefaultStreamsPerToken},
		{&l.StreamsPerThread, DefaultStreamsPerThread},
		{&l.Streams, DefaultStreams},
	} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	b.mu.Lock()
	b.limits = l
	b.mu.Unlock()
}

// Waiting reports how many calls wait for a page and how many streams are
// open, in all.
func (b *Bridge) Waiting() (calls, streams int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting, b.streams
}

// Admit reports whether a new call of th would be taken now: the
// LimitError Run would refuse it with, or nil. It reserves nothing, so a
// call admitted may still be refused by Run when others came first.
func (b *Bridge) Admit(th Thread) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire()
	return b.admit(th)
}

// admit is Admit for callers that hold b.mu.
func (b *Bridge) admit(th Thread) error {
	l := b.limits
	switch {
	case b.threads[th] != nil && len(b.threads[th].waiting) >= l.PendingPerThread:
		return &LimitError{ErrThreadFull, "max_pending_per_thread", l.PendingPerThread}
	case b.owners[th.owner()] >= l.PendingPerUser:
		return &LimitError{ErrUserFull, "max_pending_per_user", l.PendingPerUser}
	case b.waiting >= l.Pending:
		return &LimitError{ErrFull, "max_pending", l.Pending}
	}
	return nil
}

// ErrTimeout is Run's error when no page answered in time.
var ErrTimeout = errors.New("client tool timed out")

// Run offers a call to the pages of its thread and waits for the outcome,
// at most timeout. Over a limit it returns a LimitError at once.
//
// ctx is the caller's: when it is done the call is dropped at once
// (ErrCallerGone) if no page of the thread is streaming, and it frees its
// place. If one is, the call is kept for it, to be claimed and answered as
// usual; it is dropped when the thread's last stream closes before that.
// A page that opens later never sees a dropped call.
func (b *Bridge) Run(ctx context.Context, th Thread, offer Offer, timeout time.Duration) (Outcome, error) {
	k := callKey{th, offer.CallID}
	p := &pending{offer: offer, timeout: timeout, done: make(chan ending, 1)}
	b.mu.Lock()
	b.expire()
	if old, ok := b.calls[k]; ok && old.finished.IsZero() {
		b.mu.Unlock()
		return Outcome{}, errors.New("this client call is already waiting for its page")
	}
	if err := b.admit(th); err != nil {
		b.mu.Unlock()
		return Outcome{}, err
	}
	t := b.thread(th)
	b.seq++
	p.seq = b.seq
	b.calls[k] = p
	t.waiting[k.callID] = p
	b.waiting++
	b.owners[th.owner()]++
	if b.relay == nil {
		for s := range t.streams {
			s.send(offer)
		}
	}
	b.mu.Unlock()
	if b.relay != nil {
		// Every instance's streams, this one's too, get the offer from
		// the channel, after Redis has it: a claim never races it. A
		// caller gone meanwhile is seen once the call is recorded.
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisOpTimeout)
		_, _, err := b.relay.offer(octx, k, offer, timeout, "new")
		cancel()
		b.mu.Lock()
		if err != nil {
			if p.finished.IsZero() {
				b.finish(k, p)
			}
			b.mu.Unlock()
			return Outcome{}, err
		}
		p.offered = true
		b.mu.Unlock()
	}

	timer, gone := b.After(timeout), ctx.Done()
	for {
		select {
		case e := <-p.done:
			return e.out, e.err
		case <-timer:
			return b.end(k, p)
		case <-gone:
			gone = nil
			if e, ok := b.leave(k, p); ok {
				return e.out, e.err
			}
		}
	}
}

// end ends a Run that timed out, unless the page answered as the timer
// fired: its answer wins.
func (b *Bridge) end(k callKey, p *pending) (Outcome, error) {
	if b.relay != nil {
		return b.endInRedis(k, p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.finished.IsZero() {
		e := <-p.done
		return e.out, e.err
	}
	b.finish(k, p)
	return Outcome{}, ErrTimeout
}

// endInRedis ends a Run that timed out in Redis, unless a result was
// posted first on any instance: that result wins. When Redis cannot be
// reached the call ends here; its key in Redis expires.
func (b *Bridge) endInRedis(k callKey, p *pending) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	_, posted, ferr := b.relay.finish(ctx, k, nil)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.finished.IsZero() {
		// A result was handed over meanwhile.
		e := <-p.done
		return e.out, e.err
	}
	b.finish(k, p)
	if ferr == nil && posted != nil {
		return *posted, nil
	}
	return Outcome{}, ErrTimeout
}

// leave is Run's step when its caller went away: it drops the call, unless
// a page of the thread is streaming, and reports how the Run ends, or
// false when it waits on.
func (b *Bridge) leave(k callKey, p *pending) (ending, bool) {
	if b.relay != nil {
		return b.leaveInRedis(k, p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch t := b.threads[k.Thread]; {
	case !p.finished.IsZero():
		return <-p.done, true
	case t != nil && len(t.streams) > 0:
		p.gone = true
		return ending{}, false
	}
	b.finish(k, p)
	return ending{err: ErrCallerGone}, true
}

// leaveInRedis is leave where the streams are counted in Redis, on every
// instance. When Redis cannot be reached the call waits on: dropped here
// only, it could still be claimed and answered there, and the answer lost.
func (b *Bridge) leaveInRedis(k callKey, p *pending) (ending, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	kept, posted, err := b.relay.leave(ctx, k)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !p.finished.IsZero():
		return <-p.done, true
	case err != nil || kept:
		p.gone = true
		return ending{}, false
	}
	b.finish(k, p)
	if posted != nil {
		return ending{out: *posted}, true
	}
	return ending{err: ErrCallerGone}, true
}

// deliver hands an offer from the channel to this instance's streams of
// its thread that did not list it when they opened.
func (b *Bridge) deliver(tk Thread, o Offer, seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	th := b.threads[tk]
	if th == nil {
		return
	}
	for s := range th.streams {
		switch {
		case !s.opening && seq > s.since:
			s.send(o)
		case s.opening && len(s.early) < cap(s.c):
			s.early = append(s.early, numbered{o, seq})
		}
	}
}

// runs reports whether a Run of this instance waits for k.
func (b *Bridge) runs(k callKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.calls[k]
	return p != nil && p.finished.IsZero()
}

// answer ends the Run of this instance that waits for k, if any still
// does: with a page's outcome, or with ErrCallerGone when Redis dropped
// the call.
func (b *Bridge) answer(k callKey, e ending) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.calls[k]; p != nil && p.finished.IsZero() {
		b.finish(k, p)
		p.done <- e
	}
}

// heldCall is a call a Run of this instance waits for.
type heldCall struct {
	k       callKey
	offer   Offer
	timeout time.Duration
	gone    bool
}

// held returns what this instance holds, to write back to Redis: its open
// streams by thread (zero for a thread whose count in Redis may be stale)
// and the calls its Runs wait for.
func (b *Bridge) held() (map[Thread]int, []heldCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	streams := make(map[Thread]int, len(b.threads)+len(b.stale))
	for tk := range b.stale {
		streams[tk] = 0
	}
	var calls []heldCall
	for tk, th := range b.threads {
		if len(th.streams) > 0 {
			streams[tk] = len(th.streams)
		}
		for id, p := range th.waiting {
			// One not yet offered is its Run's to record: recorded
			// here first, the Run would find it waiting already.
			if p.offered {
				calls = append(calls, heldCall{callKey{tk, id}, p.offer, p.timeout, p.gone})
			}
		}
	}
	return streams, calls
}

// recounted forgets that tk's count in Redis may be stale: it was written
// back.
func (b *Bridge) recounted(tk Thread) {
	b.mu.Lock()
	delete(b.stale, tk)
	b.mu.Unlock()
}

// thread returns tk's thread, made if need be. Callers hold b.mu.
func (b *Bridge) thread(tk Thread) *thread {
	th := b.threads[tk]
	if th == nil {
		th = &thread{streams: map[*Stream]struct{}{}, waiting: map[string]*pending{}}
		b.threads[tk] = th
	}
	return th
}

// finish ends a waiting call: it stops counting against the limits and is
// remembered, without its input, for keepFinished. Callers hold b.mu.
func (b *Bridge) finish(k callKey, p *pending) {
	p.finished = b.Clock.Now()
	p.offer.Input = nil
	b.waiting--
	if o := k.owner(); b.owners[o] <= 1 {
		delete(b.owners, o)
	} else {
		b.owners[o]--
	}
	if th := b.threads[k.Thread]; th != nil {
		delete(th.waiting, k.callID)
		if len(th.waiting) == 0 && len(th.streams) == 0 {
			delete(b.threads, k.Thread)
		}
	}
	b.ended = append(b.ended, ended{k, p})
	b.expire()
}

// expire forgets the finished calls past keepFinished, and the oldest
// beyond Pending of them (those answer 404 rather than 409 sooner). It
// looks only at the front of b.ended. Callers hold b.mu.
func (b *Bridge) expire() {
	now := b.Clock.Now()
	for len(b.ended) > 0 {
		e := b.ended[0]
		if now.Sub(e.p.finished) <= keepFinished && len(b.ended) <= b.limits.Pending {
			return
		}
		b.ended[0] = ended{} // let the call go before the array does
		b.ended = b.ended[1:]
		// The id may have run again since: forget only this run.
		if b.calls[e.k] == e.p {
			delete(b.calls, e.k)
		}
	}
}

// Open opens a stream for a page of th, counted against the page token it
// was opened with (token is any key of it, e.g. a digest). It returns the
// calls waiting now that no open stream has claimed, or a LimitError.
func (b *Bridge) Open(th Thread, token string) (*Stream, []Offer, error) {
	if b.relay != nil {
		// A write-back of the stream counts waits until this stream
		// is counted both here and in Redis.
		b.relay.counting.RLock()
		defer b.relay.counting.RUnlock()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.admitStream(th, token); err != nil {
		return nil, nil, err
	}
	b.tokens[token]++
	b.streams++
	c := make(chan Offer, 64)
	s := &Stream{C: c, c: c, b: b, tk: th, token: token}
	t := b.thread(th)
	t.streams[s] = struct{}{}
	if b.relay != nil {
		s.opening = true
		b.mu.Unlock()
		offers, err := b.openInRedis(s)
		b.mu.Lock()
		return s, offers, err
	}
	waiting := make([]*pending, 0, len(t.waiting))
	for _, p := range t.waiting {
		if !p.claimed {
			waiting = append(waiting, p)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].seq < waiting[j].seq })
	offers := make([]Offer, len(waiting))
	for i, p := range waiting {
		offers[i] = p.offer
	}
	return s, offers, nil
}

// admitStream is the stream limits' check. Callers hold b.mu.
func (b *Bridge) admitStream(th Thread, token string) error {
	l := b.limits
	switch {
	case b.tokens[token] >= l.StreamsPerToken:
		return &LimitError{ErrTooManyStreams, "max_streams_per_token", l.StreamsPerToken}
	case b.threads[th] != nil && len(b.threads[th].streams) >= l.StreamsPerThread:
		return &LimitError{ErrThreadStreams, "max_streams_per_thread", l.StreamsPerThread}
	case b.streams >= l.Streams:
		return &LimitError{ErrStreamsFull, "max_streams", l.Streams}
	}
	return nil
}

// openInRedis counts s open in Redis and returns the waiting calls there,
// then the ones offered later that came on the channel meanwhile. On
// failure s is closed here (never counted in Redis).
func (b *Bridge) openInRedis(s *Stream) ([]Offer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	offers, since, err := b.relay.open(ctx, s.tk)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.closeHere(s)
		return nil, err
	}
	for _, o := range s.early {
		if o.seq > since {
			offers = append(offers, o.Offer)
		}
	}
	s.opening, s.early, s.since = false, nil, since
	return offers, nil
}

// send offers a call without blocking; a page too slow to read gets the
// call again when it reconnects.
func (s *Stream) send(o Offer) {
	select {
	case s.c <- o:
	default:
	}
}

// Close closes the stream; closing it again does nothing. When it was the
// thread's last, claims without a result lapse: the calls are offered
// again to the next stream; and the calls whose caller went away are
// dropped (ErrCallerGone), as no page is left to run them.
func (s *Stream) Close() {
	b := s.b
	if b.relay != nil {
		b.relay.counting.RLock()
		defer b.relay.counting.RUnlock()
	}
	b.mu.Lock()
	closed := b.closeHere(s)
	b.mu.Unlock()
	if !closed || b.relay == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	defer cancel()
	if b.relay.closeStream(ctx, s.tk) != nil {
		b.mu.Lock()
		b.stale[s.tk] = struct{}{}
		b.mu.Unlock()
	}
}

// closeHere closes s in this instance and reports whether it was open.
// With Redis, the claims and the calls of a gone caller are Redis's to
// lapse and drop. Callers hold b.mu.
func (b *Bridge) closeHere(s *Stream) bool {
	th := b.threads[s.tk]
	if th == nil {
		return false
	}
	if _, ok := th.streams[s]; !ok {
		return false
	}
	delete(th.streams, s)
	b.streams--
	if b.tokens[s.token]--; b.tokens[s.token] <= 0 {
		delete(b.tokens, s.token)
	}
	if len(th.streams) > 0 {
		return true
	}
	if b.relay == nil {
		for id, p := range th.waiting {
			p.claimed = false
			if p.gone {
				b.finish(callKey{s.tk, id}, p)
				p.done <- ending{err: ErrCallerGone}
			}
		}
	}
	if len(th.waiting) == 0 {
		delete(b.threads, s.tk)
	}
	return true
}

// Claim claims a call for a page of th before it runs it; the first claim
// wins.
func (b *Bridge) Claim(th Thread, callID string) error {
	if b.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
		defer cancel()
		return b.relay.claim(ctx, callKey{th, callID})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.unfinished(callKey{th, callID})
	if err != nil {
		return err
	}
	if p.claimed {
		return ErrConflict
	}
	p.claimed = true
	return nil
}

// Post delivers a call's outcome from a page of th; only the first counts.
func (b *Bridge) Post(th Thread, callID string, o Outcome) error {
	k := callKey{th, callID}
	if b.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
		defer cancel()
		won, _, err := b.relay.finish(ctx, k, &o)
		switch {
		case err != nil:
			return err
		case !won:
			return ErrConflict
		}
		// A Run here needs no message to come back from the server.
		b.answer(k, ending{out: o})
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.unfinished(k)
	if err != nil {
		return err
	}
	b.finish(k, p)
	p.done <- ending{out: o}
	return nil
}

// unfinished finds a call of the page's thread that has no outcome yet:
// ErrNotFound if there is no such call, ErrConflict if it has finished.
// Callers hold b.mu.
func (b *Bridge) unfinished(k callKey) (*pending, error) {
	b.expire()
	p, ok := b.calls[k]
	switch {
	case !ok:
		return nil, ErrNotFound
	case !p.finished.IsZero():
		return nil, ErrConflict
	}
	return p, nil
}
