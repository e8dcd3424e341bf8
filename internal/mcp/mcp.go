// Package mcp serves the gateway's tools over the Model Context Protocol
// (Streamable HTTP) through the official Go SDK. Every tools/call goes
// through the gateway's one invoke path; cards become MCP input requests,
// or, for MCP Apps clients without form elicitation, cards shown in the
// gateway's view (apps.go).
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/web"
)

// Keys of _meta a client may set on tools/call.
const (
	MetaThreadID = "toolgate/threadId"
	MetaIdentity = "toolgate/identity"
	MetaCallID   = "toolgate/callId"
	MetaDevice   = "toolgate/device"
)

// Caller is a verified caller, carried in the SDK's token info.
type Caller struct {
	Identity gateway.Identity
	Claims   map[string]any
	Device   string
	// BaseURL is the gateway's own URL as the request reached it
	// (gateway.Call.BaseURL), from BaseURLHeader.
	BaseURL string
}

// BaseURLHeader carries the gateway's own URL as the request reached it
// from the HTTP front end to the tool handlers: the front end sets it on
// every request, over whatever a client sent.
const BaseURLHeader = "Toolgate-Base-Url"

// TokenInfo wraps a verified caller for auth.RequireBearerToken; its
// UserID binds an MCP session to the caller, and until, when the token
// stops being accepted, ends the session unless a later token of the
// same caller moves it.
func (c Caller) TokenInfo(until time.Time) *auth.TokenInfo {
	return &auth.TokenInfo{
		UserID:     c.Identity.User + "\x1f" + c.Identity.Install,
		Expiration: until,
		Extra:      map[string]any{callerKey: c},
	}
}

const callerKey = "toolgate/caller"

// Options configure a Server.
type Options struct {
	// StateKey signs continuation state; instances that share calls must
	// share it.
	StateKey []byte
	// Version is reported as the server's version.
	Version string
	// Logger gets the errors a client is not told; nil discards them.
	Logger *zap.Logger
	// Clock tells when continuation state expires; nil is the system clock.
	Clock clock.Clock
	// Observer counts sessions and calls. Default: observe.Nop.
	Observer observe.Observer
	// LocalIdentity is who a call acts for when it has neither a verified
	// caller nor a _meta identity: the one user of a loopback-mode gateway,
	// so that a desktop client needs no toolgate-specific _meta. Zero: none.
	LocalIdentity gateway.Identity
	// Sessions bound the sessions of the revisions before 2026-07-28.
	Sessions SessionLimits
	// MaxRequestSize bounds a request body, as the SDK reads it. Default:
	// the SDK's (4 MiB).
	MaxRequestSize int64
	// Refuse answers a request turned away before the SDK saw it: a new
	// session over a cap (a *LimitError). Default: a plain-text 429.
	Refuse func(w http.ResponseWriter, err error)
}

// Server is the MCP endpoint.
type Server struct {
	logger   *zap.Logger
	obs      observe.Observer
	gw       *gateway.Gateway
	server   *sdk.Server
	stateful http.Handler
	// statefulJSON holds the sessions answered in JSON (serveSession).
	statefulJSON http.Handler
	stateless    http.Handler
	key          []byte
	clock        clock.Clock
	local        gateway.Identity
	sessions     *sessions
	refuse       func(http.ResponseWriter, error)

	// spend marks a continuation's nonce used until it expires, in the
	// gateway's ledger: once across instances and restarts.
	spend func(ctx context.Context, id string, until time.Time) (bool, error)

	// index says which tools show in the view and which the fast path
	// serves; syncTools replaces it when the gateway's tools change.
	index   atomic.Pointer[toolIndex]
	indexMu sync.Mutex
	// view is the view's resources/read content, built at load.
	view *sdk.ResourceContents

	// impl is the server as results name it in _meta; implMeta is that
	// _meta as the SDK marshals it, for the fast path's answers.
	impl     *sdk.Implementation
	implMeta []byte
	// maxBody is the SDK's request body limit; negative is none.
	maxBody int64
	// sdkOnly sends every request to the SDK, for tests that compare the
	// fast path's answers with the SDK's.
	sdkOnly   atomic.Bool
	fastCalls atomic.Int64
	// caps remembers the fast path's client capabilities.
	caps capsCache
}

// stateTTL bounds how long an answer to a card may take over MCP.
const stateTTL = 15 * time.Minute

