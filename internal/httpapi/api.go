// Package httpapi is toolgate's HTTP surface, without Caddy: the routes of
// the Tools API, the page endpoints and MCP, one authenticator per kind of
// token, the loopback rules, CORS, Server-Sent Events, request limits and
// the mapping of the core's errors onto statuses and JSON errors.
//
// The routes are relative to where the handler is mounted:
//
//	GET  /tools                    the tool list
//	POST /tools/{name}             invoke a tool
//	GET  /calls/{callId}           a call's answer now
//	POST /calls/{callId}/resume    answer an action-required card
//	GET  /waiting                  the calls that wait for the caller
//	GET  /connections              the caller's connections (never a token)
//	DELETE /connections/{name}     undo the caller's connection
//	GET  /connections/{name}/callback
//	                               the service's way back (its state guards it)
//	POST /page-context             render a page-context snapshot
//	GET  /client/calls?threadId=   a page's client calls (Server-Sent Events)
//	POST /client/calls/{id}/claim  a page claims a call before running it
//	POST /client/calls/{id}/result a page posts a call's result
//	POST /mcp (+ GET, DELETE)      MCP Streamable HTTP
//	GET  /.well-known/oauth-protected-resource[/mcp]
//	                               /mcp's protected resource metadata
//	                               (with callers' authorization servers)
//	GET  /client.js                the browser client
//	GET  /card.js                  <toolgate-card>, the result renderer
//	GET  /marked.js                the markdown library card.js imports
//	GET  /playground               a page to run every tool and see its card
//	GET  /.well-known/jwks.json    public keys of the identity tokens
//
// Any other path is not the API's: Serve reports false for it, and the
// Caddy module passes it to the next handler.
package httpapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/mcp"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/web"
)

// DefaultMaxRequestSize bounds a request body.
const DefaultMaxRequestSize = 1 << 20

// Config is what the API serves with.
type Config struct {
	Gateway *gateway.Gateway
	// Bridge is the gateway's bridge to the pages.
	Bridge *clienttools.Bridge

	// Callers authenticates runtime calls (the Tools API, page-context,
	// MCP). Nil: they are accepted only straight from this machine (the
	// loopback rules), with the identity the envelope names.
	Callers *Authenticator
	// Pages authenticates the page endpoints. Nil: they answer 404.
	Pages *Authenticator
	// PageOrigins are the page origins, besides the site's own, that get
	// CORS: on the page endpoints, and with Callers on a call's status and
	// resume (a card on an app's page). Without Callers they reach no
	// runtime endpoint.
	PageOrigins []string
	// AllowedHosts are Host names besides loopback ones that name this
	// machine (loopback mode; /mcp on a loopback listener).
	AllowedHosts []string
	// OriginalPath is a request's path as its client sent it, before a
	// route stripped the mount; it names /mcp in the protected resource
	// metadata and its challenges. Default: the request's path.
	OriginalPath func(*http.Request) string

	// LocalIdentity, when set, is who MCP calls act for when they name no
	// identity in _meta: the user of a single-user, loopback-mode gateway.
	// Refused with Callers, whose tokens name the user.
	LocalIdentity *gateway.Identity
	// MCPSessions bound the MCP sessions of the revisions that have them:
	// idle timeout, per caller and in all. Zero fields take mcp's
	// defaults; negative ones are refused.
	MCPSessions mcp.SessionLimits

	// JWKS is the published key set of the identity tokens.
	JWKS []byte
	// StateSeed derives the key that signs MCP continuations; instances
	// that share it (and calls, on Redis) accept each other's.
	StateSeed []byte

	// MaxRequestSize bounds a request body. Default: 1 MiB.
	MaxRequestSize int64
	Logger         *zap.Logger
	// Observer counts refusals, claims and MCP; the gateway's own.
	// Default: observe.Nop.
	Observer observe.Observer
}

// API serves the HTTP surface.
type API struct {
	gw       *gateway.Gateway
	bridge   *clienttools.Bridge
	callers  *Authenticator
	pages    *Authenticator
	loopback *loopback
	// corsOrigins are the page origins as configured, without a final
	// slash: an Origin header that names one exactly gets CORS.
	corsOrigins map[string]bool
	jwks        []byte
	origPath    func(*http.Request) string
	list        atomic.Pointer[toolList] // replaced when the tools change
	mcp         http.Handler
	mcpServer   *mcp.Server // behind mcp; tests reach it to compare its two paths
	maxRequest  int64
	logger      *zap.Logger
	obs         observe.Observer
	mux         *http.ServeMux
}

