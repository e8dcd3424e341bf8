// Package legacyjson is encoding/json, unchanged, for the tests that hold
// a reader to what encoding/json did: the readers first written on it read
// as they did (docs/architecture.md, JSON). Only tests import it, and
// docs/docs_test.go keeps it so: the code reads and writes JSON with json
// (go-json-experiment) alone.
package legacyjson

import "encoding/json"

// RawMessage is encoding/json's RawMessage.
type RawMessage = json.RawMessage

// Decoder is encoding/json's Decoder.
type Decoder = json.Decoder

// Encoder is encoding/json's Encoder.
type Encoder = json.Encoder

var (
	// Marshal is encoding/json's Marshal.
	Marshal = json.Marshal
	// Unmarshal is encoding/json's Unmarshal.
	Unmarshal = json.Unmarshal
	// Valid is encoding/json's Valid.
	Valid = json.Valid
	// Compact is encoding/json's Compact.
	Compact = json.Compact
	// NewDecoder is encoding/json's NewDecoder.
	NewDecoder = json.NewDecoder
	// NewEncoder is encoding/json's NewEncoder.
	NewEncoder = json.NewEncoder
)
