package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

func decodeCall(key string, data []byte) (*Call, error) {
	var c Call
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: call %q: %w", ErrCorrupt, key, err)
	}
	return &c, nil
}

// salvage reads what it can of a stored call that does not decode whole
// (cut short, or damaged past some point): the string members before the
// damage. encodeCall writes the key, the call id, the tool, the caller and
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

// encodeCall is the stored form of c: its JSON as encoding/json writes it
// from the struct tags with HTML escaping off, so that a card's raw JSON
// comes back byte for byte (compacted). It is written by hand, in one
// buffer sized for it: both back ends encode a call twice per call.
func encodeCall(c *Call) ([]byte, error) {
	return appendCall(make([]byte, 0, callSize(c)), c)
}

// callSize is about the size of c's JSON: its strings plus room for the
// names, times and escapes.
func callSize(c *Call) int {
	n := 320 + len(c.Key) + len(c.CallID) + len(c.Tool) + len(c.User) + len(c.Install) +
		len(c.Source) + len(c.ThreadID) + len(c.Digest) + len(c.Owner) + len(c.Card)
	if c.Result != nil {
		n += 64 + len(c.Result.Content) + len(c.Result.Markdown) + len(c.Result.EmbedURL)
	}
	if c.Resume != nil {
		n += 64 + len(c.Resume.ButtonID) + len(c.Resume.Device)
	}
	return n + n/16
}

// appendCall appends c's JSON to dst (see encodeCall).
func appendCall(dst []byte, c *Call) ([]byte, error) {
	dst = append(dst, `{"key":`...)
	dst = result.AppendString(dst, c.Key)
	dst = append(dst, `,"callId":`...)
	dst = result.AppendString(dst, c.CallID)
	dst = append(dst, `,"tool":`...)
	dst = result.AppendString(dst, c.Tool)
	dst = result.AppendOptional(dst, `,"user":`, c.User)
	dst = result.AppendOptional(dst, `,"install":`, c.Install)
	dst = result.AppendOptional(dst, `,"source":`, c.Source)
	dst = result.AppendOptional(dst, `,"threadId":`, c.ThreadID)
	dst = append(dst, `,"digest":`...)
	dst = result.AppendString(dst, c.Digest)
	dst = append(dst, `,"state":`...)
	dst = result.AppendString(dst, string(c.State))
	if c.Result != nil {
		dst = append(dst, `,"result":{`...)
		dst = c.Result.AppendFields(dst)
		dst = append(dst, '}')
	}
	if len(c.Card) > 0 {
		dst = append(dst, `,"card":`...)
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, c.Card); err != nil {
			return nil, fmt.Errorf("ledger: encoding call %q: card: %w", c.Key, err)
		}
		dst = buf.Bytes()
	}
	if r := c.Resume; r != nil {
		dst = append(dst, `,"resume":{`...)
		mark := len(dst)
		for _, m := range [...]struct{ name, value string }{
			{`"buttonId":`, r.ButtonID}, {`"action":`, r.Action}, {`"device":`, r.Device},
		} {
			if m.value == "" {
				continue
			}
			if len(dst) > mark {
				dst = append(dst, ',')
			}
			dst = append(dst, m.name...)
			dst = result.AppendString(dst, m.value)
		}
		dst = append(dst, '}')
	}
	dst = result.AppendOptional(dst, `,"owner":`, c.Owner)
	for _, m := range [...]struct {
		name string
		t    time.Time
	}{{`,"deadline":`, c.Deadline}, {`,"created":`, c.Created}, {`,"updated":`, c.Updated}} {
		dst = append(dst, m.name...)
		var err error
		if dst, err = appendTime(dst, m.t); err != nil {
			return nil, fmt.Errorf("ledger: encoding call %q: %w", c.Key, err)
		}
	}
	return append(dst, '}'), nil
}

// appendTime writes t as time.Time's MarshalJSON does, with its checks.
func appendTime(dst []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil, fmt.Errorf("time %v: year outside of range [0,9999]", t)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), nil
}