// New returns the API, checking the config.
func New(c Config) (*API, error) {
	if c.Gateway == nil || c.Bridge == nil {
		return nil, errors.New("httpapi: a gateway and its bridge are required")
	}
	a := &API{
		gw: c.Gateway, bridge: c.Bridge, callers: c.Callers, pages: c.Pages,
		jwks: c.JWKS, origPath: c.OriginalPath, maxRequest: c.MaxRequestSize, logger: c.Logger,
		obs: observe.Or(c.Observer),
	}
	if a.maxRequest <= 0 {
		a.maxRequest = DefaultMaxRequestSize
	}
	if a.logger == nil {
		a.logger = zap.NewNop()
	}
	var err error
	if a.corsOrigins, err = corsOrigins(c.PageOrigins); err != nil {
		return nil, err
	}
	if a.loopback, err = newLoopback(c.AllowedHosts); err != nil {
		return nil, err
	}
	list, err := newToolList(c.Gateway.Tools())
	if err != nil {
		return nil, err
	}
	a.list.Store(&list)
	c.Gateway.OnToolsChange(func(set *manifest.Set) {
		// The tools an upstream MCP server lists: their schemas compiled,
		// so they write.
		if l, err := newToolList(set); err == nil {
			a.list.Store(&l)
		} else {
			a.logger.Error("listing the changed tools", zap.Error(err))
		}
	})
	if err := checkSessionLimits(c.MCPSessions); err != nil {
		return nil, err
	}
	opts := mcp.Options{
		Logger: a.logger, Observer: a.obs,
		Sessions: c.MCPSessions, MaxRequestSize: a.maxRequest, Refuse: a.refuseSession,
	}
	if c.LocalIdentity != nil {
		if err := CheckLocalIdentity(*c.LocalIdentity, c.Callers != nil); err != nil {
			return nil, err
		}
		opts.LocalIdentity = *c.LocalIdentity
	}
	stateKey := sha256.Sum256(append([]byte("toolgate mcp request state\x00"), c.StateSeed...))
	opts.StateKey = stateKey[:]
	a.mcpServer = mcp.New(c.Gateway, opts)
	a.mcp = a.mcpHandler(a.mcpServer)
	a.routes()
	return a, nil
}

// CheckLocalIdentity checks the local identity of MCP calls: a user, with
// the installation if any, within the gateway's bounds, and only in
// loopback mode (callers false): with callers, each token names its user.
func CheckLocalIdentity(id gateway.Identity, callers bool) error {
	switch {
	case callers:
		return errors.New("mcp: identity is for loopback mode only, without callers: with callers, each token names its user")
	case id.User == "":
		return errors.New("mcp: identity names no user")
	}
	if err := gateway.CheckIdentity(id); err != nil {
		return fmt.Errorf("mcp: identity: %w", err)
	}
	return nil
}

// checkSessionLimits refuses negative MCP session limits, naming the
// option; zero is the default.
func checkSessionLimits(l mcp.SessionLimits) error {
	switch {
	case l.IdleTimeout < 0:
		return fmt.Errorf("mcp: session_idle_timeout %v must not be negative", l.IdleTimeout)
	case l.PerCaller < 0:
		return fmt.Errorf("mcp: max_sessions_per_caller %d must not be negative", l.PerCaller)
	case l.Total < 0:
		return fmt.Errorf("mcp: max_sessions %d must not be negative", l.Total)
	}
	return nil
}

