// Package clienttools is the bridge to the user's page for client tools
// (SPEC §7): a call waits here until a page of its thread claims it, runs
// it and posts the result, or until the client tool timeout.
//
// NewBridge keeps everything in this process's memory: one gateway
// instance. NewRedisBridge shares the calls, claims, results and the
// streams' lapse rule with every instance on the same Redis (redis.go).
package clienttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// DefaultTimeout is how long a call waits for its page.
const DefaultTimeout = 120 * time.Second

// Errors of the page endpoints.
var (
	// ErrNotFound: no such call for this page's user and thread.
	ErrNotFound = errors.New("no such client call for this page")
	// ErrConflict: claimed by another page, or already answered or timed out.
	ErrConflict = errors.New("the client call is claimed, answered or timed out")
)

// Offer is a call as a page receives it.
type Offer struct {
	CallID string          `json:"callId"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	// Traceparent is the W3C traceparent of the call's span, when the call
	// is traced, so that the page's own spans join its trace.
	Traceparent string `json:"traceparent,omitempty"`
}

// Outcome is what the page posted.
type Outcome struct {
	// Result is the returned value as the page serialized it; nil when the
	// function returned undefined.
	Result json.RawMessage `json:"result,omitempty"`
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
	if jsontext.Value(o.Result).Kind() == '"' && jsonv2.Unmarshal(o.Result, &s, jsontext.AllowInvalidUTF8(true)) == nil {
		return result.Result{Content: s}
	}
	// Compact works in place: o.Result is the caller's.
	text := jsontext.Value(bytes.Clone(o.Result))
	if err := text.Compact(); err != nil {
		return result.Failure("the page posted a result that is not JSON: %v", err)
	}
	return result.Result{Content: string(text)}
}

type threadKey struct{ user, thread string }

type callKey struct {
	threadKey
	callID string
}

type pending struct {
	offer   Offer
	seq     uint64        // arrival order: a page gets waiting calls oldest first
	timeout time.Duration // the Run's, for writing the call back to Redis
	offered bool          // recorded in Redis: a write-back may record it again
	claimed bool
	// finished is set once the call has an outcome or timed out; the entry
	// stays a while so late claims and results get 409, not 404.
	finished time.Time
	done     chan Outcome
}

// thread is what one (user, thread) holds: its open streams and its calls
// that wait for a page. It exists while it holds either.
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
	tk    threadKey
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
// zero field takes its default.
type Limits struct {
	// PendingPerThread caps the calls of one (user, thread) that wait for
	// a page. Default: 64.
	PendingPerThread int
	// Pending caps the calls that wait for a page in all. It also bounds
	// how many finished calls are remembered to answer 409. Default: 10000.
	Pending int
	// StreamsPerToken caps the open streams of one page token. Default: 16.
	StreamsPerToken int
}

// Default limits.
const (
	DefaultPendingPerThread = 64
	DefaultPending          = 10000
	DefaultStreamsPerToken  = 16
)

// Errors of a bridge over its limits.
var (
	// ErrThreadFull: Run of a call whose thread has PendingPerThread
	// calls waiting.
	ErrThreadFull = errors.New("too many client tool calls waiting in this thread")
	// ErrFull: Run of a call while Pending calls wait in all.
	ErrFull = errors.New("too many client tool calls waiting on this gateway")
	// ErrTooManyStreams: Open for a page token with StreamsPerToken
	// streams open.
	ErrTooManyStreams = errors.New("too many open call streams for this page token")
)

// Bridge holds the client calls in flight and the pages' open streams.
type Bridge struct {
	mu      sync.Mutex
	seq     uint64
	limits  Limits
	calls   map[callKey]*pending // waiting, and finished for keepFinished
	threads map[threadKey]*thread
	waiting int            // calls that wait for a page
	streams int            // open streams
	tokens  map[string]int // open streams by page token
	// ended holds the finished calls oldest first: they expire from its
	// front, so no operation scans every call.
	ended []ended
	// stale holds the threads whose stream count in Redis may be too
	// high: closing a stream could not reach it. They are written back
	// when the subscription comes back.
	stale map[threadKey]struct{}

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
		threads: map[threadKey]*thread{},
		tokens:  map[string]int{},
		stale:   map[threadKey]struct{}{},
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
	if l.PendingPerThread <= 0 {
		l.PendingPerThread = DefaultPendingPerThread
	}
	if l.Pending <= 0 {
		l.Pending = DefaultPending
	}
	if l.StreamsPerToken <= 0 {
		l.StreamsPerToken = DefaultStreamsPerToken
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

// Admit reports whether a new call of user's thread would be taken now:
// ErrThreadFull or ErrFull when Run would refuse it. It reserves nothing,
// so a call admitted may still be refused by Run when others came first.
func (b *Bridge) Admit(user, thread string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire()
	return b.admit(threadKey{user, thread})
}

// admit is Admit for callers that hold b.mu.
func (b *Bridge) admit(tk threadKey) error {
	if th := b.threads[tk]; th != nil && len(th.waiting) >= b.limits.PendingPerThread {
		return ErrThreadFull
	}
	if b.waiting >= b.limits.Pending {
		return ErrFull
	}
	return nil
}

// ErrTimeout is Run's error when no page answered in time.
var ErrTimeout = errors.New("client tool timed out")

// Run offers a call to the pages of its thread and waits for the outcome,
// at most timeout, or until ctx is done. Over a limit it returns
// ErrThreadFull or ErrFull at once.
func (b *Bridge) Run(ctx context.Context, user, thread string, offer Offer, timeout time.Duration) (Outcome, error) {
	k := callKey{threadKey{user, thread}, offer.CallID}
	p := &pending{offer: offer, timeout: timeout, done: make(chan Outcome, 1)}
	b.mu.Lock()
	b.expire()
	if old, ok := b.calls[k]; ok && old.finished.IsZero() {
		b.mu.Unlock()
		return Outcome{}, errors.New("this client call is already waiting for its page")
	}
	if err := b.admit(k.threadKey); err != nil {
		b.mu.Unlock()
		return Outcome{}, err
	}
	th := b.thread(k.threadKey)
	b.seq++
	p.seq = b.seq
	b.calls[k] = p
	th.waiting[k.callID] = p
	b.waiting++
	if b.relay == nil {
		for s := range th.streams {
			s.send(offer)
		}
	}
	b.mu.Unlock()
	if b.relay != nil {
		// Every instance's streams, this one's too, get the offer from
		// the channel, after Redis has it: a claim never races it.
		octx, cancel := context.WithTimeout(ctx, redisOpTimeout)
		_, err := b.relay.offer(octx, k, offer, timeout, "new")
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

	var (
		out Outcome
		err error
	)
	select {
	case out = <-p.done:
	case <-b.After(timeout):
		err = ErrTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && b.relay != nil {
		return b.endInRedis(k, p, err)
	}
	b.mu.Lock()
	if err != nil && p.finished.IsZero() {
		b.finish(k, p)
	} else if err != nil {
		// The page answered as the timer fired: its answer wins.
		out, err = <-p.done, nil
	}
	b.mu.Unlock()
	return out, err
}

// endInRedis ends a Run that timed out (err) in Redis, unless a result was
// posted first on any instance: that result wins. When Redis cannot be
// reached the call ends here; its key in Redis expires.
func (b *Bridge) endInRedis(k callKey, p *pending, err error) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
	_, posted, ferr := b.relay.finish(ctx, k, nil)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.finished.IsZero() {
		// A result was handed over meanwhile.
		return <-p.done, nil
	}
	b.finish(k, p)
	if ferr == nil && posted != nil {
		return *posted, nil
	}
	return Outcome{}, err
}

// deliver hands an offer from the channel to this instance's streams of
// its thread that did not list it when they opened.
func (b *Bridge) deliver(tk threadKey, o Offer, seq uint64) {
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

// answer hands a result to the Run of this instance that waits for k, if
// any still does.
func (b *Bridge) answer(k callKey, o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.calls[k]; p != nil && p.finished.IsZero() {
		b.finish(k, p)
		p.done <- o
	}
}

// heldCall is a call a Run of this instance waits for.
type heldCall struct {
	k       callKey
	offer   Offer
	timeout time.Duration
}

// held returns what this instance holds, to write back to Redis: its open
// streams by thread (zero for a thread whose count in Redis may be stale)
// and the calls its Runs wait for.
func (b *Bridge) held() (map[threadKey]int, []heldCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	streams := make(map[threadKey]int, len(b.threads)+len(b.stale))
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
				calls = append(calls, heldCall{callKey{tk, id}, p.offer, p.timeout})
			}
		}
	}
	return streams, calls
}

// recounted forgets that tk's count in Redis may be stale: it was written
// back.
func (b *Bridge) recounted(tk threadKey) {
	b.mu.Lock()
	delete(b.stale, tk)
	b.mu.Unlock()
}

// thread returns tk's thread, made if need be. Callers hold b.mu.
func (b *Bridge) thread(tk threadKey) *thread {
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
	if th := b.threads[k.threadKey]; th != nil {
		delete(th.waiting, k.callID)
		if len(th.waiting) == 0 && len(th.streams) == 0 {
			delete(b.threads, k.threadKey)
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

// Open opens a stream for a page of (user, thread), counted against the
// page token it was opened with (token is any key of it, e.g. a digest).
// It returns the calls waiting now that no open stream has claimed, or
// ErrTooManyStreams.
func (b *Bridge) Open(user, thread, token string) (*Stream, []Offer, error) {
	if b.relay != nil {
		// A write-back of the stream counts waits until this stream
		// is counted both here and in Redis.
		b.relay.counting.RLock()
		defer b.relay.counting.RUnlock()
	}
	tk := threadKey{user, thread}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens[token] >= b.limits.StreamsPerToken {
		return nil, nil, ErrTooManyStreams
	}
	b.tokens[token]++
	b.streams++
	c := make(chan Offer, 64)
	s := &Stream{C: c, c: c, b: b, tk: tk, token: token}
	th := b.thread(tk)
	th.streams[s] = struct{}{}
	if b.relay != nil {
		s.opening = true
		b.mu.Unlock()
		offers, err := b.openInRedis(s)
		b.mu.Lock()
		return s, offers, err
	}
	waiting := make([]*pending, 0, len(th.waiting))
	for _, p := range th.waiting {
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
// again to the next stream.
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
// Callers hold b.mu.
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
	for _, p := range th.waiting {
		p.claimed = false
	}
	if len(th.waiting) == 0 {
		delete(b.threads, s.tk)
	}
	return true
}

// Claim claims a call for a page before it runs it; the first claim wins.
func (b *Bridge) Claim(user, thread, callID string) error {
	if b.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), redisOpTimeout)
		defer cancel()
		return b.relay.claim(ctx, callKey{threadKey{user, thread}, callID})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.unfinished(user, thread, callID)
	if err != nil {
		return err
	}
	if p.claimed {
		return ErrConflict
	}
	p.claimed = true
	return nil
}

// Post delivers a call's outcome; only the first counts.
func (b *Bridge) Post(user, thread, callID string, o Outcome) error {
	if b.relay != nil {
		k := callKey{threadKey{user, thread}, callID}
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
		b.answer(k, o)
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.unfinished(user, thread, callID)
	if err != nil {
		return err
	}
	b.finish(callKey{threadKey{user, thread}, callID}, p)
	p.done <- o
	return nil
}

// unfinished finds a call of the page's user and thread that has no
// outcome yet: ErrNotFound if there is no such call, ErrConflict if it has
// finished. Callers hold b.mu.
func (b *Bridge) unfinished(user, thread, callID string) (*pending, error) {
	b.expire()
	p, ok := b.calls[callKey{threadKey{user, thread}, callID}]
	switch {
	case !ok:
		return nil, ErrNotFound
	case !p.finished.IsZero():
		return nil, ErrConflict
	}
	return p, nil
}
