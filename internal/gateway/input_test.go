package gateway

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
)

func TestDecodeInput(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     any
		wantErr  string
	}{
		{"absent", ``, map[string]any{}, ""},
		{"null", ` null `, map[string]any{}, ""},
		{"object", `{"a":"x","n":12345678901234567890123,"f":1.50,"b":true,"z":null,"l":[1,"2",{}]}`, map[string]any{
			"a": "x", "n": jsonread.Number("12345678901234567890123"), "f": jsonread.Number("1.50"), "b": true, "z": nil,
			"l": []any{jsonread.Number("1"), "2", map[string]any{}},
		}, ""},
		{"escapes", `{"\u0069d":"a\"b\u00e9"}`, map[string]any{"id": "a\"bé"}, ""},
		{"invalid UTF-8 mangled", "{\"s\":\"\xff\"}", map[string]any{"s": "\ufffd"}, ""},
		{"empty array", `[]`, []any{}, ""},
		{"string", `"s"`, "s", ""},
		{"repeated name", `{"id":"a","id":"b"}`, nil, "duplicate"},
		{"truncated", `{"id":`, nil, "EOF"},
		{"trailing", `{} {}`, nil, "after top-level value"},
		{"missing comma", `[1 2]`, nil, "invalid character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeInput(jsontext.Value(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("decodeInput(%q) = %#v, %v; want an error with %q", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("decodeInput(%q) = %#v, %v; want %#v", c.in, got, err, c.want)
			}
		})
	}
}

// FuzzDecodeInput holds decodeInput to jsonschema.UnmarshalJSON, the
// decoder schemas are compiled with, except that a repeated name is an
// error rather than its last value.
func FuzzDecodeInput(f *testing.F) {
	for _, s := range []string{`{"id":"b1"}`, `{"n":1e400,"a":[true,false,null]}`, `{"a":{"b":{"c":[]}}}`, `[1,`, `{"a":1,"a":2}`, "\"\xff\"", ` "x" `, `-0.0e-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeInput(in)
		trimmed := bytes.TrimSpace(in)
		if len(trimmed) == 0 || string(trimmed) == "null" {
			return
		}
		want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(in))
		switch {
		case err == nil && werr != nil:
			t.Fatalf("decodeInput(%q) = %#v; UnmarshalJSON fails: %v", in, got, werr)
		case err != nil && werr == nil && !strings.Contains(err.Error(), "duplicate"):
			t.Fatalf("decodeInput(%q) fails: %v; UnmarshalJSON = %#v", in, err, want)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("decodeInput(%q) = %#v; UnmarshalJSON = %#v", in, got, want)
		}
	})
}

// The digest canonicalized from the input's bytes is the digest of the
// value decodeInput gives, which is what the ledger stored before.
func TestInputDigestFromBytes(t *testing.T) {
	for _, in := range []string{
		``, `null`, ` {} `, `{"id":"b1"}`, `{"b":1,"a":[1.0,1e2,-0,12345678901234567890]}`,
		`{"s":"\u00e9\u2028<&>\"\\"}`, "{\"bad\":\"\xff\xfe\"}", `{"lone":"\ud800"}`,
		`{"z":{"y":{"x":[true,false,null]}},"é":"x","e":"y"}`, `"just a string"`, `[3,2,1]`,
		"{\"a\":1}  \n", `{"a":1,"a":2}`, `{"a":`, `not json`,
	} {
		input, err := decodeInput(jsontext.Value(in))
		want := ledger.InputDigest(input)
		if err != nil {
			want = ledger.InputDigest(in)
		}
		if got := inputDigest(jsontext.Value(in), input, err); got != want {
			t.Errorf("%q: digest %s, want %s", in, got, want)
		}
	}
}
