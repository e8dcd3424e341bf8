package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/result"
)

// SurfaceCallback is where a connection's callback resumed a call from:
// the service sending the user's browser back.
const SurfaceCallback = "callback"

// tokens fetches the calling user's access tokens of the connections a
// target sends. A connection not made answers an Outcome naming it, and
// ok false: nothing is sent.
func (g *Gateway) tokens(ctx context.Context, names []string, call Call) (map[string]string, dispatch.Outcome, bool) {
	if len(names) == 0 {
		return nil, dispatch.Outcome{}, true
	}
	if g.conns == nil {
		return nil, dispatch.Outcome{Result: result.Failure("connection %s is not declared in this gateway's config: nothing was sent", names[0])}, false
	}
	who := connect.Who{User: call.Identity.User, Install: call.Identity.Install}
	out := make(map[string]string, len(names))
	for _, name := range names {
		tok, err := g.conns.Token(ctx, name, who)
		if nc := (*connect.NotConnectedError)(nil); errors.As(err, &nc) {
			msg := fmt.Sprintf("tool %s acts on the user's %s account (connection %s), which is not connected", call.Tool, nc.Title, name)
			if nc.Reason != "" {
				msg = fmt.Sprintf("tool %s acts on the user's %s account (connection %s), which must be connected again: %s", call.Tool, nc.Title, name, nc.Reason)
			}
			return nil, dispatch.Outcome{Result: result.Failure("%s. Call it in a conversation (a thread) to get the card that connects it; nothing was sent", msg), Connect: name}, false
		}
		if err != nil {
			// The Manager's own refusals (no user) and the store's.
			g.logger.Warn("a connection's token is not at hand", zap.String("connection", name), zap.String("tool", call.Tool), zap.Error(err))
			return nil, dispatch.Outcome{Result: result.Failure("the user's token of connection %s is not at hand (%v): nothing was sent", name, err)}, false
		}
		out[name] = tok
	}
	return out, dispatch.Outcome{}, true
}

// connectCard answers a call that needs a connection the user has not
// made: in a conversation, with the gateway's card whose button opens the
// service's authorization page (the callback then resumes the call);
// elsewhere, with out's error result, which names the connection.
func (g *Gateway) connectCard(ctx context.Context, call Call, out dispatch.Outcome) outcome {
	fail := outcome{res: out.Result}
	if call.Origin.Source != SourceThread || !g.ledger.Records() {
		return fail
	}
	c, ok := g.conns.Lookup(out.Connect)
	if !ok || c.Exchanges() {
		return fail
	}
	who := connect.Who{User: call.Identity.User, Install: call.Identity.Install}
	redirect := ""
	if call.BaseURL != "" {
		redirect = strings.TrimSuffix(call.BaseURL, "/") + "/connections/" + c.Name + "/callback"
	}
	authURL, expires, err := g.conns.Begin(ctx, c.Name, who, call.CallID, redirect)
	if err != nil {
		g.logger.Warn("starting a connection's authorization", zap.String("connection", c.Name), zap.Error(err))
		return outcome{res: result.Failure("tool %s needs the user's %s account (connection %s), and its authorization could not be started: %v; nothing was sent", call.Tool, c.Title, c.Name, err)}
	}
	card := result.Card{
		Type: result.CardType, Title: "Connect " + c.Title,
		Description: fmt.Sprintf("%s acts on your %s account. Connect it, and the call goes on by itself.", call.Tool, c.Title),
		Connection:  &result.CardConnection{Name: c.Name, Title: c.Title, Expires: expires},
		Elements: []result.Element{
			{Type: "button", ID: result.ButtonConnect, Label: "Connect " + c.Title, Variant: "primary", URL: authURL},
		},
	}
	raw, err := json.Marshal(&card, jsonread.Legacy)
	if err != nil {
		// A card of the gateway's own making always encodes.
		panic("gateway: encoding a connect card: " + err.Error())
	}
	g.obs.Connection(c.Name, observe.ConnectionAsked)
	return outcome{card: raw, connect: &ledger.Connect{Name: c.Name, Input: compactInput(call.Input)}, upstream: out.Upstream}
}

