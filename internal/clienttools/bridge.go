// Package clienttools is the bridge to the user's page for client tools:
// a call waits here until a page of its thread claims it, runs it and
// posts the result, or until the client tool timeout. A thread is one
// user's in one installation (Thread): a page sees only its own.
//
// A Bridge keeps what this process holds (the Runs waiting, the pages'
// open streams, the limits' counts) and meets the other side through a
// Relay, which holds the calls' shared state: an in-process relay
// (NewLocalRelay) for one gateway instance, or the Redis relay
// (NewRedisRelay), which shares the calls, claims, results and the
// streams' lapse rule with every instance on the same Redis (redis.go).
package clienttools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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

// callKey names one client call: its thread and its call id.
type callKey struct {
	Thread
	callID string
}

type pending struct {
	offer   Offer
	timeout time.Duration // the Run's, for writing the call back to a relay that lost it
	offered bool          // recorded in the relay: a write-back may record it again
	gone    bool          // its caller went away while a page of its thread streamed
	// finished is set once the call has an outcome or timed out, when it
	// stops counting against the limits.
	finished bool
	// done gets the call's ending from whoever finishes it other than its
	// own Run: a page's outcome, or ErrCallerGone.
	done chan ending
}

// ending is how a call ended: an outcome, or an error.
type ending struct {
	out Outcome
	err error
}

// thread is what one Thread holds in this process: its open streams and
// its Runs that wait for a page. It exists while it holds either.
type thread struct {
	streams map[*Stream]struct{}
	waiting map[string]*pending // by call id
}

// Stream is an open event stream of one page.
type Stream struct {
	// C delivers new calls of the stream's thread.
	C     <-chan Offer
	c     chan Offer
	b     *Bridge
	tk    Thread
	token string
	// Offers that arrive while Open asks the relay for the waiting calls
	// are held in early, then sent after those if later than since, the
	// last offer's number when they were listed; so are the ones after.
	opening bool
	early   []numbered
	since   uint64
}

// numbered is an offer and its number in the relay.
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

// Bridge runs client tool calls in the user's page. It is a view with its
// own Limits on what one process holds: the views of one bridge
// (WithLimits) share its calls and streams, so a config that loads gets
// its limits without changing those of the config still serving.
type Bridge struct {
	*hub
	limits Limits
}

// hub is what the views of a bridge share: this process's Runs in flight
// and open streams, counted against the limits, and the relay.
type hub struct {
	relay Relay
	// after is the clock's timer; tests replace it.
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	calls   map[callKey]*pending // the Runs that wait
	threads map[Thread]*thread
	owners  map[owner]int  // calls that wait for a page, by user
	waiting int            // calls that wait for a page
	streams int            // open streams
	tokens  map[string]int // open streams by page token
}

// NewBridge returns a bridge of one gateway instance: its relay is
// in-process (NewLocalRelay). It has the default limits.
func NewBridge() *Bridge { return NewBridgeOn(NewLocalRelay()) }

// NewBridgeOn returns a bridge over r, with the default limits. r serves
// this bridge alone; whoever made it closes it (for the gateway, the
// store).
func NewBridgeOn(r Relay) *Bridge {
	h := &hub{
		relay:   r,
		after:   time.After,
		calls:   map[callKey]*pending{},
		threads: map[Thread]*thread{},
		owners:  map[owner]int{},
		tokens:  map[string]int{},
	}
	r.attach(h)
	return &Bridge{hub: h, limits: Limits{}.withDefaults()}
}

// WithLimits returns a view of b with limits l for what comes next; what
// b holds stays, and b's own limits do not change. One bridge outlives
// config reloads: each config serves through its own view.
func (b *Bridge) WithLimits(l Limits) *Bridge {
	return &Bridge{hub: b.hub, limits: l.withDefaults()}
}

// Limits returns the limits b admits calls and streams by, defaults
// filled in.
func (b *Bridge) Limits() Limits { return b.limits }

// withDefaults fills l's zero fields with the defaults.
func (l Limits) withDefaults() Limits {
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
	return l
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

// opTimeout bounds one step of the bridge in its relay; the Redis
// client's own dial, read and write timeouts are shorter.
const opTimeout = 5 * time.Second

// relayContext is the context of one step in the relay: it outlives the
// caller's (a step half made in Redis is worse than a late one).
func relayContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
}

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
	if b.calls[k] != nil {
		b.mu.Unlock()
		return Outcome{}, errors.New("this client call is already waiting for its page")
	}
	if err := b.admit(th); err != nil {
		b.mu.Unlock()
		return Outcome{}, err
	}
	t := b.thread(th)
	b.calls[k] = p
	t.waiting[k.callID] = p
	b.waiting++
	b.owners[th.owner()]++
	b.mu.Unlock()

	// Every stream, this process's too, gets the offer from the relay,
	// after the relay has it: a claim never races it. A caller gone
	// meanwhile is seen once the call is recorded.
	octx, cancel := relayContext(ctx)
	_, _, err := b.relay.offer(octx, k, offer, timeout, false)
	cancel()
	b.mu.Lock()
	if err != nil {
		if !p.finished {
			b.finish(k, p)
		}
		b.mu.Unlock()
		return Outcome{}, err
	}
	p.offered = true
	b.mu.Unlock()

	timer, gone := b.after(timeout), ctx.Done()
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

