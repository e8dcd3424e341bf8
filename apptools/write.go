package apptools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
)

// Result is a tool result in the channels toolgate keeps (docs/http-api.md,
// "Answers and errors").
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
	// The body is read by toolgate, not rendered as HTML: <, > and & stay
	// as they are rather than \u003c (json escapes none of them).
	var buf bytes.Buffer
	if err := json.MarshalWrite(&buf, v); err != nil {
		return err
	}
	buf.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// Card is an action-required card (docs/http-api.md, "Cards: pause and
// resume"): the call pauses until a
// person presses one of its buttons, skips or cancels.
type Card = result.Card

// Button is one of a card's buttons: "type" is "button". Without a Target,
// its Input becomes the tool result when pressed; with one, toolgate runs
// the target (a target spec as in a manifest, with ${input} the Input). A
// button's target is an app target on the component that answers the card,
// with ${input…} references only (never ${env…}) and no result mapping.
type Button = result.Element

// Assignee names the device that must press a card's buttons.
type Assignee = result.Assignee

// ErrNotThread is returned by WriteCard for a call that does not come from
// a conversation: a card needs a person to answer it, so the handler must
// answer a domain error instead.
var ErrNotThread = errors.New("apptools: a card needs a thread call; answer a domain error instead")

// WriteCard answers r with an action-required card. It writes nothing and
// returns ErrNotThread when r is not a thread call, and an error naming the
// broken rule when the card is not valid (a title, buttons with unique ids
// and labels, button targets as Button says): toolgate would turn such a
// card into an error result. When r came through a Verifier's Middleware,
// a button's target must name the component the Verifier is for.
func WriteCard(w http.ResponseWriter, r *http.Request, c Card) error {
	if !IsThread(r) {
		return ErrNotThread
	}
	c.Type = result.CardType
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := result.ParseCard(body); err != nil {
		return fmt.Errorf("apptools: %w", err)
	}
	var owner string
	if id, ok := FromContext(r.Context()); ok {
		owner = id.Component
	}
	for _, b := range c.Elements {
		if len(b.Target) == 0 {
			continue
		}
		if err := dispatch.CheckButton(b.Target, owner); err != nil {
			return fmt.Errorf("apptools: invalid card: button %q: %w", b.ID, err)
		}
	}
	return writeJSON(w, http.StatusOK, c)
}
