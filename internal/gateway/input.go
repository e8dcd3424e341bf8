package gateway

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
)

// decodeInput decodes a call's input into the values a JSON Schema
// validator and the references read: map[string]any, []any, string, bool,
// nil and jsonread.Number, which keeps numbers exact. Absent or null is {}.
// A name repeated in an object is an error: which one the schema checked
// would be anyone's guess.
func decodeInput(raw []byte) (any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, nil
	}
	var v any
	err := jsonread.One(raw, func(d *jsontext.Decoder) (err error) {
		v, err = jsonread.Value(d)
		return err
	}, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return nil, err
	}
	return v, nil
}

// inputDigest is the ledger's digest of a call's input: of the value
// decodeInput gave, canonicalized straight from the input's bytes where
// they are that value, or of the text when it is no JSON.
func inputDigest(raw []byte, input any, inputErr error) string {
	if inputErr != nil {
		return ledger.InputDigest(string(raw))
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if d, err := ledger.RawInputDigest(trimmed); err == nil {
		return d
	}
	return ledger.InputDigest(input)
}