// New builds the MCP server for the gateway's tools.
func New(gw *gateway.Gateway, opts Options) *Server {
	s := &Server{gw: gw, key: opts.StateKey, clock: clock.Or(opts.Clock), spend: gw.SpendOnce, logger: opts.Logger, obs: observe.Or(opts.Observer), local: opts.LocalIdentity, refuse: opts.Refuse}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	if s.refuse == nil {
		s.refuse = refuseLimit
	}
	s.sessions = newSessions(opts.Sessions, s.obs)
	if len(s.key) == 0 {
		s.key = make([]byte, 32)
		_, _ = rand.Read(s.key)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s.impl = &sdk.Implementation{Name: "toolgate", Version: version}
	s.implMeta, _ = json.Marshal(sdk.Meta{sdk.MetaKeyServerInfo: s.impl}, jsonread.Legacy)
	s.maxBody = opts.MaxRequestSize
	if s.maxBody == 0 {
		s.maxBody = sdk.DefaultMaxRequestBodyBytes
	}
	s.server = sdk.NewServer(s.impl, &sdk.ServerOptions{
		// Logging is the SDK's default, kept; the MCP Apps extension is
		// declared for hosts that look for it before showing a view.
		Capabilities: &sdk.ServerCapabilities{
			Logging:    &sdk.LoggingCapabilities{},
			Extensions: map[string]any{AppsExtension: map[string]any{}},
		},
	})
	s.index.Store(&toolIndex{})
	s.syncTools(gw.Tools())
	gw.OnToolsChange(s.syncTools)
	s.server.AddTool(cardAnswerTool(), s.answerCard)
	s.view = viewContents(gw.Tools().List(), gw.EmbedOrigins())
	s.server.AddResource(&sdk.Resource{URI: web.MCPAppURI, Name: "toolgate-card", Title: "toolgate card", MIMEType: web.MCPAppMIMEType}, s.readView)
	s.server.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: upstreamViewPrefix + "{server}/{+view}", Name: "upstream-views",
		Title: "Views of upstream MCP servers' tools", MIMEType: web.MCPAppMIMEType}, s.readUpstreamView)
	// A session is open from its initialize until it closes (idle
	// timeout, DELETE, its token's end). Stateless requests are not
	// initialized, and are not sessions.
	s.server.AddReceivingMiddleware(s.filterList, s.bindSessions)
	getServer := func(*http.Request) *sdk.Server { return s.server }
	// toolgate checks Host itself (see Handler): the SDK's own check would
	// refuse a gateway on loopback behind another proxy.
	s.stateful = sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		DisableLocalhostProtection: true,
		SessionTimeout:             s.sessions.limits.IdleTimeout,
		MaxRequestBodyBytes:        opts.MaxRequestSize,
	})
	s.statefulJSON = sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		DisableLocalhostProtection: true,
		SessionTimeout:             s.sessions.limits.IdleTimeout,
		MaxRequestBodyBytes:        opts.MaxRequestSize,
		JSONResponse:               true,
	})
	s.stateless = sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		DisableLocalhostProtection: true, Stateless: true,
		MaxRequestBodyBytes: opts.MaxRequestSize,
	})
	return s
}

// ServeHTTP serves MCP Streamable HTTP. Clients of the sessionless
// revision (2026-07-28 and later) are served statelessly, where a card is
// an input_required round trip; older clients get sessions, where a card
// is an elicitation/create request during the call, within the session
// limits (sessions.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= "2026-07-28" {
		if !s.sdkOnly.Load() && s.serveFast(w, r) {
			return
		}
		s.stateless.ServeHTTP(w, r)
		return
	}
	s.serveSession(w, r)
}

// caller returns the verified caller, or the identity the client names in
// _meta when no callers are configured (the loopback default), or else the
// local identity. A _meta identity that is not {user, install} strings
// within the gateway's bounds is a malformed request, never read as no
// identity.
//
// A _meta identity wins over the local one: in loopback mode any process
// on this machine may name any user already (through _meta or the Tools
// API), so the local identity is a default for clients that name none,
// not a bound.
func (s *Server) caller(extra *sdk.RequestExtra, meta sdk.Meta) (Caller, error) {
	base := ""
	if extra != nil && extra.Header != nil {
		base = extra.Header.Get(BaseURLHeader)
	}
	if extra != nil && extra.TokenInfo != nil {
		if c, ok := extra.TokenInfo.Extra[callerKey].(Caller); ok {
			c.BaseURL = base
			return c, nil
		}
	}
	c := Caller{Identity: s.local, BaseURL: base}
	if raw, ok := meta[MetaIdentity]; ok && raw != nil {
		var isPlain bool
		if c.Identity, isPlain = plainIdentity(raw); !isPlain {
			c.Identity = gateway.Identity{}
			b, _ := json.Marshal(raw, jsonread.Legacy)
			if err := jsonread.UnmarshalAnyCase(b, &c.Identity); err != nil {
				return Caller{}, invalidMeta(MetaIdentity, `the identity must be {"user", "install"} strings`)
			}
		}
		if err := gateway.CheckIdentity(c.Identity); err != nil {
			return Caller{}, invalidMeta(MetaIdentity, err.Error())
		}
	}
	c.Device, _ = meta[MetaDevice].(string)
	return c, nil
}

