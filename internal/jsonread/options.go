package jsonread

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

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
