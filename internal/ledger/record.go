package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// stamp returns the call to store: c with its zero times set, so a call
// whose writer forgot them is not swept at once.
func stamp(c *Call, now func() time.Time) *Call {
	rec := *c
	if rec.Created.IsZero() || rec.Updated.IsZero() {
		t := now()
		if rec.Created.IsZero() {
			rec.Created = t
		}
		if rec.Updated.IsZero() {
			rec.Updated = t
		}
	}
	return &rec
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
		return nil, fmt.Errorf("ledger: decoding call %q: %w", key, err)
	}
	return &c, nil
}

// encodeCall is the stored form of c. HTML escaping is off so that a card's
// raw JSON comes back byte for byte (compacted, as encoding/json writes it).
func encodeCall(c *Call) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("ledger: encoding call %q: %w", c.Key, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
