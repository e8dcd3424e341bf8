// Package caddymodule is toolgate's Caddy glue: the http.handlers.toolgate
// module, its Caddyfile directive, and the HTTP surface over the Caddy-free
// core in internal/gateway.
package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("toolgate", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("toolgate", httpcaddyfile.Before, "reverse_proxy")
}

// DefaultMaxRequestSize bounds an invoke envelope.
const DefaultMaxRequestSize = 1 << 20

// Handler serves an app's tools: it validates each call's input, sends it
// to the tool's target with the signed identity of the user, and normalizes
// the answer into a tool result.
//
// It answers these paths, relative to where it is mounted, and passes every
// other request to the next handler:
//
//	GET  /tools                    the tool list
//	POST /tools/{name}             invoke a tool
//	GET  /calls/{callId}           a call's answer now
//	POST /calls/{callId}/resume    answer an action-required card
//	POST /page-context             render a page-context snapshot
//	GET  /client/calls?threadId=   a page's client calls (Server-Sent Events)
//	POST /client/calls/{id}/claim  a page claims a call before running it
//	POST /client/calls/{id}/result a page posts a call's result
//	POST /mcp (+ GET, DELETE)      MCP Streamable HTTP
//	GET  /client.js                the browser client
//	GET  /.well-known/jwks.json    public keys of the identity tokens
//
// With no caller authentication configured, runtime calls are accepted
// only straight from this machine: from a loopback client through no
// untrusted proxy, with a loopback Host (or one of AllowedHosts), and from
// no other web origin than the site's own or one of the pages origins.
// Every POST body must be sent as application/json.
type Handler struct {
	// Manifests are JSON files declaring tools:
	// {"tools": [{"name", "displayName", "description", "input_schema", "target"}]}.
	Manifests []string `json:"manifests,omitempty"`

	// Tools are declared inline, in the same shape as a manifest's tools.
	Tools []manifest.Tool `json:"tools,omitempty"`

	// Components are the app's own components that app targets run on,
	// by name.
	Components map[string]*Component `json:"components,omitempty"`

	// Identity configures the tokens that tell components who the user is.
	Identity *Identity `json:"identity,omitempty"`

	// Callers configures caller authentication. Unset, runtime calls are
	// accepted only straight from this machine (see the type's comment),
	// with the identity the envelope names.
	Callers *Callers `json:"callers,omitempty"`

	// Pages configures the page tokens of the client-tool endpoints. Unset,
	// those endpoints answer 404 and client tools time out.
	Pages *Pages `json:"pages,omitempty"`

	// ClientToolTimeout is how long a client tool call waits for its page.
	// Default: 120s.
	ClientToolTimeout caddy.Duration `json:"client_tool_timeout,omitempty"`

	// AllowedHosts are the Host names (name, or name:port) that runtime
	// calls may name besides loopback names when no callers are
	// configured, and that /mcp accepts on a loopback listener: the names
	// by which this machine itself is reached. A foreign Host on a
	// loopback connection is how DNS rebinding reaches a local server.
	// Default: none.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`

	// Ledger configures the call ledger. Default: bolt, a file in Caddy's
	// data directory.
	Ledger *Ledger `json:"ledger,omitempty"`

	// UpstreamTimeout limits one request to a target, answer included.
	// Default: 30s.
	UpstreamTimeout caddy.Duration `json:"upstream_timeout,omitempty"`

	// MaxResponseSize is the hard limit, in bytes, on a target's answer;
	// a larger answer is an error result. Default: 1 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// MaxRequestSize is the limit, in bytes, on an invoke's envelope; a
	// larger one is refused with 413. Default: 1 MiB.
	MaxRequestSize int64 `json:"max_request_size,omitempty"`

	gw           *gateway.Gateway
	client       *dispatch.Client
	listEntries  map[string][]byte // each tool's entry in GET /tools
	fullList     []byte            // the whole list, when no tool has a policy
	jwks         []byte
	verifier     *identity.Verifier
	userClaim    string
	installClaim string
	logger       *zap.Logger
	ledgerKey    string
	pageVerifier *identity.Verifier
	bridge       *clienttools.Bridge
	bridgeKey    string
	mcp          http.Handler
	allowedHosts map[string]bool // AllowedHosts, in lower case
	pageOrigins  map[string]bool // Pages.Origins, normalized by originKey
}

// Component is one of the app's components.
type Component struct {
	// BaseURL is the component's absolute http(s) URL; a target's path is
	// appended to it.
	BaseURL string `json:"base_url"`

	// Env holds the values ${env.NAME} references of this component's
	// targets resolve to. The process environment is never read at call
	// time; use Caddy's {$VAR} to fill these at load.
	Env map[string]string `json:"env,omitempty"`
}