// pendingConnect reports whether c waits on the gateway's connect card.
func pendingConnect(c *ledger.Call) bool {
	return c.State == ledger.ActionRequired && c.Connect != nil
}

// connectAnswer answers a connect card, claimed already: skip and cancel
// send nothing; the connect button (pressed, or the callback once the
// connection is made) runs the call with its recorded input, which
// answers a new card if the connection is still not made.
func (g *Gateway) connectAnswer(ctx context.Context, c *ledger.Call, req ResumeRequest) outcome {
	name := c.Connect.Name
	switch {
	case req.denied != nil:
		return outcome{res: result.Failure("The user did not connect %s (%v); nothing was sent.", name, req.denied)}
	case req.Action == ActionSkip:
		return outcome{res: result.Result{Content: fmt.Sprintf("The user skipped connecting %s; nothing was sent.", name)}}
	case req.Action == ActionCancel:
		return outcome{res: result.Failure("The user cancelled connecting %s; nothing was sent.", name)}
	}
	tool, ok := g.Tools().Lookup(c.Tool)
	if !ok {
		return outcome{res: result.Failure("tool %q is no longer served: nothing was sent", c.Tool)}
	}
	decoded, err := decodeInput(c.Connect.Input)
	call := Call{
		Tool: c.Tool, CallID: c.CallID, Input: c.Connect.Input, Surface: req.Surface,
		Origin:   Origin{Source: c.Source, ThreadID: c.ThreadID},
		Identity: Identity{User: c.User, Install: c.Install},
		BaseURL:  req.BaseURL,
	}
	if c.Approval != nil && c.Approval.Decision != "" {
		a := c.Approval
		call.approval = &ApprovalInfo{By: a.By, Device: a.Device, At: a.At, Changed: a.Changed != nil}
	}
	return g.rerun(ctx, tool, call, decoded, err)
}

// ConnectionDone is what a connection's callback did: the connection it
// made (or not, and why), and the call it resumed, if one waited.
type ConnectionDone struct {
	Connection string
	Title      string
	// Err says why the connection was not made; nil when it was.
	Err error
	// Call is the resumed call's answer; nil when none waited on it.
	Call *Answer
}

// ErrBadState is a connection callback refused for its state: unknown,
// used, expired, or another connection's. Nothing was stored or resumed.
var ErrBadState = connect.ErrBadState

// CompleteConnection ends an authorization on connection name's
// callback: its state spent, its code exchanged and the token stored for
// the user the state was made for; then the call that waited on it runs
// once, with the token. errCode is the service's error parameter (the
// user denied access), which ends the waiting call without sending it. A
// bad state is ErrBadState. baseURL is the gateway's own URL as the
// browser reached it.
func (g *Gateway) CompleteConnection(ctx context.Context, name, state, code, errCode, baseURL string) (*ConnectionDone, error) {
	c, ok := g.conns.Lookup(name)
	if !ok {
		return nil, ErrBadState
	}
	// The state is spent and the code exchanged whether or not the
	// browser waits for the page: what they give is kept.
	ctx = context.WithoutCancel(ctx)
	flow, err := g.conns.Complete(ctx, name, state, code, errCode)
	if flow == nil {
		if errors.Is(err, connect.ErrBadState) {
			return nil, ErrBadState
		}
		return nil, g.unavailable(err)
	}
	done := &ConnectionDone{Connection: name, Title: c.Title, Err: err}
	var denied *connect.DeniedError
	switch {
	case errors.As(err, &denied):
		g.obs.Connection(name, observe.ConnectionDenied)
	case err != nil:
		g.obs.Connection(name, observe.ConnectionFailed)
	default:
		g.obs.Connection(name, observe.ConnectionMade)
	}
	if err != nil {
		g.logger.Info("a connection was not made", zap.String("connection", name), zap.String("user", flow.User), zap.String("install", flow.Install), zap.Error(err))
	} else {
		g.logger.Info("a connection was made", zap.String("connection", name), zap.String("user", flow.User), zap.String("install", flow.Install))
	}
	if flow.CallID == "" {
		return done, nil
	}
	req := ResumeRequest{
		CallID: flow.CallID, Identity: Identity{User: flow.User, Install: flow.Install},
		ButtonID: result.ButtonConnect, Surface: SurfaceCallback, BaseURL: baseURL,
	}
	if denied != nil {
		req.ButtonID, req.denied = "", denied
		req.Action = ActionCancel
	} else if err != nil {
		// The connection was not made (the exchange failed): the call
		// waits on; its card's button gives a new link.
		return done, nil
	}
	done.Call = g.resumeConnect(ctx, req, name)
	return done, nil
}

