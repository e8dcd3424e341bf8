// Package apptools is the component side of the toolgate contract: it
// verifies the identity token toolgate signs for each app call, reads the
// call's Kazzle-Tool-Context, and writes answers in the shapes toolgate
// normalizes (docs/http-api.md, "What a component receives"; docs/kits.md).
//
// A component wraps each endpoint that toolgate calls through an app target
// in a Verifier's Middleware and reads the verified user with FromContext.
// Endpoints that toolgate does not call with a token, such as a url
// target's or a page the browser loads in a card's iframe, stay unwrapped.
//
// WriteCard pauses a thread call on an action-required card until a person
// answers it (docs/http-api.md, "Cards: pause and resume").
package apptools

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
)

// ContextHeader is the request header toolgate sends a call's context in.
const ContextHeader = "Kazzle-Tool-Context"

// The sources a call may come from.
const (
	// SourceThread is a call made in a conversation.
	SourceThread = "thread"
	// SourceAPI is a call made through the Tools API, outside a conversation.
	SourceAPI = "api"
)

var (
	// ErrNoContext is returned by ToolContext when the request carries no
	// Kazzle-Tool-Context header: it did not come through an app target.
	ErrNoContext = errors.New("no Kazzle-Tool-Context header")
	// ErrBadContext is wrapped by the error ToolContext returns when the
	// header is present but is not one toolgate would send.
	ErrBadContext = errors.New("malformed Kazzle-Tool-Context header")
)

// IdempotencyHeader is the request header toolgate sends each app call's
// idempotency key in.
const IdempotencyHeader = "Idempotency-Key"

// IdempotencyKey is the key toolgate sends in IdempotencyHeader: the
// unpadded base64url of SHA-256 over the user, the installation and the
// call id, each preceded by its length in bytes as a 4-byte big-endian
// integer. It is the same for every delivery of one call (a repeat that
// toolgate could not tell was answered, a card's resume) and differs
// across users and installations even where their runtimes chose the same
// call id, so idempotency middleware keyed on it never replays one user's
// answer to another. A card button's call id is the call's id, "/" and
// the button's id.
func IdempotencyKey(user, install, callID string) string {
	return dispatch.IdempotencyKey(user, install, callID)
}