// end ends a Run that timed out, unless a result was posted first (on any
// instance that shares the relay): that result wins. When the relay
// cannot be reached the call ends here; the relay lets it expire.
func (b *Bridge) end(k callKey, p *pending) (Outcome, error) {
	ctx, cancel := relayContext(context.Background())
	_, posted, ferr := b.relay.finish(ctx, k, nil)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.finished {
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

// leave is Run's step when its caller went away: the relay drops the
// call, unless a page of the thread is streaming (on any instance), and
// leave reports how the Run ends, or false when it waits on. When the
// relay cannot be reached the call waits on: dropped here only, it could
// still be claimed and answered there, and the answer lost.
func (b *Bridge) leave(k callKey, p *pending) (ending, bool) {
	ctx, cancel := relayContext(context.Background())
	kept, posted, err := b.relay.leave(ctx, k)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case p.finished:
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

// deliver hands an offer from the relay to this process's streams of its
// thread that did not list it when they opened.
func (h *hub) deliver(tk Thread, o Offer, seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	th := h.threads[tk]
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

// runs reports whether a Run of this process waits for k.
func (h *hub) runs(k callKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[k] != nil
}

// answer ends the Run of this process that waits for k, if any still
// does: with a page's outcome, or with ErrCallerGone when the relay
// dropped the call.
func (h *hub) answer(k callKey, e ending) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.calls[k]; p != nil {
		h.finish(k, p)
		p.done <- e
	}
}

// heldCall is a call a Run of this process waits for.
type heldCall struct {
	k       callKey
	offer   Offer
	timeout time.Duration
	gone    bool
}

// held returns the calls this process's Runs wait for that the relay has
// recorded, to write back to a relay that lost them.
func (h *hub) held() []heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var calls []heldCall
	for k, p := range h.calls {
		// One not yet offered is its Run's to record: recorded here
		// first, the Run would find it waiting already.
		if p.offered {
			calls = append(calls, heldCall{k, p.offer, p.timeout, p.gone})
		}
	}
	return calls
}

// thread returns tk's thread, made if need be. Callers hold h.mu.
func (h *hub) thread(tk Thread) *thread {
	th := h.threads[tk]
	if th == nil {
		th = &thread{streams: map[*Stream]struct{}{}, waiting: map[string]*pending{}}
		h.threads[tk] = th
	}
	return th
}

// finish ends a waiting call here: it stops counting against the limits,
// and its id may run again. Callers hold h.mu.
func (h *hub) finish(k callKey, p *pending) {
	p.finished = true
	delete(h.calls, k)
	h.waiting--
	if o := k.owner(); h.owners[o] <= 1 {
		delete(h.owners, o)
	} else {
		h.owners[o]--
	}
	if th := h.threads[k.Thread]; th != nil {
		delete(th.waiting, k.callID)
		if len(th.waiting) == 0 && len(th.streams) == 0 {
			delete(h.threads, k.Thread)
		}
	}
}

// Open opens a stream for a page of th, counted against the page token it
// was opened with (token is any key of it, e.g. a digest). It returns the
// calls waiting now that no open stream has claimed, oldest first, or a
// LimitError.
func (b *Bridge) Open(th Thread, token string) (*Stream, []Offer, error) {
	b.mu.Lock()
	if err := b.admitStream(th, token); err != nil {
		b.mu.Unlock()
		return nil, nil, err
	}
	b.tokens[token]++
	b.streams++
	c := make(chan Offer, 64)
	s := &Stream{C: c, c: c, b: b, tk: th, token: token, opening: true}
	b.thread(th).streams[s] = struct{}{}
	b.mu.Unlock()

	ctx, cancel := relayContext(context.Background())
	offers, since, err := b.relay.open(ctx, th)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		// Never counted in the relay.
		b.closeHere(s)
		return nil, nil, err
	}
	for _, o := range s.early {
		if o.seq > since {
			offers = append(offers, o.Offer)
		}
	}
	s.opening, s.early, s.since = false, nil, since
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

// send offers a call without blocking; a page too slow to read gets the
// call again when it reconnects.
func (s *Stream) send(o Offer) {
	select {
	case s.c <- o:
	default:
	}
}

// Close closes the stream; closing it again does nothing. When it was the
// thread's last (on every instance that shares the relay), claims without
// a result lapse: the calls are offered again to the next stream; and the
// calls whose caller went away are dropped (ErrCallerGone), as no page is
// left to run them.
func (s *Stream) Close() {
	b := s.b
	b.mu.Lock()
	closed := b.closeHere(s)
	b.mu.Unlock()
	if !closed {
		return
	}
	ctx, cancel := relayContext(context.Background())
	defer cancel()
	// A relay that cannot count the close now writes it back later.
	_ = b.relay.closeStream(ctx, s.tk)
}

// closeHere closes s in this process and reports whether it was open. The
// claims and the calls of a gone caller are the relay's to lapse and
// drop. Callers hold h.mu.
func (h *hub) closeHere(s *Stream) bool {
	th := h.threads[s.tk]
	if th == nil {
		return false
	}
	if _, ok := th.streams[s]; !ok {
		return false
	}
	delete(th.streams, s)
	h.streams--
	if h.tokens[s.token]--; h.tokens[s.token] <= 0 {
		delete(h.tokens, s.token)
	}
	if len(th.streams) == 0 && len(th.waiting) == 0 {
		delete(h.threads, s.tk)
	}
	return true
}

// Claim claims a call for a page of th before it runs it; the first claim
// wins.
func (b *Bridge) Claim(th Thread, callID string) error {
	ctx, cancel := relayContext(context.Background())
	defer cancel()
	return b.relay.claim(ctx, callKey{th, callID})
}

// Post delivers a call's outcome from a page of th; only the first counts.
func (b *Bridge) Post(th Thread, callID string, o Outcome) error {
	k := callKey{th, callID}
	ctx, cancel := relayContext(context.Background())
	defer cancel()
	won, _, err := b.relay.finish(ctx, k, &o)
	switch {
	case err != nil:
		return err
	case !won:
		return ErrConflict
	}
	// A Run here needs nothing to come back from the relay.
	b.answer(k, ending{out: o})
	return nil
}