// Identity configures the identity tokens sent to app targets.
type Identity struct {
	// Issuer is the tokens' iss claim. Default: "toolgate".
	Issuer string `json:"issuer,omitempty"`

	// KeyFile is a PEM file holding a PKCS #8 Ed25519 private key; its
	// kid is the key's RFC 7638 thumbprint. Default: a key generated once
	// and kept in Caddy's storage.
	KeyFile string `json:"key_file,omitempty"`

	// Keys are named keys, for rotation: SigningKey signs, the others are
	// still published in the JWKS so tokens they signed keep verifying
	// until they are removed. Exclusive with KeyFile.
	Keys []IdentityKey `json:"keys,omitempty"`

	// SigningKey is the id of the key in Keys that signs. Default: the
	// only key, when there is one.
	SigningKey string `json:"signing_key,omitempty"`

	// TTL is how long a token lives. Default: 5m.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

// IdentityKey is a named identity key.
type IdentityKey struct {
	// ID is the key's kid.
	ID string `json:"id"`
	// File is a PEM file holding a PKCS #8 Ed25519 private key.
	File string `json:"file"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.toolgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision loads and compiles the tools, sets up the identity key and the
// upstream client.
func (h *Handler) Provision(ctx caddy.Context) error {
	return h.provision(ctx, ctx.Logger())
}

func (h *Handler) provision(ctx caddy.Context, logger *zap.Logger) error {
	h.logger = logger
	if h.MaxRequestSize <= 0 {
		h.MaxRequestSize = DefaultMaxRequestSize
	}
	// Secrets, passwords, key paths and env values may be placeholders
	// such as {env.NAME}, resolved once here.
	repl := caddy.NewReplacer()

	components := make(map[string]*dispatch.Component, len(h.Components))
	for name, c := range h.Components {
		if c == nil {
			return fmt.Errorf("component %q: no config", name)
		}
		env, err := resolveEnv(repl, name, c.Env)
		if err != nil {
			return err
		}
		comp, err := dispatch.NewComponent(name, c.BaseURL, env)
		if err != nil {
			return err
		}
		components[name] = comp
	}

	var sources []manifest.Source
	for _, path := range h.Manifests {
		src, err := manifest.ReadFile(path)
		if err != nil {
			return err
		}
		sources = append(sources, src)
	}
	if len(h.Tools) > 0 {
		sources = append(sources, manifest.Source{Name: "inline tools", Tools: h.Tools})
	}
	tools, err := manifest.Compile(sources, components)
	if err != nil {
		return err
	}
	if h.listEntries, err = toolListEntries(tools); err != nil {
		return err
	}
	if !hasPolicies(tools) {
		h.fullList = joinList(h.listEntries, tools.List())
	}
	if err := checkAudiences(h.Callers, h.Pages); err != nil {
		return err
	}
	if h.Callers != nil {
		var pagesAudience string
		if h.Pages != nil {
			pagesAudience = h.Pages.Audience
		}
		if h.verifier, err = h.Callers.verifier(repl, h.logger, pagesAudience); err != nil {
			return err
		}
		h.userClaim, h.installClaim = h.Callers.UserClaim, h.Callers.InstallClaim
		if h.userClaim == "" {
			h.userClaim = "sub"
		}
		if h.installClaim == "" {
			h.installClaim = "install"
		}
	}

	idc := h.Identity
	if idc == nil {
		idc = new(Identity)
	}
	issuerName := idc.Issuer
	if issuerName == "" {
		issuerName = "toolgate"
	}
	key, others, err := loadKeys(ctx, repl, idc)
	if err != nil {
		return fmt.Errorf("identity key: %w", err)
	}
	issuer := identity.NewIssuer(issuerName, time.Duration(idc.TTL), key, others...)
	h.jwks = issuer.JWKS()

	lc := h.Ledger
	if lc == nil {
		lc = new(Ledger)
	}
	if err := lc.checkRetention(time.Duration(h.UpstreamTimeout), time.Duration(h.ClientToolTimeout)); err != nil {
		return err
	}
	led, ledgerKey, err := lc.open(repl, h.logger)
	if err != nil {
		return err
	}
	h.ledgerKey = ledgerKey

	if h.Pages != nil {
		var callersAudience string
		if h.Callers != nil {
			callersAudience = h.Callers.Audience
		}
		if h.pageVerifier, err = h.Pages.verifier(ctx, repl, h.logger, callersAudience); err != nil {
			return err
		}
	}
	if err := h.setupLoopback(); err != nil {
		return err
	}
	limits, err := h.Pages.limits()
	if err != nil {
		return err
	}
	// One bridge per ledger: a page and the call it answers meet on it
	// across reloads.
	h.bridgeKey = "bridge:" + ledgerKey
	val, _, err := bridges.LoadOrNew(h.bridgeKey, func() (caddy.Destructor, error) {
		return openBridge{clienttools.NewBridge()}, nil
	})
	if err != nil {
		return err
	}
	h.bridge = val.(openBridge).Bridge
	h.bridge.SetLimits(limits)

	h.client = dispatch.NewClient(time.Duration(h.UpstreamTimeout), h.MaxResponseSize)
	h.gw = gateway.New(gateway.Config{
		Tools: tools, Issuer: issuer, Client: h.client,
		Ledger: led, Logger: h.logger,
		Bridge: h.bridge, ClientTimeout: time.Duration(h.ClientToolTimeout),
	})
	h.setupMCP(key)
	h.logger.Info("toolgate ready", zap.Int("tools", len(tools.List())), zap.String("kid", key.ID))
	return nil
}

// Validate checks the config.
func (h *Handler) Validate() error {
	if h.MaxResponseSize < 0 {
		return errors.New("max_response_size must not be negative")
	}
	if h.UpstreamTimeout < 0 {
		return errors.New("upstream_timeout must not be negative")
	}
	return nil
}

// Cleanup releases idle upstream connections and this config's hold on
// the ledger.
func (h *Handler) Cleanup() error {
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	if h.bridgeKey != "" {
		if _, err := bridges.Delete(h.bridgeKey); err != nil {
			return err
		}
	}
	if h.ledgerKey != "" {
		_, err := ledgers.Delete(h.ledgerKey)
		return err
	}
	return nil
}

type listedTool struct {
	Name        string          `json:"name"`
	DisplayName string          `json:"displayName"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// toolListEntries encodes each tool's list entry once, at load; a list is
// then only joined per request, filtered by the caller's policies.
func toolListEntries(set *manifest.Set) (map[string][]byte, error) {
	out := make(map[string][]byte, len(set.List()))
	for _, t := range set.List() {
		var compact bytes.Buffer
		if err := json.Compact(&compact, t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: input_schema: %w", t.Name, err)
		}
		b, err := json.Marshal(listedTool{t.Name, t.DisplayName, t.Description, compact.Bytes()})
		if err != nil {
			return nil, err
		}
		out[t.Name] = b
	}
	return out, nil
}

func hasPolicies(set *manifest.Set) bool {
	for _, t := range set.List() {
		if t.Policy != nil {
			return true
		}
	}
	return false
}

func joinList(entries map[string][]byte, tools []*manifest.Compiled) []byte {
	size := 2
	for _, t := range tools {
		size += len(entries[t.Name]) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i, t := range tools {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, entries[t.Name]...)
	}
	return append(buf, ']')
}

// serveList writes the tools the caller may call: the list built at load
// when no tool has a policy, else joined from per-tool entries.
func (h *Handler) serveList(w http.ResponseWriter, c caller) error {
	list := h.fullList
	if list == nil {
		list = joinList(h.listEntries, h.gw.Visible(gateway.Call{Identity: c.identity, Claims: c.claims}))
	}
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(list)
	return err
}

// ServeHTTP answers the paths the handler owns and passes on the rest.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	path := r.URL.Path
	switch {
	case path == "/tools":
		if !allowMethod(w, r, http.MethodGet) {
			return nil
		}
		c, ok := h.authenticate(w, r)
		if !ok {
			return nil
		}
		return h.serveList(w, c)
	case strings.HasPrefix(path, "/tools/"):
		if !allowMethod(w, r, http.MethodPost) {
			return nil
		}
		c, ok := h.authenticate(w, r)
		if !ok {
			return nil
		}
		return h.serveInvoke(w, r, c, strings.TrimPrefix(path, "/tools/"))
	case strings.HasPrefix(path, "/calls/"):
		return h.serveCalls(w, r, strings.TrimPrefix(path, "/calls/"))
	case path == "/mcp":
		return h.serveMCP(w, r)
	case path == "/client.js":
		return h.serveClientJS(w, r)
	case strings.HasPrefix(path, "/client/"):
		return h.serveClient(w, r, strings.TrimPrefix(path, "/client/"))
	case path == "/page-context":
		return h.servePageContext(w, r)
	case path == "/.well-known/jwks.json":
		if !allowMethod(w, r, http.MethodGet) {
			return nil
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, err := w.Write(h.jwks)
		return err
	}
	return next.ServeHTTP(w, r)
}

// envelope is the body of an invoke.
type envelope struct {
	Input    jsontext.Value    `json:"input"`
	CallID   string            `json:"callId"`
	Context  *gateway.Origin   `json:"context"`
	Identity *gateway.Identity `json:"identity"`
}

func (h *Handler) serveInvoke(w http.ResponseWriter, r *http.Request, c caller, name string) error {
	var env envelope
	if !h.decodeBody(w, r, &env) {
		return nil
	}
	call := gateway.Call{Tool: name, CallID: env.CallID, Input: json.RawMessage(env.Input)}
	if env.Context != nil {
		call.Origin = *env.Context
	}
	switch {
	case c.verified:
		call.Identity, call.Claims = c.identity, c.claims
	case env.Identity != nil:
		call.Identity = *env.Identity
	}
	ans, err := h.gw.Invoke(r.Context(), call)
	return h.writeAnswer(w, ans, err)
}

// writeAnswer writes an answer, or a caller's mistake as its status.
// Only a caller's mistake (a gateway.RequestError) is told as it is; any
// other error may name a file, a key or a user, so it is logged and the
// answer says only that it happened.
func (h *Handler) writeAnswer(w http.ResponseWriter, ans *gateway.Answer, err error) error {
	if err != nil {
		var re *gateway.RequestError
		if errors.As(err, &re) {
			status := gateway.StatusOf(err)
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", retryAfter)
			}
			writeError(w, status, re.Code, err.Error())
			return nil
		}
		msg, logIt := gateway.Told(err)
		if logIt {
			h.logger.Error("answering a call", zap.Error(err))
		}
		writeError(w, http.StatusInternalServerError, "internal", msg)
		return nil
	}
	bp := buffers.Get().(*[]byte)
	b := ans.AppendJSON((*bp)[:0])
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	// A writer does not keep what it was given.
	putBuffer(bp, b)
	return err
}

// buffers hold request bodies being decoded and answers being written;
// most fit in 4 KiB.
var buffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// putBuffer returns b, got from buffers as bp, for reuse; a buffer grown
// past 64 KiB by an unusually large body is left to the collector.
func putBuffer(bp *[]byte, b []byte) {
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		buffers.Put(bp)
	}
}