// plainIdentity reads a _meta identity that is {"user", "install"}
// strings (either may be missing), valid UTF-8, and nothing else: what
// marshalling it and unmarshalling that into a gateway.Identity gives,
// without either. Any other value is not read (false).
func plainIdentity(raw any) (gateway.Identity, bool) {
	m, ok := raw.(map[string]any)
	if !ok {
		return gateway.Identity{}, false
	}
	var id gateway.Identity
	for k, v := range m {
		str, ok := v.(string)
		if !ok || !utf8.ValidString(str) {
			return gateway.Identity{}, false
		}
		switch k {
		case "user":
			id.User = str
		case "install":
			id.Install = str
		default:
			return gateway.Identity{}, false
		}
	}
	return id, true
}

// invalidMeta is the protocol error for a malformed _meta member.
func invalidMeta(key, msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `_meta["` + key + `"]: ` + msg}
}

// filterList hides the tools the caller may not call from tools/list, and
// to an MCP Apps client lists the view on the tools that show in it, and
// the card answer tool.
func (s *Server) filterList(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		list, ok := res.(*sdk.ListToolsResult)
		if !ok {
			return res, nil
		}
		var meta sdk.Meta
		if p, ok := req.GetParams().(*sdk.ListToolsParams); ok && p != nil {
			meta = p.Meta
		}
		c, err := s.caller(req.GetExtra(), meta)
		if err != nil {
			return nil, err
		}
		apps := false
		if lr, ok := req.(*sdk.ListToolsRequest); ok {
			apps = isAppsClient(lr.ClientCapabilities())
		}
		visible := map[string]bool{manifest.CardAnswerTool: apps}
		for _, t := range s.gw.Visible(gateway.Call{Identity: c.Identity, Claims: c.Claims}) {
			visible[t.Name] = true
		}
		kept := list.Tools[:0:0]
		for _, t := range list.Tools {
			if !visible[t.Name] {
				continue
			}
			if ui, ok := s.index.Load().ui[t.Name]; ok && apps {
				t = ui
			}
			kept = append(kept, t)
		}
		out := *list
		out.Tools = kept
		return &out, nil
	}
}

// cardInput is the id of the one input request a card makes.
const cardInput = "card"

// call runs tools/call through the gateway: the SDK's tool handler.
func (s *Server) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	return s.callTool(ctx, req, req.ClientCapabilities())
}

// callTool runs tools/call for a client with caps, the one path of the
// SDK's handler and of the fast path (fast.go), which decodes caps its
// own way.
func (s *Server) callTool(ctx context.Context, req *sdk.CallToolRequest, caps *sdk.ClientCapabilities) (*sdk.CallToolResult, error) {
	s.obs.MCPCall()
	p := req.Params
	c, err := s.caller(req.Extra, p.Meta)
	if err != nil {
		return nil, err
	}

	if p.RequestState != "" || len(p.InputResponses) > 0 {
		return s.resume(ctx, req, c, caps)
	}

	call := gateway.Call{Tool: p.Name, Input: []byte(p.Arguments), Identity: c.Identity, Claims: c.Claims, Surface: gateway.SurfaceMCP, BaseURL: c.BaseURL}
	// A malformed call id is a malformed request: a protocol error. An
	// empty one is none, as in the Tools API.
	id, isString := p.Meta[MetaCallID].(string)
	if raw, ok := p.Meta[MetaCallID]; ok && raw != nil && !isString {
		return nil, invalidMeta(MetaCallID, "the callId must be a string")
	}
	if id != "" {
		if err := gateway.CheckCallID(id); err != nil {
			return nil, invalidMeta(MetaCallID, err.Error())
		}
		call.CallID = id
	} else {
		// The SDK does not hand the JSON-RPC id to tool handlers; each
		// tools/call is its own call, and a client that wants at-most-once
		// across its retries names the call in _meta.
		call.CallID = gateway.NewCallID()
	}
	if thread, _ := p.Meta[MetaThreadID].(string); thread != "" {
		call.Origin = gateway.Origin{Source: gateway.SourceThread, ThreadID: thread}
	} else if caps != nil && caps.Elicitation != nil || s.inView(p.Name, caps) {
		// A person can answer a card: in an input request, or in the view.
		thread := "mcp-" + call.CallID
		if req.Session != nil && req.Session.ID() != "" {
			thread = "mcp-" + req.Session.ID()
		}
		call.Origin = gateway.Origin{Source: gateway.SourceThread, ThreadID: thread}
	}

	ans, err := s.gw.Invoke(ctx, call)
	if err != nil {
		var re *gateway.RequestError
		if errors.As(err, &re) && errors.Is(err, gateway.ErrUnknownTool) {
			return nil, err
		}
		return s.failed(err), nil
	}
	return s.reply(ans, c, caps, false)
}

