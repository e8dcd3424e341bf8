package dispatch

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/refs"
	"github.com/toolgate/toolgate/internal/result"
)

// CompileButton compiles the target of a card's button (docs/http-api.md,
// "Cards: pause and resume"). owner is
// the component whose handler answered the card.
//
// A card is written by a component at run time, not by the gateway's
// author, and the gateway that runs its buttons holds every component's env
// and reaches every address this machine reaches (its own admin API too).
// So a button reaches no further than the component that wrote it: an app
// target on owner, with ${input…} references only and no result mapping.
func CompileButton(raw jsontext.Value, owner *Component) (*Target, error) {
	s, err := decodeButton(raw)
	if err != nil {
		return nil, err
	}
	return compileButton(s, owner)
}

// CompileCardButton compiles a card's button for the target whose call
// answered the card: an app target's buttons run by CompileButton's rules
// on its component, an mcp target's only continue its own call on its
// server and tool. A target of any other kind answers no card.
func CompileCardButton(raw jsontext.Value, owner *Target) (*Target, error) {
	if owner == nil || !owner.kind.AnswersCards() {
		return nil, result.ErrCardNotFromApp
	}
	if owner.kind.Name() != TypeMCP {
		return CompileButton(raw, owner.Component)
	}
	s, err := decodeButton(raw)
	if err != nil {
		return nil, err
	}
	return compileMCPButton(s, owner)
}

// CheckButton checks a button's target by the rules of CompileButton, for
// a component that checks its card before answering it and does not know
// the base URL the gateway has for it. owner is the component's name as
// the gateway knows it; empty, the target may name any component.
func CheckButton(raw jsontext.Value, owner string) error {
	s, err := decodeButton(raw)
	if err != nil {
		return err
	}
	if owner == "" {
		owner = s.Component
	}
	// A stand-in owner whose base URL is never sent to: it only lets the
	// path be checked as the gateway will.
	_, err = compileButton(s, &Component{Name: owner, BaseURL: &url.URL{Scheme: "http", Host: "component.invalid"}})
	return err
}

func decodeButton(raw jsontext.Value) (Spec, error) {
	var s Spec
	// Read as encoding/json read it, unknown members refused.
	err := jsonread.UnmarshalAnyCase(raw, &s, json.RejectUnknownMembers(true))
	if errors.Is(err, jsonread.ErrTrailing) {
		return Spec{}, errors.New("target: data after the object")
	}
	if err != nil {
		return Spec{}, fmt.Errorf("target: %v", err)
	}
	return s, nil
}

func compileButton(s Spec, owner *Component) (*Target, error) {
	if owner == nil {
		return nil, result.ErrCardNotFromApp
	}
	// A card comes from a kind that answers cards, and its buttons run
	// that kind's targets on the component that answered it.
	k, ok := KindOf(s.Type)
	switch {
	case !ok || !k.AnswersCards():
		return nil, fmt.Errorf("target: a button runs an app target on component %q, the one that answered the card; not a %q target", owner.Name, s.Type)
	case s.Result != "":
		return nil, errors.New("target: a button has no result mapping; its component answers the channels itself")
	case s.Component != owner.Name:
		return nil, fmt.Errorf("target: component %q: a button runs on component %q, the one that answered the card", s.Component, owner.Name)
	}
	// Compiled against the owner without its env: a button never reads it,
	// so no check on the way can look at (or name) a secret value.
	bare := &Component{Name: owner.Name, BaseURL: owner.BaseURL, Socket: owner.Socket}
	t, err := compile(s, Env{Components: map[string]*Component{owner.Name: bare}})
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	for _, r := range t.Refs() {
		if r.Root != refs.RootInput {
			return nil, fmt.Errorf("target: %s: a button may reference ${input…} only, never env or a connection", r)
		}
	}
	t.Component = owner
	return t, nil
}
