package result

import (
	"net/http"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Answer is what a result mapping reads: a target's 2xx answer with its
// body parsed as JSON (or its text when it is not JSON).
type Answer struct {
	Status  int               `expr:"status"`
	Headers map[string]string `expr:"headers"`
	Body    any               `expr:"body"`
}

// Mapping is a compiled result expression: it turns any JSON API's answer
// into the channels. It yields a string (the content) or a map with a
// string "content" and optional "markdown", "embedUrl" and "isError".
type Mapping struct {
	src string
	run func(Answer) (any, error)
}

// NewMapping returns the mapping of the expression src, which run
// evaluates on an answer. Package mapping compiles expressions into
// mappings (mapping.Compile); this package runs them without depending on
// the expression language.
func NewMapping(src string, run func(Answer) (any, error)) *Mapping {
	return &Mapping{src: src, run: run}
}

// Apply normalizes an answer through the mapping. Non-2xx answers are
// failures as without a mapping.
func (m *Mapping) Apply(status int, header http.Header, body []byte) Result {
	if status < 200 || status > 299 {
		ct := header.Get("Content-Type")
		return failure(status, ct, IsJSON(ct), body)
	}
	a := Answer{Status: status, Headers: make(map[string]string, len(header))}
	for k, v := range header {
		if len(v) > 0 { // an http.Header may hold a key with no values
			a.Headers[k] = v[0]
		}
	}
	a.Body = decodeBody(body)
	// A mapping is for a url target, which may not answer a card: neither
	// the answer nor what the mapping makes of it may be shaped like one.
	if isCardMap(a.Body) {
		return Failure("the target answered an action-required card: %v", ErrCardNotFromApp)
	}
	out, err := m.run(a)
	if err != nil {
		return Failure("the result mapping failed: %v", err)
	}
	switch v := out.(type) {
	case string:
		return Result{Content: v}
	case map[string]any:
		if isCardMap(v) {
			return Failure("the result mapping gave an action-required card: %v", ErrCardNotFromApp)
		}
		return fromMap(v)
	}
	return Failure("the result mapping gave %T: want a string or a map with a string \"content\"", out)
}

func fromMap(m map[string]any) Result {
	var r Result
	var ok bool
	if r.Content, ok = m["content"].(string); !ok {
		return Failure("the result mapping gave no string \"content\"")
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"markdown", &r.Markdown}, {"embedUrl", &r.EmbedURL}} {
		if v, present := m[f.key]; present && v != nil {
			if *f.dst, ok = v.(string); !ok {
				return Failure("the result mapping gave a %q that is not a string", f.key)
			}
		}
	}
	if r.EmbedURL != "" {
		if err := CheckEmbedURL(r.EmbedURL); err != nil {
			return Failure("the result mapping gave an invalid \"embedUrl\": %v", err)
		}
	}
	if v, present := m["isError"]; present {
		if r.IsError, ok = v.(bool); !ok {
			return Failure("the result mapping gave an \"isError\" that is not a bool")
		}
	}
	if !r.IsError {
		r.Card = cardOf(r)
	}
	return r
}

// decodeBody is what a mapping sees of a body: its JSON value as
// encoding/json decoded it (jsonread.UnmarshalAnyCase; numbers are
// float64), or its text when it is not JSON.
func decodeBody(body []byte) any {
	var v any
	if jsonread.UnmarshalAnyCase(body, &v) != nil {
		return string(body)
	}
	return v
}

// isCardMap reports whether a decoded JSON value is shaped like a card, as
// IsCard reads its text.
func isCardMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["type"] == CardType
}
