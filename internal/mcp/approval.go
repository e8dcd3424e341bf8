package mcp

import (
	"context"
	"errors"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/result"
)

// approvalFields are the properties an input request offers for
// approving with changes: the tool's input fields, each filled in with
// the value the card will send, when every one is a field a form can hold
// (a string, a number, an integer or a boolean, or an enum of strings).
// Otherwise none: a form of some fields would hide the rest, and the MCP
// Apps view or the Tools API change those. A property named "button" is
// the card's own, so such a schema offers none either.
func approvalFields(a *result.CardApproval) map[string]any {
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if json.Unmarshal(a.Schema, &schema, jsonread.Lenient) != nil || len(schema.Properties) == 0 {
		return nil
	}
	var input map[string]any
	if json.Unmarshal(a.Input, &input, jsonread.Lenient) != nil {
		return nil
	}
	out := make(map[string]any, len(schema.Properties))
	for name, p := range schema.Properties {
		if name == "button" {
			return nil
		}
		field, ok := formField(p)
		if !ok {
			return nil
		}
		if v, ok := input[name]; ok && fits(field["type"], v) {
			field["default"] = v
		}
		out[name] = field
	}
	return out
}

// formField is a schema property as an input request's form may hold it,
// or false.
func formField(p map[string]any) (map[string]any, bool) {
	typ, _ := p["type"].(string)
	switch typ {
	case "string", "number", "integer", "boolean":
	default:
		return nil, false
	}
	field := map[string]any{"type": typ}
	for _, k := range []string{"title", "description", "minimum", "maximum", "minLength", "maxLength"} {
		if v, ok := p[k]; ok {
			field[k] = v
		}
	}
	if e, ok := p["enum"].([]any); ok {
		if typ != "string" {
			return nil, false
		}
		for _, v := range e {
			if _, ok := v.(string); !ok {
				return nil, false
			}
		}
		field["enum"] = e
	}
	return field, true
}

// fits reports whether v is a value of the form field type typ.
func fits(typ any, v any) bool {
	switch v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64:
		return typ == "number" || typ == "integer"
	}
	return false
}

// changedInput is the input an approval is approved with when an input
// response changed its fields: the card's input with those fields
// replaced. Only the card's own fields may change.
func (s *Server) changedInput(ctx context.Context, c Caller, callID string, changes map[string]any) (jsontext.Value, error) {
	ans, err := s.gw.Status(ctx, c.Identity, callID)
	if err != nil {
		msg, _ := gateway.Told(err)
		return nil, errors.New(msg)
	}
	if ans.Status != gateway.StatusActionRequired {
		return nil, nil // answered already: the gateway says how
	}
	card, err := result.ParseCard(ans.Card)
	if err != nil || card.Approval == nil {
		return nil, errors.New("only an approval card takes changes")
	}
	fields := approvalFields(card.Approval)
	var input map[string]any
	if err := json.Unmarshal(card.Approval.Input, &input, jsonread.Lenient); err != nil {
		return nil, err
	}
	for k, v := range changes {
		if _, ok := fields[k]; !ok {
			return nil, errors.New("the answer changes " + k + ", which the card did not offer")
		}
		input[k] = v
	}
	return json.Marshal(input)
}