// inView reports whether the client shows the tool's answers in the MCP
// Apps view.
func (s *Server) inView(tool string, caps *sdk.ClientCapabilities) bool {
	_, ok := s.index.Load().ui[tool]
	return ok && isAppsClient(caps)
}

// reply maps an answer onto a tools/call result, for a client with caps.
// fromView is a card answer of the view, whose answer shows in the view
// and whose next card the view answers too, never an input request. A
// card for an Apps client that can answer input requests is one, as for
// any client.
func (s *Server) reply(ans *gateway.Answer, c Caller, caps *sdk.ClientCapabilities, fromView bool) (*sdk.CallToolResult, error) {
	view := fromView || s.inView(ans.Tool, caps)
	if ans.Status == gateway.StatusActionRequired {
		if fromView || view && !canAskForm(caps) {
			return s.viewCard(ans, c)
		}
		return s.askCard(ans, c, caps)
	}
	if view {
		return viewResult(ans), nil
	}
	return toolResult(ans.Result, true), nil
}

// toolResult maps a result onto MCP content: one text item for the model,
// the markdown for the user, and with link the embed as a resource link;
// an upstream MCP tool's structured content and other items as it gave
// them.
func toolResult(r result.Result, link bool) *sdk.CallToolResult {
	out := &sdk.CallToolResult{IsError: r.IsError, Content: []sdk.Content{&sdk.TextContent{Text: r.Content}}}
	if r.Structured != nil {
		out.StructuredContent = r.Structured
	}
	if len(r.Items) > 0 {
		// The markdown names the items for the card; an MCP client
		// gets the items themselves.
		out.Content = append(out.Content, itemContent(r.Items)...)
		return out
	}
	if r.Markdown != "" {
		out.Content = append(out.Content, &sdk.TextContent{
			Text:        r.Markdown,
			Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}},
		})
	}
	if link && r.EmbedURL != "" {
		out.Content = append(out.Content, &sdk.ResourceLink{
			URI: r.EmbedURL, Name: "embed", Title: "Embedded page", MIMEType: "text/html",
			Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}},
		})
	}
	return out
}

// failed is the tool failure for an error of the gateway, told and
// logged as gateway.Told says.
func (s *Server) failed(err error) *sdk.CallToolResult {
	msg, logIt := gateway.Told(err)
	if logIt {
		s.logger.Error("answering an MCP call", zap.Error(err))
	}
	return errorResult(msg)
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// state is a card's continuation: which call to resume, for whom, until
// when (exp), and a nonce (jti) that makes it usable once. It travels as
// a JWT signed with HS256 under the server's state key.
type state struct {
	CallID  string `json:"call"`
	User    string `json:"user"`
	Install string `json:"install"`
	// Via is how the state may be used (viaElicitation, viaView): an
	// input request's state never presses a button from the view, nor the
	// other way round.
	Via string `json:"via,omitempty"`
	jwt.RegisteredClaims
}

func (s *Server) sign(st state) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, st).SignedString(s.key)
}

// newState signs a fresh continuation of call for c, to be used via.
func (s *Server) newState(callID string, c Caller, via string) (string, error) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return s.sign(state{
		CallID: callID, User: c.Identity.User, Install: c.Identity.Install, Via: via,
		RegisteredClaims: jwt.RegisteredClaims{
			ExpiresAt: jwt.NewNumericDate(s.clock.Now().Add(stateTTL)),
			ID:        base64.RawURLEncoding.EncodeToString(nonce),
		},
	})
}

