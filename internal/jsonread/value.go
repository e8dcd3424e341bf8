package jsonread

import (
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// Value reads one JSON value from d as the values a JSON Schema validator
// and references read: map[string]any, []any, string, bool, nil and
// Number, which keeps numbers exact. Whether a repeated name is an error
// is d's option (jsontext.AllowDuplicateNames); otherwise the last wins.
func Value(d *jsontext.Decoder) (any, error) { return value(d, exactNumber) }

func exactNumber(text string) (any, error) { return Number(text), nil }

// value reads one JSON value from d, each number made by number from its
// text.
func value(d *jsontext.Decoder, number func(text string) (any, error)) (any, error) {
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
		return number(tok.String())
	case '{':
		obj := map[string]any{}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			// The name's token is void once the value is read.
			key := name.String()
			v, err := value(d, number)
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
			v, err := value(d, number)
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
