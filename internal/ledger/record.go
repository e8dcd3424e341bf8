package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
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
func encodeCall(c *Call) ([]byte, error) {
	data, err := json.Marshal(c, callOptions)
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding call %q: %w", c.Key, err)
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
