package jsonread

import (
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

func TestValue(t *testing.T) {
	tests := []struct {
		in      string
		want    any
		wantErr bool
	}{
		{in: `null`, want: nil},
		{in: `true`, want: true},
		{in: `"a\u003c"`, want: "a<"},
		{in: `12345678901234567890.10`, want: Number("12345678901234567890.10")},
		{in: `[]`, want: []any{}},
		{in: `{}`, want: map[string]any{}},
		{in: `{"a":[1,{"b":null}],"c":"d"}`, want: map[string]any{"a": []any{Number("1"), map[string]any{"b": nil}}, "c": "d"}},
		{in: `{"a":[1,`, wantErr: true},
		{in: `{"a":1,"a":2}`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := Value(jsontext.NewDecoder(strings.NewReader(tt.in)))
		if (err != nil) != tt.wantErr || !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Value(%s) = %#v, %v; want %#v", tt.in, got, err, tt.want)
		}
	}
	// With the decoder's leave, the last of repeated names wins.
	got, err := Value(jsontext.NewDecoder(strings.NewReader(`{"a":1,"a":2}`), Lenient))
	if want := map[string]any{"a": Number("2")}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Value with Lenient = %#v, %v; want %#v", got, err, want)
	}
}

// TestLegacy checks the bytes encoding/json's Marshal wrote for the values
// the readers produce.
func TestLegacy(t *testing.T) {
	v := map[string]any{
		"z": Number("1.50"), "empty": Number(""), "a": []any(nil), "m": map[string]any(nil),
		"html": "<a&b>", "js": "\u2028\u2029", "bad": "x\xffy",
	}
	// Invalid UTF-8 is U+FFFD itself, where encoding/json wrote \ufffd.
	want := `{"a":null,"bad":"x` + "\uFFFD" + `y","empty":0,"html":"\u003ca\u0026b\u003e","js":"\u2028\u2029","m":null,"z":1.50}`
	for range 5 { // map order would show in a few runs
		got, err := json.Marshal(v, Legacy)
		if err != nil || string(got) != want {
			t.Fatalf("Marshal with Legacy = %s, %v; want %s", got, err, want)
		}
	}
	// A raw value keeps its escapes, and gains the HTML ones.
	raw := struct {
		S string         `json:"s"`
		V jsontext.Value `json:"v"`
	}{"<é>", jsontext.Value("{\"a\" : \"<\\u00e9\u2028\", \"n\": 1.0e2}")}
	got, err := json.Marshal(raw, Legacy)
	if want := `{"s":"\u003cé\u003e","v":{"a":"\u003c\u00e9\u2028","n":1.0e2}}`; err != nil || string(got) != want {
		t.Errorf("Marshal of a raw value with Legacy = %s, %v; want %s", got, err, want)
	}
	got, err = json.Marshal(map[string]any{"html": "<&>"}, Legacy, jsontext.EscapeForHTML(false))
	if want := `{"html":"<&>"}`; err != nil || string(got) != want {
		t.Errorf("Marshal with Legacy and no HTML escapes = %s, %v; want %s", got, err, want)
	}
	// Numbers alone: a Number is a number, not a string.
	got, err = json.Marshal([]Number{"7", "-1e3"}, Numbers)
	if want := `[7,-1e3]`; err != nil || string(got) != want {
		t.Errorf("Marshal with Numbers = %s, %v; want %s", got, err, want)
	}
	if _, err := json.Marshal(Number("1x"), Numbers); err == nil {
		t.Error("Marshal of an invalid Number did not fail")
	}
}