// open checks a continuation: its signature, its age, its caller, the way
// it is used (one of ways), and that it was not used before; it spends
// it. A ledger that cannot tell whether it was used refuses it.
func (s *Server) open(ctx context.Context, raw string, c Caller, ways ...string) (state, error) {
	var st state
	_, err := jwt.NewParser(
		// Only what sign makes: never "none", never another algorithm.
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		// One spelling per state, like the nonce it carries.
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.clock.Now),
	).ParseWithClaims(raw, &st, func(*jwt.Token) (any, error) { return s.key, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return state{}, errors.New("malformed request state")
	case errors.Is(err, jwt.ErrTokenExpired):
		return state{}, errors.New("request state has expired")
	case err != nil:
		return state{}, errors.New("request state does not verify")
	case st.ID == "" || st.CallID == "":
		return state{}, errors.New("malformed request state")
	}
	if st.User != c.Identity.User || st.Install != c.Identity.Install {
		return state{}, errors.New("request state belongs to another caller")
	}
	if !slices.Contains(ways, st.Via) {
		return state{}, errors.New("request state was issued for another way of answering the card")
	}
	fresh, err := s.spend(ctx, "mcp-state:"+st.ID, st.ExpiresAt.Time)
	switch {
	case err != nil:
		s.logger.Error("mcp: the ledger cannot spend a request state", zap.Error(err))
		return state{}, errors.New("request state cannot be checked now (the ledger is unavailable); try again")
	case !fresh:
		return state{}, errors.New("request state was already used")
	}
	return st, nil
}

// canAskForm reports whether the client declared form elicitation, which
// an input request for a card needs (an empty elicitation capability means
// form, as the SDK reads it).
func canAskForm(caps *sdk.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
}

// askCard turns a card into an input request: a form with one required
// string, the button, whose choices are the button ids titled by labels.
// A client that cannot answer one (a thread call named by _meta from a
// client without elicitation) gets a tool failure, not a protocol error;
// the call stays paused in the ledger for the Tools API's resume.
func (s *Server) askCard(ans *gateway.Answer, c Caller, caps *sdk.ClientCapabilities) (*sdk.CallToolResult, error) {
	card, err := result.ParseCard(ans.Card)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	if card.Connection != nil {
		if out, ok := s.askConnect(ans, card, c, caps); ok {
			return out, nil
		}
	}
	if !canAskForm(caps) {
		return errorResult("the tool needs a person to answer a card (" + strconv.Quote(card.Title) + "), and this MCP client cannot ask one: it declared no form elicitation capability. Call " + ans.CallID + " waits for an answer through the Tools API."), nil
	}
	choices := make([]map[string]string, 0, len(card.Elements))
	for _, b := range card.Elements {
		choices = append(choices, map[string]string{"const": b.ID, "title": b.Label})
	}
	msg := card.Title
	if card.Description != "" {
		msg += "\n\n" + card.Description
	}
	if card.Assignee != nil {
		msg += "\n\n(Only device " + card.Assignee.ComputerID + " may press a button; others may decline to skip or cancel.)"
	}
	for _, b := range card.Elements {
		if b.URL != "" {
			// A form cannot open a link: the message shows it, and the
			// button goes on once it was followed.
			msg += "\n\nOpen " + b.URL + " to connect, then choose " + strconv.Quote(b.Label) + "."
		}
	}
	props := map[string]any{
		"button": map[string]any{"type": "string", "title": card.Title, "oneOf": choices},
	}
	if card.Approval != nil {
		// An approval's input, when the form can hold it, is offered for
		// changes, filled in with what will be sent.
		for name, p := range approvalFields(card.Approval) {
			props[name] = p
		}
	}
	schema := map[string]any{
		"type":       "object",
		"properties": props,
		"required":   []string{"button"},
	}
	raw, err := s.newState(ans.CallID, c, viaElicitation)
	if err != nil {
		return s.failed(err), nil
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{cardInput: &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: schema}},
		RequestState:  raw,
	}, nil
}

