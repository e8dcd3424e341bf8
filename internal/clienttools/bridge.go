// Package clienttools is the bridge to the user's page for client tools
// (SPEC §7): a call waits here until a page of its thread claims it, runs
// it and posts the result, or until the client tool timeout.
package clienttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

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
	if t := bytes.TrimLeft(o.Result, " \t\r\n"); len(t) > 0 && t[0] == '"' && json.Unmarshal(o.Result, &s) == nil {
		return result.Result{Content: s}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, o.Result); err != nil {
		return result.Errorf("the page posted a result that is not JSON: %v", err)
	}
	return result.Result{Content: buf.String()}
}

type threadKey struct{ user, thread string }

type callKey struct {
	threadKey
	callID string
}

type pending struct {
	offer   Offer
	seq     uint64 // arrival order: a page gets waiting calls oldest first
	claimed bool
	// finished is set once the call has an outcome or timed out; the entry
	// stays a while so late claims and results get 409, not 404.
	finished time.Time
	done     chan Outcome
}

// Stream is an open event stream of one page.
type Stream struct {
	// C delivers new calls of the stream's thread.
	C  <-chan Offer
	c  chan Offer
	b  *Bridge
	tk threadKey
}

// Bridge holds the client calls in flight and the pages' open streams.
type Bridge struct {
	mu      sync.Mutex
	seq     uint64
	calls   map[callKey]*pending
	streams map[threadKey]map[*Stream]struct{}

	// After is the clock's timer, replaceable in tests.
	After func(time.Duration) <-chan time.Time
	// Now is the clock, replaceable in tests.
	Now func() time.Time
}

// keepFinished is how long a finished call answers 409 rather than 404.
const keepFinished = 10 * time.Minute

// NewBridge returns an empty bridge.
func NewBridge() *Bridge {
	return &Bridge{
		calls:   map[callKey]*pending{},
		streams: map[threadKey]map[*Stream]struct{}{},
		After:   time.After,
		Now:     time.Now,
	}
}

// ErrTimeout is Run's error when no page answered in time.
var ErrTimeout = errors.New("client tool timed out")

// Run offers a call to the pages of its thread and waits for the outcome,
// at most timeout, or until ctx is done.
func (b *Bridge) Run(ctx context.Context, user, thread string, offer Offer, timeout time.Duration) (Outcome, error) {
	k := callKey{threadKey{user, thread}, offer.CallID}
	p := &pending{offer: offer, done: make(chan Outcome, 1)}
	b.mu.Lock()
	b.sweep()
	if old, ok := b.calls[k]; ok && old.finished.IsZero() {
		b.mu.Unlock()
		return Outcome{}, errors.New("this client call is already waiting for its page")
	}
	b.seq++
	p.seq = b.seq
	b.calls[k] = p
	for s := range b.streams[k.threadKey] {
		s.send(offer)
	}
	b.mu.Unlock()

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
	b.mu.Lock()
	if err != nil && p.finished.IsZero() {
		p.finished = b.Now()
	} else if err != nil {
		// The page answered as the timer fired: its answer wins.
		out, err = <-p.done, nil
	}
	b.mu.Unlock()
	return out, err
}

// sweep forgets finished calls past keepFinished. Callers hold b.mu.
func (b *Bridge) sweep() {
	now := b.Now()
	for k, p := range b.calls {
		if !p.finished.IsZero() && now.Sub(p.finished) > keepFinished {
			delete(b.calls, k)
		}
	}
}

// Open opens a stream for a page of (user, thread). It returns the calls
// waiting now that no open stream has claimed.
func (b *Bridge) Open(user, thread string) (*Stream, []Offer) {
	tk := threadKey{user, thread}
	c := make(chan Offer, 64)
	s := &Stream{C: c, c: c, b: b, tk: tk}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streams[tk] == nil {
		b.streams[tk] = map[*Stream]struct{}{}
	}
	b.streams[tk][s] = struct{}{}
	var waiting []*pending
	for k, p := range b.calls {
		if k.threadKey == tk && p.finished.IsZero() && !p.claimed {
			waiting = append(waiting, p)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].seq < waiting[j].seq })
	offers := make([]Offer, len(waiting))
	for i, p := range waiting {
		offers[i] = p.offer
	}
	return s, offers
}

// send offers a call without blocking; a page too slow to read gets the
// call again when it reconnects.
func (s *Stream) send(o Offer) {
	select {
	case s.c <- o:
	default:
	}
}

// Close closes the stream. When it was the thread's last, claims without
// a result lapse: the calls are offered again to the next stream.
func (s *Stream) Close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.streams[s.tk], s)
	if len(b.streams[s.tk]) > 0 {
		return
	}
	delete(b.streams, s.tk)
	for k, p := range b.calls {
		if k.threadKey == s.tk && p.finished.IsZero() {
			p.claimed = false
		}
	}
}

// Claim claims a call for a page before it runs it; the first claim wins.
func (b *Bridge) Claim(user, thread, callID string) error {
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
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.unfinished(user, thread, callID)
	if err != nil {
		return err
	}
	p.finished = b.Now()
	p.done <- o
	return nil
}

// unfinished finds a call of the page's user and thread that has no
// outcome yet: ErrNotFound if there is no such call, ErrConflict if it has
// finished. Callers hold b.mu.
func (b *Bridge) unfinished(user, thread, callID string) (*pending, error) {
	b.sweep()
	p, ok := b.calls[callKey{threadKey{user, thread}, callID}]
	switch {
	case !ok:
		return nil, ErrNotFound
	case !p.finished.IsZero():
		return nil, ErrConflict
	}
	return p, nil
}
