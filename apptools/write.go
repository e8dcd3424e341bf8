package apptools

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// Result is a tool result in the channels toolgate keeps (SPEC.md §5).
type Result struct {
	// Content is the plain result the model reads. Required.
	Content string `json:"content"`
	// Markdown is a short rich summary shown on the tool card; raw HTML in
	// it is escaped and its links must be absolute.
	Markdown string `json:"markdown,omitempty"`
	// EmbedURL is the absolute http(s) URL of a page shown in the card's
	// iframe; it wins over Markdown on the card.
	EmbedURL string `json:"embedUrl,omitempty"`
}

// domainError is a failure the model reads and may act on; toolgate
// carries both fields into the tool result.
type domainError struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// WriteResult answers with r as JSON. status should be 2xx: any other is
// an error result whatever the body.
func WriteResult(w http.ResponseWriter, status int, r Result) error {
	return writeJSON(w, status, r)
}

// WriteText answers with text as the whole content, in plain text.
func WriteText(w http.ResponseWriter, status int, text string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, err := io.WriteString(w, text)
	return err
}

// WriteError answers with a domain error {"code": code, "error": message}.
// status should be 4xx or 5xx: a 2xx answer without content is a malformed
// result, not an error the model can read.
func WriteError(w http.ResponseWriter, status int, code, message string) error {
	return writeJSON(w, status, domainError{Code: code, Error: message})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The body is read by toolgate, not rendered as HTML: keep <, > and &
	// as they are rather than \u003c.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}