// resume answers a card with the client's input response: accept presses
// the chosen button (a URL elicitation's, which names none, the connect
// button), decline skips, cancel cancels. The state says which was asked:
// a URL elicitation's decline has no content either.
func (s *Server) resume(ctx context.Context, req *sdk.CallToolRequest, c Caller, caps *sdk.ClientCapabilities) (*sdk.CallToolResult, error) {
	p := req.Params
	resp, ok := p.InputResponses[cardInput].(*sdk.ElicitResult)
	if !ok {
		return errorResult("the card's answer is missing"), nil
	}
	st, err := s.open(ctx, p.RequestState, c, viaElicitation, viaURL)
	if err != nil {
		return errorResult("the card's answer was refused: " + err.Error()), nil
	}
	var rr gateway.ResumeRequest
	var changes map[string]any
	switch resp.Action {
	case "accept":
		if st.Via == viaURL {
			rr.ButtonID = result.ButtonConnect
			break
		}
		rr.ButtonID, _ = resp.Content["button"].(string)
		if rr.ButtonID == "" {
			return errorResult("the card's answer names no button"), nil
		}
		if rr.ButtonID == result.ButtonApprove && len(resp.Content) > 1 {
			changes = make(map[string]any, len(resp.Content)-1)
			for k, v := range resp.Content {
				if k != "button" {
					changes[k] = v
				}
			}
		}
	case "decline":
		rr.Action = gateway.ActionSkip
	default:
		rr.Action = gateway.ActionCancel
	}
	return s.resumeCard(ctx, st, c, rr, caps, false, changes)
}

// continueCard answers the card of the call a continuation names, the one
// path of both ways a card is answered over MCP (an input response, the
// view's button): the state opens (signature, expiry, caller, way, spent
// once), the gateway resumes the call with rr's button or action, and the
// new answer is mapped as reply says. A refused state resumes nothing.
//
// changes are an approval's fields as an input response gave them: they
// replace those of the input the card holds, and the whole is approved
// with changes (the gateway checks it against the tool's schema).
func (s *Server) continueCard(ctx context.Context, raw, via string, c Caller, rr gateway.ResumeRequest, caps *sdk.ClientCapabilities, fromView bool, changes map[string]any) (*sdk.CallToolResult, error) {
	st, err := s.open(ctx, raw, c, via)
	if err != nil {
		return errorResult("the card's answer was refused: " + err.Error()), nil
	}
	return s.resumeCard(ctx, st, c, rr, caps, fromView, changes)
}

// resumeCard is continueCard once the state opened.
func (s *Server) resumeCard(ctx context.Context, st state, c Caller, rr gateway.ResumeRequest, caps *sdk.ClientCapabilities, fromView bool, changes map[string]any) (*sdk.CallToolResult, error) {
	var err error
	rr.CallID, rr.Identity, rr.Device, rr.Surface, rr.BaseURL = st.CallID, c.Identity, c.Device, gateway.SurfaceMCP, c.BaseURL
	if changes != nil {
		if rr.Input, err = s.changedInput(ctx, c, st.CallID, changes); err != nil {
			return errorResult("the card's answer was refused: " + err.Error()), nil
		}
	}
	ans, err := s.gw.Resume(ctx, rr)
	if err != nil {
		out := s.failed(err)
		if fromView {
			s.stillOpen(ctx, out, st.CallID, c)
		}
		return out, nil
	}
	return s.reply(ans, c, caps, fromView)
}

// stillOpen gives a refused press of the view (a button not on the card,
// another device's button, the ledger away) a fresh state when the card
// still waits, so that the person can press again, skip or cancel: the
// refused one was spent when it opened. A card already answered gets
// none.
func (s *Server) stillOpen(ctx context.Context, out *sdk.CallToolResult, callID string, c Caller) {
	ans, err := s.gw.Status(ctx, c.Identity, callID)
	if err != nil || ans.Status != gateway.StatusActionRequired {
		return
	}
	if raw, err := s.newState(callID, c, viaView); err == nil {
		out.Meta = sdk.Meta{MetaState: raw}
	}
}

// askConnect asks a connect card as a URL elicitation, for a client that
// declared it: the client opens the service's authorization page, and
// its accept presses the connect button, which runs the call once the
// connection is made (the callback may have run it already). ok is false
// for a client without URL elicitation.
func (s *Server) askConnect(ans *gateway.Answer, card *result.Card, c Caller, caps *sdk.ClientCapabilities) (*sdk.CallToolResult, bool) {
	if caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return nil, false
	}
	b, ok := card.Button(result.ButtonConnect)
	if !ok || b.URL == "" {
		return nil, false
	}
	raw, err := s.newState(ans.CallID, c, viaURL)
	if err != nil {
		return s.failed(err), true
	}
	msg := card.Title
	if card.Description != "" {
		msg += "\n\n" + card.Description
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{cardInput: &sdk.ElicitParams{Mode: "url", Message: msg, URL: b.URL, ElicitationID: ans.CallID}},
		RequestState:  raw,
	}, true
}