// Context is where a tool call came from.
type Context struct {
	// Source is SourceThread or SourceAPI.
	Source string `json:"source"`
	// ThreadID names the conversation; set exactly when Source is
	// SourceThread.
	ThreadID string `json:"threadId,omitempty"`
	// Approval is set when a person approved the call before toolgate
	// sent it (an approval rule: docs/governance.md).
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is how a call was approved.
type Approval struct {
	// By is the user who approved; Device the device they approved on,
	// empty when none was named.
	By     string `json:"by"`
	Device string `json:"device,omitempty"`
	// At is when.
	At time.Time `json:"at"`
	// Changed says whether the person changed the input: the handler is
	// sent the input as approved, which may differ from the model's.
	Changed bool `json:"changed"`
}

// IsThread reports whether the call came from a conversation, the only
// context in which a handler may pause the call to ask the user.
func (c Context) IsThread() bool { return c.Source == SourceThread }

// ToolContext reads the request's Kazzle-Tool-Context header. It is strict:
// the header must be sent once and hold exactly one JSON object with a
// string "source" of "thread" (with a non-empty "threadId") or "api" (with
// no "threadId"), and, on a thread call a person approved, "approval"
// (readApproval's rules), and nothing else. An absent header is ErrNoContext; any
// other failure wraps ErrBadContext.
func ToolContext(r *http.Request) (Context, error) {
	vals := r.Header.Values(ContextHeader)
	switch len(vals) {
	case 0:
		return Context{}, ErrNoContext
	case 1:
	default:
		return Context{}, fmt.Errorf("%w: sent %d times", ErrBadContext, len(vals))
	}
	c, err := parseContext(vals[0])
	if err != nil {
		return Context{}, fmt.Errorf("%w: %v", ErrBadContext, err)
	}
	return c, nil
}

// IsThread reports whether the request's call came from a conversation;
// false when the header is absent or malformed.
func IsThread(r *http.Request) bool {
	c, err := ToolContext(r)
	return err == nil && c.IsThread()
}

// parseContext reads the header token by token rather than into a struct,
// which could take the last of duplicate keys and accept null for a
// string. The decoder lets a repeated key through (jsonread.Lenient), for
// this function's own error to name it.
func parseContext(s string) (Context, error) {
	dec := jsontext.NewDecoder(strings.NewReader(s), jsonread.Lenient)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return Context{}, errors.New("not a JSON object")
	}
	var c Context
	seen := map[string]bool{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return Context{}, err
		}
		key := tok.String() // the decoder allows only strings as keys
		if seen[key] {
			return Context{}, fmt.Errorf("%q is given twice", key)
		}
		seen[key] = true
		if key == "approval" {
			if c.Approval, err = readApproval(dec); err != nil {
				return Context{}, fmt.Errorf("approval: %v", err)
			}
			continue
		}
		tok, err = dec.ReadToken()
		if err != nil {
			return Context{}, err
		}
		val, ok := tok.String(), tok.Kind() == '"'
		switch {
		case key != "source" && key != "threadId":
			return Context{}, fmt.Errorf("unknown field %q", key)
		case !ok:
			return Context{}, fmt.Errorf("%s must be a string", key)
		case key == "source":
			c.Source = val
		default:
			c.ThreadID = val
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return Context{}, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Context{}, errors.New("data after the object")
	}
	switch c.Source {
	case SourceThread:
		if c.ThreadID == "" {
			return Context{}, errors.New(`a "thread" context needs a threadId`)
		}
	case SourceAPI:
		if seen["threadId"] {
			return Context{}, errors.New(`an "api" context has no threadId`)
		}
		if c.Approval != nil {
			return Context{}, errors.New(`an "api" context has no approval: a person approves in a thread`)
		}
	default:
		if !seen["source"] {
			return Context{}, errors.New("source is missing")
		}
		return Context{}, fmt.Errorf(`source %q is neither "thread" nor "api"`, c.Source)
	}
	return c, nil
}

// readApproval reads the approval member's object as strictly as the
// context: by (a non-empty string), device (a string, optional), at (an
// RFC 3339 time) and changed (a boolean), each once, nothing else.
func readApproval(dec *jsontext.Decoder) (*Approval, error) {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("not a JSON object")
	}
	var a Approval
	seen := map[string]bool{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		key := tok.String()
		if seen[key] {
			return nil, fmt.Errorf("%q is given twice", key)
		}
		seen[key] = true
		if tok, err = dec.ReadToken(); err != nil {
			return nil, err
		}
		switch key {
		case "by", "device", "at":
			if tok.Kind() != '"' {
				return nil, fmt.Errorf("%s must be a string", key)
			}
		case "changed":
			if k := tok.Kind(); k != 't' && k != 'f' {
				return nil, errors.New("changed must be a boolean")
			}
		default:
			return nil, fmt.Errorf("unknown field %q", key)
		}
		switch key {
		case "by":
			a.By = tok.String()
		case "device":
			a.Device = tok.String()
		case "at":
			if a.At, err = time.Parse(time.RFC3339Nano, tok.String()); err != nil {
				return nil, fmt.Errorf("at is not an RFC 3339 time: %q", tok.String())
			}
		case "changed":
			a.Changed = tok.Bool()
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	for _, k := range []string{"by", "at", "changed"} {
		if !seen[k] {
			return nil, fmt.Errorf("%s is missing", k)
		}
	}
	if a.By == "" {
		return nil, errors.New("by is empty")
	}
	return &a, nil
}

// Identity is the user a call acts for, as a verified token names them.
type Identity struct {
	// User is the token's sub.
	User string
	// Install is the installation of the app the call is made in; empty
	// when the token names none.
	Install string
	// Component is this component's name in toolgate's configuration: the
	// token's audience, as the Verifier checked it.
	Component string
	// Claims are all of the token's claims.
	Claims map[string]any
}