// resumeBody is the body of POST /calls/{callId}/resume.
type resumeBody struct {
	ButtonID string            `json:"buttonId"`
	Action   string            `json:"action"`
	Device   string            `json:"device"`
	Identity *gateway.Identity `json:"identity"`
}

func (h *Handler) serveCalls(w http.ResponseWriter, r *http.Request, rest string) error {
	callID, resume := strings.CutSuffix(rest, "/resume")
	if gateway.CheckCallID(callID) != nil {
		writeError(w, http.StatusNotFound, "unknown_call", "no such call")
		return nil
	}
	method := http.MethodGet
	if resume {
		method = http.MethodPost
	}
	if !allowMethod(w, r, method) {
		return nil
	}
	c, ok := h.authenticate(w, r)
	if !ok {
		return nil
	}
	who := c.identity
	if !resume {
		if !c.verified {
			who = gateway.Identity{User: r.URL.Query().Get("user"), Install: r.URL.Query().Get("install")}
		}
		ans, err := h.gw.Status(r.Context(), who, callID)
		return h.writeAnswer(w, ans, err)
	}
	var body resumeBody
	if !h.decodeBody(w, r, &body) {
		return nil
	}
	req := gateway.ResumeRequest{CallID: callID, Identity: who, ButtonID: body.ButtonID, Action: body.Action, Device: body.Device}
	if c.verified {
		// The device is the token's, never the body's.
		req.Device, _ = c.claims["device"].(string)
	} else if body.Identity != nil {
		req.Identity = *body.Identity
	}
	ans, err := h.gw.Resume(r.Context(), req)
	return h.writeAnswer(w, ans, err)
}

// bodyOptions make request bodies strict: unknown and repeated members are
// refused, names match exactly. Invalid UTF-8 becomes U+FFFD, as a page's
// JSON.stringify may escape a lone surrogate.
var bodyOptions = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true))

// decodeBody reads a strict JSON object body, sent as application/json,
// within MaxRequestSize; it writes the refusal itself and reports false.
// The body is read whole into a pooled buffer first: decoding from a
// stream reads it in small pieces through every layer of readers.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if !requireJSON(w, r) {
		return false
	}
	bp := buffers.Get().(*[]byte)
	body, err := dispatch.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxRequestSize), (*bp)[:0], min(r.ContentLength, h.MaxRequestSize))
	if err == nil {
		err = jsonv2.Unmarshal(body, v, bodyOptions)
	}
	// Nothing decoded keeps body's bytes (v2 copies into jsontext.Value
	// and json.RawMessage): the buffer can go back.
	putBuffer(bp, body)
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request is larger than %d bytes", h.MaxRequestSize))
		return false
	}
	writeError(w, http.StatusBadRequest, "malformed_envelope", "the body is not the expected JSON object: "+err.Error())
	return false
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("use %s", method))
	return false
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	_ = writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
