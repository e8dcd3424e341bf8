package jsonread

import (
	// The one import of encoding/json in the tree, for its Number type
	// alone (docs/architecture.md, JSON).
	stdjson "encoding/json"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Number is a JSON number kept as its text, so that it stays exact. It is
// encoding/json's Number itself, not a type like it: the JSON Schema
// validator (santhosh-tekuri/jsonschema/v6) reads a number exactly only
// when it is that type, and as any other it would be a string.
type Number = stdjson.Number

// Numbers writes a Number as the number it holds, as encoding/json did (an
// empty one as 0); json alone knows it only as a string.
var Numbers = json.WithMarshalers(json.MarshalToFunc(func(enc *jsontext.Encoder, n Number) error {
	if n == "" {
		n = "0"
	}
	return enc.WriteValue(jsontext.Value(n))
}))
