package jsonread

import (
	// The one import of encoding/json in the tree, for its Number type
	// alone (docs/architecture.md, JSON).
	stdjson "encoding/json"
	"errors"

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

// Lenient reads JSON text as encoding/json did, for the readers first
// written on it: of repeated names the last wins, and invalid UTF-8 becomes
// U+FFFD. Names in any case are the reader's own business: a struct read
// that way says so in its tags or its reader.
var Lenient = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// Legacy writes Go values as encoding/json's Marshal did, for outputs
// whose bytes are part of what a reader sees: a map's names sorted, nil
// slices and maps as null, '<', '>' and '&' escaped (add
// jsontext.EscapeForHTML(false) where they were not), U+2028 and U+2029
// escaped, invalid UTF-8 as U+FFFD, a Number as its number, and the
// strings of a raw value (a jsontext.Value, what a MarshalJSON method
// wrote) with their own escapes kept. A struct's omitempty is its tags' to
// say: json omits an empty value, not a false or a zero (omitzero does).
var Legacy = json.JoinOptions(
	json.Deterministic(true),
	jsontext.PreserveRawStrings(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
	jsontext.EscapeForHTML(true),
	jsontext.EscapeForJS(true),
	jsontext.AllowInvalidUTF8(true),
	Numbers,
)

// Value reads one JSON value from d as the values a JSON Schema validator
// and references read: map[string]any, []any, string, bool, nil and
// Number, which keeps numbers exact. Whether a repeated name is an error
// is d's option (jsontext.AllowDuplicateNames); otherwise the last wins.
func Value(d *jsontext.Decoder) (any, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return Number(tok.String()), nil
	case '{':
		obj := map[string]any{}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			// The name's token is void once the value is read.
			key := name.String()
			v, err := Value(d)
			if err != nil {
				return nil, err
			}
			obj[key] = v
		}
		_, err := d.ReadToken()
		return obj, err
	case '[':
		arr := []any{}
		for d.PeekKind() != ']' {
			v, err := Value(d)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.ReadToken()
		return arr, err
	}
	return nil, errors.New("unexpected token")
}
