package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// stamp returns the call to store: c with its zero times set, so a call
// whose writer forgot them is not swept at once.
func stamp(c *Call, clk clock.Clock) *Call {
	rec := *c
	if rec.Created.IsZero() || rec.Updated.IsZero() {
		t := clk.Now()
		if rec.Created.IsZero() {
			rec.Created = t
		}
		if rec.Updated.IsZero() {
			rec.Updated = t
		}
	}
	return &rec
}

// inFlight says whether a call in state s may still be running somewhere.
func inFlight(s State) bool {
	return s == Running || s == AwaitingClient
}

// keptFrom is when a call's retention starts: its last change, or, for a
// call in flight, its deadline when that is later. A call in flight is
// kept until a repeat of it can give it up as outcome unknown; swept
// before, its call id would run again.
func keptFrom(c *Call) time.Time {
	if inFlight(c.State) && c.Deadline.After(c.Updated) {
		return c.Deadline
	}
	// An approval question is kept until it lapses, to be closed then.
	if c.State == ActionRequired && c.Approval != nil && c.Approval.Expires.After(c.Updated) {
		return c.Approval.Expires
	}
	return c.Updated
}

// checkCreate enforces the Create contract shared by both back ends.
func checkCreate(c *Call) error {
	if c.Key == "" {
		return errors.New("ledger: creating a call without a key")
	}
	if c.State != Running && c.State != AwaitingClient {
		return fmt.Errorf("ledger: creating call %q in state %q: want %q or %q", c.Key, c.State, Running, AwaitingClient)
	}
	return nil
}

// callOptions are how a call is stored and read: its JSON from the struct
// tags (no HTML escaping, so a card's raw JSON comes back byte for byte,
// compacted). Invalid UTF-8 in a string is stored as U+FFFD, as encoding/json
// did, rather than failing the record of a call that ran.
var callOptions = jsontext.AllowInvalidUTF8(true)

// encodeCall is the stored form of c.
func encodeCall(c *Call) ([]byte, error) { return encodeStored(c.Key, c) }

// encodeStored is the JSON of v, a call (key's) or a stored form of it. The
// back ends copy it after their header: json.Marshal encodes into a pooled
// buffer and allocates the result once, at its size, where encoding into
// the header's own buffer grew it, copying, several times for a call with
// a 1 KiB result (BenchmarkRedisCall: 9.6 KB a call against 6.4).
func encodeStored(key string, v any) ([]byte, error) {
	data, err := json.Marshal(v, callOptions)
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding call %q: %w", key, err)
	}
	return data, nil
}

// decodeCall reads a stored call.
func decodeCall(key string, data []byte) (*Call, error) {
	var c Call
	if err := json.Unmarshal(data, &c, callOptions); err != nil {
		return nil, fmt.Errorf("%w: call %q: %w", ErrCorrupt, key, err)
	}
	return &c, nil
}

// salvage reads what it can of a stored call that does not decode whole
// (cut short, or damaged past some point): the string members before the
// damage. Call declares the key, the call id, the tool, the caller and
// the digest first, so a call cut anywhere after them can still be closed
// as outcome unknown under its key, and a repeat of it recognised.
func salvage(data []byte) *Call {
	var c Call
	d := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return &c
	}
	fields := map[string]*string{
		"key": &c.Key, "callId": &c.CallID, "tool": &c.Tool, "user": &c.User, "install": &c.Install,
		"source": &c.Source, "threadId": &c.ThreadID, "digest": &c.Digest, "state": (*string)(&c.State),
	}
	for {
		tok, err := d.ReadToken()
		if err != nil || tok.Kind() != '"' {
			return &c
		}
		// A token is valid only until the next read.
		field := fields[tok.String()]
		val, err := d.ReadValue()
		if err != nil {
			return &c
		}
		if field != nil && val.Kind() == '"' {
			s, err := jsontext.AppendUnquote(nil, val)
			if err != nil {
				return &c
			}
			*field = string(s)
		}
	}
}

// DefaultMaxResultSize is the most of a result a ledger keeps by default
// (LimitResults): a model's tool result is read whole into its context,
// so one larger than this is rare, and a day of them would fill the
// ledger.
const DefaultMaxResultSize = 64 << 10

// MinMaxResultSize is the least max_result_size a config may set: below
// it, ordinary results, and the error result that replaces a large one,
// would not be kept.
const MinMaxResultSize = 1 << 10

// LimitResults returns l keeping only results whose JSON is at most max
// bytes. A finished call with a larger result is recorded Done with an
// error result in its place ("result too large to replay", naming both
// sizes): a repeat, a waiter or a read of the call gets that, while the
// caller of the run has the whole result from memory. The call still ran
// once and is never run again.
func LimitResults(l Ledger, max int64) Ledger {
	return &resultLimit{Ledger: l, max: max}
}

type resultLimit struct {
	Ledger
	max int64
}

// Unwrap returns the ledger whose results are limited.
func (r *resultLimit) Unwrap() Ledger { return r.Ledger }

// Backend returns the back end under l's wrappers (those with an Unwrap
// method, as LimitResults'): for tests that check what Open built, and
// for the store, which keeps the connections in the bolt ledger's file.
// Code that needs a Redis back end's own parts opens it on its own
// (OpenRedis).
func Backend(l Ledger) Ledger {
	for {
		w, ok := l.(interface{ Unwrap() Ledger })
		if !ok {
			return l
		}
		l = w.Unwrap()
	}
}

// Update implements Ledger.
func (r *resultLimit) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	if size, over := resultOver(c.Result, r.max); over {
		kept := *c
		kept.Result = &result.Result{IsError: true, Content: fmt.Sprintf(
			"result too large to replay: the call ran once and answered %d bytes, more than the ledger keeps (max_result_size %d bytes); it is not run again",
			size, r.max)}
		c = &kept
	}
	return r.Ledger.Update(ctx, c, from)
}

// resultOver says whether res's JSON is longer than max bytes, and how
// long. It encodes res only when its text could be: JSON writes a byte
// of a string as at most 6 (\u00XX), and the names and the flag take
// less than resultOverhead.
func resultOver(res *result.Result, max int64) (int64, bool) {
	if res == nil {
		return 0, false
	}
	const resultOverhead = 128
	text := len(res.Content) + len(res.Markdown) + len(res.EmbedURL) + len(res.Card)
	if int64(text)*6+resultOverhead <= max {
		return 0, false
	}
	data, err := json.Marshal(res, callOptions)
	if err != nil {
		// The back end's own encoding says why.
		return 0, false
	}
	return int64(len(data)), int64(len(data)) > max
}
