package result

import (
	"bytes"
	"mime"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Output says what an OpenAPI operation's JSON answer is to its tool.
type Output string

const (
	// OutputNone: the operation declares no answer schema; the answer's
	// JSON is the content alone.
	OutputNone Output = ""
	// OutputObject: the answer is an object, the tool's structured content.
	OutputObject Output = "object"
	// OutputWrapped: the answer is not an object, and is the property
	// "result" of the tool's structured content.
	OutputWrapped Output = "wrapped"
)

// FromOperation normalizes the answer of an operation imported from an
// OpenAPI document: an answer in the channels' shape (a string "content")
// is read as any handler's; any other JSON is the content as its text,
// and, when the operation declares the answer's schema, the structured
// content; an error answer of type application/problem+json is an error
// result of its title and detail; any other answer is read as Normalize
// reads it.
func FromOperation(status int, contentType string, body []byte, out Output) (Result, bool) {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	if (status < 200 || status > 299) && mediaType == "application/problem+json" {
		if r, ok := problem(status, body); ok {
			return r, false
		}
	}
	if status < 200 || status > 299 || !IsJSON(contentType) {
		return NormalizeOrCard(status, contentType, body)
	}
	if r, card := fromJSON(body); card || !r.IsError {
		return r, card // the channels' shape, or a card
	}
	value := jsontext.Value(bytes.TrimSpace(body))
	if !value.IsValid(jsonread.Lenient) {
		return Failure("handler answered invalid JSON"), false
	}
	compact := jsontext.Value(bytes.Clone(value))
	_ = compact.Compact()
	r := Result{Content: string(compact)}
	switch {
	case out == OutputObject && compact.Kind() == '{':
		r.Structured = compact
	case out == OutputWrapped || out == OutputObject:
		r.Structured = jsontext.Value(`{"result":` + string(compact) + `}`)
	}
	return r, false
}

// problem reads an RFC 9457 problem: its title and detail.
func problem(status int, body []byte) (Result, bool) {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if jsonread.UnmarshalAnyCase(body, &p) != nil || p.Title == "" && p.Detail == "" {
		return Result{}, false
	}
	msg := strings.TrimSpace(strings.Join([]string{bounded(p.Title), bounded(p.Detail)}, ": "))
	msg = strings.Trim(msg, ": ")
	return Failure("handler answered %d: %s", status, msg), true
}