// routes registers the API's patterns. Each path has its method's pattern
// and a catch-all that answers 405 (or 404 for a malformed id) as JSON,
// as ServeMux's own plain-text answers would not be.
func (a *API) routes() {
	a.mux = http.NewServeMux()
	a.handle("GET /tools", a.runtime(a.serveList))
	// {name}, one segment, is what every tool name is, and what ServeMux
	// matches with the least work; {name...} takes the rest, which names
	// no tool: the gateway answers it as unknown, as any other.
	a.handle("POST /tools/{name}", a.runtime(a.serveInvoke))
	a.handle("POST /tools/{name...}", a.runtime(a.serveInvoke))
	// With callers, a call's answer and its resume answer CORS too:
	// <toolgate-card> on a page origin polls and resumes the call it
	// shows, with the caller's token. Without callers the envelope names
	// any user, and a page origin is no runtime caller (runtimeCORS).
	a.handle("GET /calls/{id}", a.runtimeCORS(a.callID(a.runtime(a.serveStatus))))
	a.handle("POST /calls/{id}/resume", a.runtimeCORS(a.callID(a.runtime(a.serveResume))))
	// What waits for the caller, for a page that shows its cards.
	a.handle("GET /waiting", a.runtimeCORS(a.runtime(a.serveWaiting)))
	// A user's connections: which are made, and undoing one's own.
	a.handle("GET /connections", a.runtimeCORS(a.runtime(a.serveConnections)))
	a.handle("DELETE /connections/{name}", a.runtimeCORS(a.runtime(a.serveDisconnect)))
	// The service's way back, guarded by its state alone (serveCallback).
	a.handle("GET /connections/{name}/callback", a.serveCallback)
	a.handle("POST /page-context", a.runtime(a.servePageContext))
	a.handle("GET /.well-known/jwks.json", a.serveJWKS)
	a.handle("/mcp", a.serveMCP)
	if a.publishesMetadata() {
		a.handle("GET "+metadataPath, a.serveMetadata)
		a.handle("GET "+metadataPath+"/mcp", a.serveMetadata)
		// The metadata is fetched cross-origin (browser-based clients):
		// the SDK's handler answers the preflight, and 405 to the rest.
		a.handle(metadataPath, a.serveMetadata)
		a.handle(metadataPath+"/mcp", a.serveMetadata)
	}

	a.handle("/tools", only(http.MethodGet))
	a.handle("/tools/{name...}", only(http.MethodPost))
	a.handle("/calls/{id}", a.runtimeCORS(a.callID(only(http.MethodGet))))
	a.handle("/calls/{id}/resume", a.runtimeCORS(a.callID(only(http.MethodPost))))
	a.handle("/calls/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "unknown_call", "no such call")
	})
	a.handle("/waiting", a.runtimeCORS(only(http.MethodGet)))
	a.handle("/connections", a.runtimeCORS(only(http.MethodGet)))
	a.handle("/connections/{name}", a.runtimeCORS(only(http.MethodDelete)))
	a.handle("/connections/{name}/callback", only(http.MethodGet))
	a.handle("/connections/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such connection endpoint")
	})
	a.handle("/page-context", only(http.MethodPost))
	a.handle("/.well-known/jwks.json", only(http.MethodGet))

	// The page endpoints answer CORS first, preflights included.
	for _, name := range scripts {
		a.handle("GET /"+name, a.cors(serveFile(web.Files[name])))
		a.handle("/"+name, a.cors(only(http.MethodGet)))
	}
	a.handle("GET /playground", a.servePlayground)
	a.handle("/playground", only(http.MethodGet))
	a.handle("GET /client/calls", a.cors(a.page(a.serveStream)))
	a.handle("/client/calls", a.cors(only(http.MethodGet)))
	a.handle("POST /client/calls/{id}/claim", a.cors(a.pageCallID(a.page(a.serveClaim))))
	a.handle("POST /client/calls/{id}/result", a.cors(a.pageCallID(a.page(a.servePost))))
	a.handle("/client/calls/{id}/claim", a.cors(a.pageCallID(only(http.MethodPost))))
	a.handle("/client/calls/{id}/result", a.cors(a.pageCallID(only(http.MethodPost))))
	a.handle("/client/{rest...}", a.cors(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such page endpoint")
	}))

	// Every other path is not the API's: these handlers write nothing, and
	// Serve tells them by their pattern. "/calls" and "/client" have their
	// own, or ServeMux would redirect them to the subtrees "/calls/…" and
	// "/client/…".
	for _, p := range notOurs {
		a.handle(p, func(http.ResponseWriter, *http.Request) {})
	}
}

// handle registers a route.
func (a *API) handle(pattern string, h http.HandlerFunc) {
	a.mux.HandleFunc(pattern, h)
}

// Serve answers a request on one of the API's paths and reports true; it
// reports false, writing nothing, for any other path, which is not the
// API's to answer (the Caddy module passes it to the next handler).
func (a *API) Serve(w http.ResponseWriter, r *http.Request) bool {
	// ServeMux answers a path that is not clean with a redirect to the
	// clean one, and "OPTIONS *" with 400: neither is the API's.
	if r.RequestURI == "*" || !isClean(r.URL.EscapedPath()) {
		return false
	}
	// One lookup: ServeMux records the pattern it chose in the request.
	a.mux.ServeHTTP(w, r)
	return !slices.Contains(notOurs, r.Pattern)
}

// notOurs are the patterns of the paths that are not the API's.
var notOurs = []string{"/", "/calls", "/client"}

// isClean reports whether ServeMux would take the path as it is: rooted,
// without "//", "." or ".." segments (a final slash may stay).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return c == p || (c+"/" == p && c != "/")
}

// ServeHTTP serves the API's paths, and 404 for any other.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.Serve(w, r) {
		http.NotFound(w, r)
	}
}

// only answers 405 naming the method a path takes.
func only(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { methodNotAllowed(w, method) }
}

// callID answers 404 for a call id the core's rule refuses, before
// anything else is looked at: no call can have it.
func (a *API) callID(next http.HandlerFunc) http.HandlerFunc {
	return checkCallID(next, "unknown_call", "no such call")
}

// pageCallID is callID for the page endpoints, which answer a malformed id
// as an unknown endpoint.
func (a *API) pageCallID(next http.HandlerFunc) http.HandlerFunc {
	return checkCallID(next, "not_found", "no such page endpoint")
}

func checkCallID(next http.HandlerFunc, code, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if gateway.CheckCallID(r.PathValue("id")) != nil {
			writeError(w, http.StatusNotFound, code, msg)
			return
		}
		next(w, r)
	}
}

func (a *API) serveJWKS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(a.jwks)
}
