package mcp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/web"
)

// MCP Apps (SEP-1865): a client that declares the extension shows an app
// tool's answers in the gateway's view, the resource web.MCPAppURI, and a
// person answers a card there; the view presses a button by calling
// manifest.CardAnswerTool through the host.

// AppsExtension is the MCP Apps extension's key in capabilities.extensions.
const AppsExtension = "io.modelcontextprotocol/ui"

// MetaState is the result _meta key that carries a card's continuation to
// the view. Hosts hand a result's _meta to the view, not to the model: the
// model cannot press a button it never sees the state of.
const MetaState = "toolgate/state"

// How a continuation may be used: an elicitation retry's requestState, or
// the view's card answer. A state opens only the way it was issued.
const (
	viaElicitation = "" // empty, as states were before the view: a rolling deploy keeps them
	viaView        = "view"
	// viaURL is a connect card asked as a URL elicitation: its accept
	// presses the connect button.
	viaURL = "url"
)

// isAppsClient reports whether a client declared the MCP Apps extension
// with the view's media type. Anything else, malformed included, is not.
func isAppsClient(caps *sdk.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	ext, ok := caps.Extensions[AppsExtension].(map[string]any)
	if !ok {
		return false
	}
	// Decoded from the wire, the list is []any; set in process (the SDK's
	// AddExtension in a test, or a stateless request's _meta), []string.
	switch types := ext["mimeTypes"].(type) {
	case []any:
		return slices.Contains(types, any(web.MCPAppMIMEType))
	case []string:
		return slices.Contains(types, web.MCPAppMIMEType)
	}
	return false
}

// uiMeta is the tool _meta that points an Apps host at the view: the
// current key and the older flat one some hosts still read.
func uiMeta() sdk.Meta {
	return sdk.Meta{"ui": map[string]any{"resourceUri": web.MCPAppURI}, "ui/resourceUri": web.MCPAppURI}
}

// cardAnswerTool is manifest.CardAnswerTool as listed to Apps clients:
// visible to the view only ("app"), never offered to the model.
func cardAnswerTool() *sdk.Tool {
	return &sdk.Tool{
		Name:        manifest.CardAnswerTool,
		Title:       "Answer a card",
		Description: "Answers an action-required card shown in toolgate's view: presses one of its buttons, or skips or cancels it. Only the view can call it: it needs the card's state, which the view holds.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"state":{"type":"string"},"button":{"type":"string"},"action":{"enum":["skip","cancel"]},"input":{"type":"object"}},"required":["state"],"additionalProperties":false}`),
		Meta:        sdk.Meta{"ui": map[string]any{"resourceUri": web.MCPAppURI, "visibility": []string{"app"}}},
	}
}

// viewContents is the view as resources/read answers it, built once: the
// page, and the CSP meta that lets it frame the components' pages.
func viewContents(tools []*manifest.Compiled, embedOrigins []string) *sdk.ResourceContents {
	return &sdk.ResourceContents{
		URI:      web.MCPAppURI,
		MIMEType: web.MCPAppMIMEType,
		Text:     string(web.MCPApp()),
		Meta: sdk.Meta{"ui": map[string]any{
			"csp": map[string]any{
				"frameDomains":    frameDomains(tools, embedOrigins),
				"connectDomains":  []string{},
				"resourceDomains": []string{},
			},
			"prefersBorder": true,
		}},
	}
}

// frameDomains are the origins of the components whose answers show in
// the view and the embed origins configured besides, sorted: an embed is a
// page of the app, and a host that applies the view's CSP frames only
// these. A component on a unix socket has no origin a browser could load.
func frameDomains(tools []*manifest.Compiled, embedOrigins []string) []string {
	out := []string{}
	for _, o := range embedOrigins {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	for _, t := range tools {
		c := t.Target.Component
		if !t.ShowsUI() || c == nil || c.Socket != "" {
			continue
		}
		origin := c.BaseURL.Scheme + "://" + strings.ToLower(c.BaseURL.Host)
		if !slices.Contains(out, origin) {
			out = append(out, origin)
		}
	}
	slices.Sort(out)
	return out
}

// readView answers resources/read of the view.
func (s *Server) readView(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	v := *s.view
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{&v}}, nil
}

// viewResult is a done answer for the view: the content for the model and
// the markdown as toolResult has them, no resource link (the view shows
// the embed), and the answer itself as GET /calls/{id} gives it, which is
// what <toolgate-card> renders.
func viewResult(ans *gateway.Answer) *sdk.CallToolResult {
	out := toolResult(ans.Result, false)
	out.StructuredContent = jsontext.Value(ans.AppendJSON(nil))
	return out
}

// viewCard is a card for the view to show: the model is told the call
// waits for a person, the view gets the card and, in _meta, the one-use
// state its buttons answer with.
func (s *Server) viewCard(ans *gateway.Answer, c Caller) (*sdk.CallToolResult, error) {
	raw, err := s.newState(ans.CallID, c, viaView)
	if err != nil {
		return s.failed(err), nil
	}
	title := "untitled"
	if card, err := result.ParseCard(ans.Card); err == nil {
		title = card.Title
	}
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: "Call " + ans.CallID + " waits for a person to answer the card " +
			strconv.Quote(title) + " shown with this result; its answer comes back in the view, not here."}},
		StructuredContent: jsontext.Value(ans.AppendJSON(nil)),
		Meta:              sdk.Meta{MetaState: raw},
	}, nil
}

// cardAnswerArgs are manifest.CardAnswerTool's arguments: a state and
// exactly one of a button id or skip / cancel.
type cardAnswerArgs struct {
	State  string `json:"state"`
	Button string `json:"button,omitempty"`
	Action string `json:"action,omitempty"`
	// Input is the changed input of an approval approved with changes.
	Input jsontext.Value `json:"input,omitempty"`
}

func parseCardAnswer(raw jsontext.Value) (cardAnswerArgs, error) {
	var a cardAnswerArgs
	// Read as encoding/json read it, unknown members refused.
	if err := jsonread.UnmarshalAnyCase(raw, &a, json.RejectUnknownMembers(true)); err != nil {
		return a, fmt.Errorf("the arguments are not {state, button | action}: %v", err)
	}
	switch {
	case a.State == "":
		return a, fmt.Errorf("state is required")
	case (a.Button == "") == (a.Action == ""):
		return a, fmt.Errorf(`give either "button" or "action" ("skip" or "cancel")`)
	case a.Action != "" && a.Action != gateway.ActionSkip && a.Action != gateway.ActionCancel:
		return a, fmt.Errorf("action %q is not skip or cancel", a.Action)
	case len(a.Input) > 0 && a.Input.Kind() != '{':
		return a, fmt.Errorf("input must be an object")
	}
	return a, nil
}

// answerCard serves manifest.CardAnswerTool: the view's button press,
// which continues the call as an elicitation answer does. Only Apps
// clients are offered it; to any other it is an unknown tool, as it is
// absent from their tools/list.
func (s *Server) answerCard(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.obs.MCPCall()
	p := req.Params
	if !isAppsClient(req.ClientCapabilities()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	c, err := s.caller(req.Extra, p.Meta)
	if err != nil {
		return nil, err
	}
	args, err := parseCardAnswer(jsontext.Value(p.Arguments))
	if err != nil {
		return errorResult("the card's answer was refused: " + err.Error()), nil
	}
	// The view's result shows in the view whatever the tool: the view asked.
	return s.continueCard(ctx, args.State, viaView, c, gateway.ResumeRequest{ButtonID: args.Button, Action: args.Action, Input: args.Input}, nil, true, nil)
}