// resumeConnect resumes the call req names if it still waits on
// connection name's card, and returns its answer; nil when it does not
// wait on it (answered already, or waiting on another card), or cannot be
// resumed now.
func (g *Gateway) resumeConnect(ctx context.Context, req ResumeRequest, name string) *Answer {
	c, err := g.lookup(ctx, req.Identity, req.CallID)
	if err != nil || !pendingConnect(c) || c.Connect.Name != name {
		return nil
	}
	ans, err := g.Resume(ctx, req)
	if err != nil {
		g.logger.Info("a connection's call was not resumed", zap.String("connection", name), zap.String("call_id", req.CallID), zap.Error(err))
		return nil
	}
	return ans
}

// Connections lists the connections of the gateway and which of them
// who has made; never a token.
func (g *Gateway) Connections(ctx context.Context, who Identity) ([]connect.Status, error) {
	if err := checkConnectionsCaller(who); err != nil {
		return nil, err
	}
	if g.conns == nil {
		return []connect.Status{}, nil
	}
	list, err := g.conns.List(ctx, connect.Who{User: who.User, Install: who.Install})
	if err != nil {
		return nil, g.unavailable(err)
	}
	return list, nil
}

// Disconnect deletes who's token of connection name.
func (g *Gateway) Disconnect(ctx context.Context, who Identity, name string) error {
	if err := checkConnectionsCaller(who); err != nil {
		return err
	}
	if _, ok := g.conns.Lookup(name); !ok {
		return &RequestError{Code: "unknown_connection", Msg: fmt.Sprintf("no connection named %q", name), kind: ErrUnknownTool}
	}
	if err := g.conns.Disconnect(ctx, name, connect.Who{User: who.User, Install: who.Install}); err != nil {
		return g.unavailable(err)
	}
	g.obs.Connection(name, observe.ConnectionRemoved)
	g.logger.Info("a connection was removed", zap.String("connection", name), zap.String("user", who.User), zap.String("install", who.Install))
	return nil
}

// checkConnectionsCaller checks the identity whose connections are read
// or removed: it must name a user.
func checkConnectionsCaller(who Identity) error {
	if err := CheckIdentity(who); err != nil {
		return err
	}
	if who.User == "" {
		return badRequest("identity_required", "connections are a user's: identity.user is required")
	}
	return nil
}

// redacted stands where an answer repeated a user's token.
const redacted = "[connection token]"

// minRedacted is the shortest token looked for in answers: a shorter
// one would be found in text that merely holds its characters.
const minRedacted = 8

// redactBody replaces in an answer's body each token the request sent: a
// service that repeats the credential it was given (an error page that
// quotes the Authorization header) must not hand it to the model, the
// card, the ledger or the log.
func redactBody(body []byte, tokens map[string]string) []byte {
	for _, tok := range tokens {
		if len(tok) >= minRedacted && bytes.Contains(body, []byte(tok)) {
			body = bytes.ReplaceAll(body, []byte(tok), []byte(redacted))
		}
	}
	return body
}

// redactString is redactBody for text.
func redactString(s string, tokens map[string]string) string {
	for _, tok := range tokens {
		if len(tok) >= minRedacted && strings.Contains(s, tok) {
			s = strings.ReplaceAll(s, tok, redacted)
		}
	}
	return s
}

// redactHeader is redactBody for the answer's header values, which a
// result expression may read.
func redactHeader(h http.Header, tokens map[string]string) {
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = redactString(v, tokens)
		}
	}
}

// redactResult is redactBody for a result an upstream MCP server
// answered.
func redactResult(r result.Result, tokens map[string]string) result.Result {
	r.Content = redactString(r.Content, tokens)
	r.Markdown = redactString(r.Markdown, tokens)
	r.EmbedURL = redactString(r.EmbedURL, tokens)
	r.Structured = redactBody(r.Structured, tokens)
	return r
}
