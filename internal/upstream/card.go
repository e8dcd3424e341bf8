package upstream

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/result"
)

// continuation is what a button of an input card holds: the call's
// arguments, the server's request state, and the answers to its input
// requests that pressing the button gives. The gateway keeps it in the
// card it records, and sends it back as it was.
type continuation struct {
	Arguments    jsontext.Value `json:"arguments"`
	RequestState string         `json:"requestState,omitempty"`
	// Elicit are the answers to elicitation requests, by request id.
	Elicit map[string]*sdk.ElicitResult `json:"elicit,omitempty"`
	// Roots are the ids of roots requests, each answered with none: the
	// gateway shares no files of its machine.
	Roots []string `json:"roots,omitempty"`
}

func (k *continuation) responses() sdk.InputResponseMap {
	m := sdk.InputResponseMap{}
	for id, r := range k.Elicit {
		m[id] = r
	}
	for _, id := range k.Roots {
		m[id] = &sdk.ListRootsResult{Roots: []*sdk.Root{}}
	}
	return m
}

// choice is one button of an input card: an answer to the elicitation.
type choice struct {
	id, label, variant string
	answer             *sdk.ElicitResult
}

// Bounds of what a card shows of a request.
const (
	maxTitle   = 120
	maxChoices = 12
)

// inputCard turns a server's input requests into an action-required card
// that a person answers: one elicitation (roots requests are answered
// with none). Each button holds the whole answer and continues the call;
// skip and cancel, which every card has, never reach the server.
func (s *Server) inputCard(tool string, args jsontext.Value, res *sdk.CallToolResult) dispatch.Outcome {
	k := continuation{Arguments: args, RequestState: res.RequestState}
	var elicitID string
	var elicit *sdk.ElicitParams
	ids := make([]string, 0, len(res.InputRequests))
	for id := range res.InputRequests {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		switch r := res.InputRequests[id].(type) {
		case *sdk.ElicitParams:
			if elicit != nil {
				return fail("mcp server %s asked for several answers at once; toolgate's cards answer one", s.cfg.Name)
			}
			elicitID, elicit = id, r
		case *sdk.ListRootsParams:
			k.Roots = append(k.Roots, id)
		default:
			return fail("mcp server %s asked for input that toolgate does not give (%T): only elicitation is answered, by a person", s.cfg.Name, r)
		}
	}
	if elicit == nil {
		if len(ids) == 0 {
			return fail("mcp server %s is busy (it asked for no input and answered nothing); try again later", s.cfg.Name)
		}
		// Only roots: answered at once, with none.
		return fail("mcp server %s asked for the client's roots; toolgate shares none", s.cfg.Name)
	}
	choices, note := choicesOf(elicit)
	// The card's description is markdown; the server's message is text,
	// shown as it is written.
	desc := mdEscape(elicit.Message)
	if elicit.Mode == "url" && elicit.URL != "" {
		desc += "\n\nOpen " + link(elicit.URL, elicit.URL) + " to do this step, then press Done."
	}
	if note != "" {
		desc += "\n\n" + mdEscape(note)
	}
	desc = strings.TrimSpace(desc + fmt.Sprintf("\n\n(Asked by MCP server %s, tool %s.)", mdEscape(s.cfg.Name), mdEscape(tool)))
	target, _ := json.Marshal(dispatch.Spec{Type: dispatch.TypeMCP, Server: s.cfg.Name, Tool: tool, Continue: true})
	card := result.Card{Type: result.CardType, Title: title(elicit.Message, s.cfg.Name), Description: desc}
	for _, c := range choices {
		k.Elicit = map[string]*sdk.ElicitResult{elicitID: c.answer}
		input, err := json.Marshal(k, jsonread.Legacy)
		if err != nil {
			return fail("mcp server %s: its input request cannot be kept: %v", s.cfg.Name, err)
		}
		card.Elements = append(card.Elements, result.Element{Type: "button", ID: c.id, Label: c.label, Variant: c.variant, Input: input, Target: target})
	}
	raw, err := json.Marshal(card, jsonread.Legacy)
	if err != nil {
		return fail("mcp server %s: its input request cannot be kept: %v", s.cfg.Name, err)
	}
	return dispatch.Outcome{Card: raw, Result: result.Failure("mcp server %s asked for input (%s)", s.cfg.Name, card.Title), Upstream: 200}
}

// title is a card's title: the message's first line, cut.
func title(msg, server string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	if line == "" {
		return "MCP server " + server + " asks for input"
	}
	if utf8.RuneCountInString(line) > maxTitle {
		r := []rune(line)
		line = string(r[:maxTitle-1]) + "…"
	}
	return line
}

// choicesOf are the buttons that answer an elicitation, and a note for
// the card when a button cannot give what it asks: a card has buttons
// only. A form with no fields is accepted or declined; one field of a
// few values (an enum, oneOf consts, a boolean) is a button per value;
// fields that all have defaults are accepted with them; any other form
// can only be declined here.
func choicesOf(p *sdk.ElicitParams) ([]choice, string) {
	decline := choice{id: "decline", label: "Decline", answer: &sdk.ElicitResult{Action: "decline"}}
	if p.Mode == "url" {
		return []choice{{id: "done", label: "Done", variant: "primary", answer: &sdk.ElicitResult{Action: "accept"}}, decline}, ""
	}
	schema, _ := p.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return []choice{{id: "accept", label: "Accept", variant: "primary", answer: &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}}, decline}, ""
	}
	if len(props) == 1 {
		for name, raw := range props {
			prop, _ := raw.(map[string]any)
			if cs := valueChoices(name, prop); len(cs) > 0 {
				return append(cs, decline), ""
			}
		}
	}
	content := map[string]any{}
	var missing []string
	for name, raw := range props {
		prop, _ := raw.(map[string]any)
		if d, ok := prop["default"]; ok {
			content[name] = d
		} else if isRequired(schema, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return []choice{{id: "accept", label: "Accept", variant: "primary", answer: &sdk.ElicitResult{Action: "accept", Content: content}}, decline}, ""
	}
	sort.Strings(missing)
	return []choice{decline}, "This step asks for " + strings.Join(missing, ", ") + ", which this card cannot take: answer it in an MCP client that shows forms, or decline."
}

// valueChoices are the buttons of a field of a few values.
func valueChoices(name string, prop map[string]any) []choice {
	var out []choice
	add := func(v any, label string) {
		out = append(out, choice{id: fmt.Sprintf("choice-%d", len(out)), label: label,
			answer: &sdk.ElicitResult{Action: "accept", Content: map[string]any{name: v}}})
	}
	switch {
	case prop["type"] == "boolean":
		add(true, "Yes")
		add(false, "No")
	case prop["enum"] != nil:
		values, _ := prop["enum"].([]any)
		names, _ := prop["enumNames"].([]any)
		for i, v := range values {
			label := fmt.Sprint(v)
			if i < len(names) {
				if n, ok := names[i].(string); ok && n != "" {
					label = n
				}
			}
			add(v, label)
		}
	case prop["oneOf"] != nil:
		options, _ := prop["oneOf"].([]any)
		for _, o := range options {
			opt, _ := o.(map[string]any)
			v, ok := opt["const"]
			if !ok {
				return nil
			}
			label, _ := opt["title"].(string)
			if label == "" {
				label = fmt.Sprint(v)
			}
			add(v, label)
		}
	}
	if len(out) > maxChoices {
		return nil
	}
	return out
}

func isRequired(schema map[string]any, name string) bool {
	req, _ := schema["required"].([]any)
	for _, r := range req {
		if r == name {
			return true
		}
	}
	return false
}
