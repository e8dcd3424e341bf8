package result

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Card is an action-required card: a handler pauses the call until a
// person (or a device) presses one of its buttons.
type Card struct {
	Type        string    `json:"type"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Assignee    *Assignee `json:"assignee,omitzero"`
	// Approval is set on the gateway's own approval card only: what it
	// asks a person to approve. A handler's card never carries it.
	Approval *CardApproval `json:"approval,omitzero"`
	// Connection is set on the gateway's own connect card only: the
	// connection the call needs, which the button's url makes.
	Connection *CardConnection `json:"connection,omitzero"`
	Elements   []Element       `json:"elements"`
}

// CardConnection is what a connect card asks the user to make: the
// connection's name and title, and when its button's authorization URL
// stops working (pressing the connect button then gives a new one).
type CardConnection struct {
	Name    string    `json:"name"`
	Title   string    `json:"title"`
	Expires time.Time `json:"expires"`
}

// ButtonConnect is the connect card's button: its url opens the
// service's authorization page; pressed (resumed) it runs the call again,
// with the connection made, or answers a new card with a new url.
const ButtonConnect = "connect"

// CardApproval is what an approval card asks about: the call's tool and
// input, the tool's input schema (for approving with changes), and when
// the question lapses.
type CardApproval struct {
	Tool    string         `json:"tool"`
	Input   jsontext.Value `json:"input"`
	Schema  jsontext.Value `json:"schema"`
	Expires time.Time      `json:"expires"`
}

// Approval card buttons: approving (with the changed input in the resume,
// for approving with changes) and rejecting.
const (
	ButtonApprove = "approve"
	ButtonReject  = "reject"
)

// Assignee names the device that must act.
type Assignee struct {
	ComputerID string `json:"computerId"`
}

// Element is a card element; buttons are the only kind.
type Element struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Label   string         `json:"label"`
	Variant string         `json:"variant,omitempty"`
	Input   jsontext.Value `json:"input,omitempty"`
	// Target is a target spec, checked by the caller like a tool's.
	Target jsontext.Value `json:"target,omitempty"`
	// URL makes the button a link, which a card opens in a new window:
	// on the gateway's own connect card only.
	URL string `json:"url,omitempty"`
}

// CardType is the "type" of an action-required answer.
const CardType = "action_required"

// ErrCardNotFromApp is why a card answered by anything but an app
// component's handler is refused: a url target is someone else's
// API, and a client tool's result comes from the user's browser.
var ErrCardNotFromApp = errors.New("only app components may answer action-required cards")

// IsCard reports whether body is shaped like an action-required card: a
// JSON object whose "type" is "action_required", by the same reading as
// NormalizeOrCard's.
func IsCard(body []byte) bool {
	_, card := fromJSON(body)
	return card
}

// ParseCard decodes and checks a card: a title, at least one button, each
// with a unique id and a label. Button targets are left to the caller.
func ParseCard(body []byte) (*Card, error) {
	var c Card
	// As encoding/json read it (jsonread.UnmarshalAnyCase), unknown members
	// refused, and anything after the card too.
	if err := jsonread.UnmarshalAnyCase(body, &c, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("invalid card: %v", err)
	}
	if c.Type != CardType {
		return nil, fmt.Errorf("invalid card: type %q, want %q", c.Type, CardType)
	}
	if c.Title == "" {
		return nil, errors.New("invalid card: title is required")
	}
	if len(c.Elements) == 0 {
		return nil, errors.New("invalid card: at least one button is required")
	}
	if c.Assignee != nil && c.Assignee.ComputerID == "" {
		return nil, errors.New("invalid card: assignee needs a computerId")
	}
	seen := map[string]bool{}
	for i, e := range c.Elements {
		switch {
		case e.Type != "button":
			return nil, fmt.Errorf("invalid card: elements[%d]: type %q, want \"button\"", i, e.Type)
		case e.ID == "":
			return nil, fmt.Errorf("invalid card: elements[%d]: id is required", i)
		case seen[e.ID]:
			return nil, fmt.Errorf("invalid card: button id %q is used twice", e.ID)
		case e.Label == "":
			return nil, fmt.Errorf("invalid card: button %q: label is required", e.ID)
		}
		seen[e.ID] = true
	}
	return &c, nil
}

// Button returns the button with the given id.
func (c *Card) Button(id string) (*Element, bool) {
	for i := range c.Elements {
		if c.Elements[i].ID == id {
			return &c.Elements[i], true
		}
	}
	return nil, false
}

// FromButtonInput turns a pressed button's input (with no target) into the
// tool result: an object with a string content is normalized like a
// handler's JSON answer, anything else becomes its compact JSON text.
func FromButtonInput(input jsontext.Value) Result {
	if len(bytes.TrimSpace(input)) == 0 {
		return Result{}
	}
	var obj map[string]jsontext.Value
	if json.Unmarshal(input, &obj, jsonread.Lenient) == nil {
		if _, ok := obj["content"]; ok {
			r, _ := fromJSON(input)
			return r
		}
	}
	// Compact works in place: input is the recorded card's.
	text := jsontext.Value(bytes.Clone(input))
	if err := text.Compact(); err != nil {
		return Failure("the button's input is not valid JSON: %v", err)
	}
	return Result{Content: string(text)}
}
