// Package caddymodule is toolgate's Caddy glue: the http.handlers.toolgate
// module and its Caddyfile directive. It maps Caddy's config, placeholders,
// storage and listeners onto the Caddy-free packages: the core in
// internal/gateway and the HTTP surface in internal/httpapi.
package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/httpapi"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/mcp"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/result"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("toolgate", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("toolgate", httpcaddyfile.Before, "respond")
}

// Handler serves an app's tools: it validates each call's input, sends it
// to the tool's target with the signed identity of the user, and normalizes
// the answer into a tool result. The paths it answers, relative to where it
// is mounted, are internal/httpapi's; it passes every other request to the
// next handler.
//
// With no caller authentication configured, runtime calls are accepted
// only straight from this machine: from a loopback client through no
// untrusted proxy, with a loopback Host (or one of AllowedHosts), and from
// no other web origin than the site's own or one of the pages origins.
// Every POST body must be sent as application/json.
type Handler struct {
	// Manifests are files declaring tools: JSON,
	// {"tools": [{"name", "displayName", "description", "input_schema", "target"}]},
	// or TypeScript (.ts, .mts) with Zod schemas, compiled each time the
	// config loads by the kit's toolgate-tools: the nearest
	// node_modules/.bin/toolgate-tools in the file's folder or a parent,
	// else the one on PATH. A TypeScript manifest needs node on PATH; it is
	// the author's code, run as the gateway's user with its environment.
	Manifests []string `json:"manifests,omitempty"`

	// Tools are declared inline, in the same shape as a manifest's tools.
	Tools []manifest.Tool `json:"tools,omitempty"`

	// OpenAPI imports OpenAPI documents' operations as tools.
	OpenAPI []*OpenAPI `json:"openapi,omitempty"`

	// Components are the app's own components that app targets run on,
	// by name.
	Components map[string]*Component `json:"components,omitempty"`

	// MCPServers are upstream MCP servers, by name, whose tools the
	// gateway serves beside its own (docs/mcp-servers.md).
	MCPServers map[string]*MCPServer `json:"mcp_servers,omitempty"`

	// Identity configures the tokens that tell components who the user is.
	Identity *Identity `json:"identity,omitzero"`

	// Callers configures caller authentication. Unset, runtime calls are
	// accepted only straight from this machine (see the type's comment),
	// with the identity the envelope names.
	Callers *Callers `json:"callers,omitzero"`

	// MCP configures the MCP endpoint, /mcp.
	MCP *MCP `json:"mcp,omitzero"`

	// Pages configures the page tokens of the client-tool endpoints. Unset,
	// those endpoints answer 404 and client tools time out.
	Pages *Pages `json:"pages,omitzero"`

	// ClientToolTimeout is how long a client tool call waits for its page.
	// Default: 120s.
	ClientToolTimeout caddy.Duration `json:"client_tool_timeout,omitzero"`

	// AllowedHosts are the Host names (name, or name:port) that runtime
	// calls may name besides loopback names when no callers are
	// configured, and that /mcp accepts on a loopback listener: the names
	// by which this machine itself is reached. A foreign Host on a
	// loopback connection is how DNS rebinding reaches a local server.
	// Default: none.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`

	// Ledger configures the call ledger. Default: bolt, a file in Caddy's
	// data directory.
	Ledger *Ledger `json:"ledger,omitzero"`

	// UpstreamTimeout limits one request to a target, answer included.
	// Default: 30s.
	UpstreamTimeout caddy.Duration `json:"upstream_timeout,omitzero"`

	// MaxResponseSize is the hard limit, in bytes, on a target's answer;
	// a larger answer is an error result. Default: 1 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitzero"`

	// MaxRequestSize is the limit, in bytes, on an invoke's envelope; a
	// larger one is refused with 413. Default: 1 MiB.
	MaxRequestSize int64 `json:"max_request_size,omitzero"`

	// DisableMetrics keeps toolgate's metrics (caddy_toolgate_*) off
	// Caddy's registry. Default: false (metrics on).
	DisableMetrics bool `json:"disable_metrics,omitzero"`

	// Limits are quotas over all tools together ("1000/1d per install"),
	// beside each tool's own (docs/governance.md).
	Limits []string `json:"limits,omitempty"`

	// Audit is the file the audit trail is appended to; AuditInputs puts
	// each call's input in its entries too. Default: no trail.
	Audit       string `json:"audit,omitempty"`
	AuditInputs bool   `json:"audit_inputs,omitzero"`

	// Connections are services at which each user connects their own
	// account, by name (docs/connections.md).
	Connections map[string]*Connection `json:"connections,omitempty"`
	// ConnectionKeys are the files of the keys that seal the users'
	// tokens in the store (32 bytes in base64 each): the first seals,
	// every one opens. Default: a key generated once and kept in Caddy's
	// storage. Instances on one Redis need the same keys.
	ConnectionKeys []string `json:"connection_keys,omitempty"`

	api      *httpapi.API
	gw       *gateway.Gateway
	client   *outbound.Client
	logger   *zap.Logger
	storeKey string              // this config's reference in stores, once provisioned
	pages    *clienttools.Bridge // this config's view of the store's bridge
	ups      *upstreams          // the upstream MCP servers, running
	trail    *audit.Trail        // the audit trail, when configured
}

// Component is one of the app's components.
type Component struct {
	// BaseURL is the component's absolute http(s) URL; a target's path is
	// appended to it. Or unix//PATH: the component listens on the unix
	// socket at the absolute PATH, and a target's path is the whole path
	// (a socket address has no base path); requests say Host: localhost.
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
	TTL caddy.Duration `json:"ttl,omitzero"`
}

// IdentityKey is a named identity key.
type IdentityKey struct {
	// ID is the key's kid.
	ID string `json:"id"`
	// File is a PEM file holding a PKCS #8 Ed25519 private key.
	File string `json:"file"`
}

// MCP configures the MCP endpoint.
type MCP struct {
	// Identity is who MCP calls act for when they name no identity in
	// _meta: the one user of a single-user gateway, so that a desktop MCP
	// client on this machine can call app tools with no toolgate-specific
	// configuration. Only without Callers (loopback mode), where any local
	// process may name any user anyway; with Callers each token names its
	// user. Default: none (a call acts for no user).
	Identity *MCPIdentity `json:"identity,omitzero"`

	// EmbedOrigins are origins (scheme://host[:port]) whose pages may be
	// shown as embeds: a url target's embedUrl must be on one of them (or
	// the answer is an error result naming it), and the MCP Apps view may
	// frame them besides the components' own: the site an app's pages are
	// reached through when that is not the
	// component's address (a reverse_proxy route beside toolgate). Hosts
	// frame only the view's frameDomains, the components' origins and
	// these. Default: none.
	EmbedOrigins []string `json:"embed_origins,omitempty"`

	// SessionIdleTimeout closes an MCP session (clients of the revisions
	// before 2026-07-28; the sessionless revision opens none) that has
	// had no request for this long; a GET stream held open is not a
	// request. A caller's session also ends when the token it was opened
	// with stops being accepted (exp and the callers leeway), unless a
	// request on it brought a later token of the same caller.
	// Default: 10m.
	SessionIdleTimeout caddy.Duration `json:"session_idle_timeout,omitzero"`

	// MaxSessionsPerCaller caps the open MCP sessions of one caller: with
	// callers, a token's user and installation; in loopback mode, the one
	// local caller, whose sessions are all counted together. A new
	// session over it is refused with 429 and Retry-After, naming this
	// option. Default: 64.
	MaxSessionsPerCaller int `json:"max_sessions_per_caller,omitzero"`

	// MaxSessions caps the open MCP sessions in all, refused as over
	// MaxSessionsPerCaller. Default: 10000.
	MaxSessions int `json:"max_sessions,omitzero"`
}

// embedOrigins are the EmbedOrigins as result.EmbedOrigin writes them,
// checked; none for no mcp block.
func (m *MCP) embedOrigins() ([]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make([]string, len(m.EmbedOrigins))
	for i, o := range m.EmbedOrigins {
		var err error
		if out[i], err = result.EmbedOrigin(o); err != nil {
			return nil, fmt.Errorf("mcp: embed_origins: %w", err)
		}
	}
	return out, nil
}

// MCPIdentity is the user, and optionally the installation, that MCP
// calls act for.
type MCPIdentity struct {
	// User is the user's id, as app targets are told it (sub).
	User string `json:"user"`
	// Install is the installation's id. Default: none.
	Install string `json:"install,omitempty"`
}

// sessionLimits are the configured MCP session limits; zero fields take
// the defaults, and httpapi.New refuses negative ones, naming them.
func (m *MCP) sessionLimits() mcp.SessionLimits {
	if m == nil {
		return mcp.SessionLimits{}
	}
	return mcp.SessionLimits{IdleTimeout: time.Duration(m.SessionIdleTimeout), PerCaller: m.MaxSessionsPerCaller, Total: m.MaxSessions}
}

// localIdentity is the configured MCP identity, or nil. httpapi.New
// checks it (httpapi.CheckLocalIdentity), as the Caddyfile adapter does to
// name the line.
func (h *Handler) localIdentity() *gateway.Identity {
	if h.MCP == nil || h.MCP.Identity == nil {
		return nil
	}
	return &gateway.Identity{User: h.MCP.Identity.User, Install: h.MCP.Identity.Install}
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
//
// A config error is also logged here, as toolgate's own message: Caddy
// returns it behind its module chain ("loading http app module: provision
// http: server srv0: setting up route handlers: ..."), which would
// otherwise be the first thing a user reads.
func (h *Handler) Provision(ctx caddy.Context) error {
	logger := ctx.Logger()
	err := h.provision(ctx, logger)
	if err != nil {
		logger.Error("toolgate config: " + err.Error())
	}
	return err
}

// provision is all-or-nothing: everything that can fail on its own is
// done before the store is taken from the pool, and the store's reference
// is given back if what follows it fails; nothing the config still
// serving uses is changed (the pages' limits are this config's view of
// the shared bridge).
func (h *Handler) provision(ctx caddy.Context, logger *zap.Logger) (err error) {
	h.logger = logger
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
		if components[name], err = dispatch.NewComponent(name, c.BaseURL, env); err != nil {
			return err
		}
	}
	if err := h.checkConnectionNames(); err != nil {
		return err
	}
	callers, pages, err := h.authenticators(ctx, repl)
	if err != nil {
		return err
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

	// The upstream MCP servers run from here on: whatever fails below
	// stops them again.
	ups, err := h.startUpstreams(repl, logger, issuer)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			ups.close()
			return
		}
		h.ups = ups
	}()
	env := ups.env
	env.Components = components
	env.Connections = h.connectionNames()
	var docs []manifest.Source
	for _, o := range h.OpenAPI {
		src, err := o.source(ctx, repl, logger)
		if err != nil {
			return err
		}
		docs = append(docs, src)
	}
	tools, err := manifest.LoadIn(h.Manifests, h.Tools, env, docs...)
	if err != nil {
		return err
	}
	if tools, err = ups.addTo(tools); err != nil {
		return err
	}

	lc := h.Ledger
	if lc == nil {
		lc = new(Ledger)
	}
	if err := lc.checkRetention(time.Duration(h.UpstreamTimeout), time.Duration(h.ClientToolTimeout)); err != nil {
		return err
	}
	allLimits, err := quota.ParseAll(h.Limits)
	if err != nil {
		return err
	}
	if err := lc.checkWindows(allLimits, tools); err != nil {
		return err
	}
	limits, err := h.Pages.limits()
	if err != nil {
		return err
	}
	embeds, err := h.MCP.embedOrigins()
	if err != nil {
		return err
	}
	conns, connKeys, err := h.connectionConfigs(ctx, repl)
	if err != nil {
		return err
	}
	obs, err := h.observer(ctx, lc, tools)
	if err != nil {
		return err
	}

	st, storeKey, err := lc.open(repl, h.logger)
	if err != nil {
		return err
	}
	led := observe.ObservedLedger(st.Ledger(), lc.backend(), obs)
	bridge := st.bridge.WithLimits(limits)
	defer func() {
		if err != nil {
			_, _ = stores.Delete(storeKey)
			return
		}
		h.storeKey, h.pages = storeKey, bridge
	}()
	var trail gateway.Auditor
	if h.Audit != "" {
		// err, not a new one in this block: the deferred close below
		// must see whether the provision as a whole failed.
		var file string
		if file, err = resolve(repl, "audit", h.Audit); err != nil {
			return err
		}
		var t *audit.Trail
		if t, err = audit.Open(file, h.logger); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		defer func() {
			if err != nil {
				_ = t.Close()
				return
			}
			h.trail = t
		}()
		trail = t
	}
	connections, err := h.connections(conns, connKeys, st.Connections(), issuer, obs)
	if err != nil {
		return err
	}
	h.client = outbound.NewClient(time.Duration(h.UpstreamTimeout), h.MaxResponseSize)
	h.gw = gateway.New(gateway.Config{
		Tools: tools, Issuer: issuer, Client: h.client,
		Ledger: led, Logger: h.logger,
		Bridge: bridge, ClientTimeout: time.Duration(h.ClientToolTimeout),
		Observer: obs, EmbedOrigins: embeds,
		Limits: allLimits, Audit: trail, AuditInputs: h.AuditInputs,
		Connections: connections,
	})
	cfg := httpapi.Config{
		Gateway: h.gw, Bridge: bridge, Callers: callers, Pages: pages,
		AllowedHosts: h.AllowedHosts, OriginalPath: originalPath,
		LocalIdentity: h.localIdentity(), MCPSessions: h.MCP.sessionLimits(),
		JWKS: issuer.JWKS(), StateSeed: key.Private.Seed(),
		MaxRequestSize: h.MaxRequestSize, Logger: h.logger, Observer: obs,
	}
	if h.Pages != nil {
		cfg.PageOrigins = h.Pages.Origins
	}
	if h.api, err = httpapi.New(cfg); err != nil {
		return err
	}
	ups.serve(h.gw.Tools, h.gw.SetTools, obs)
	h.logger.Info("toolgate ready", zap.Int("tools", len(tools.List())), zap.String("kid", key.ID), zap.String("mcp_servers", ups.describe()))
	return nil
}

// metrics are toolgate's collectors, one set for the process: Caddy makes
// a registry per config load, and each load registers these same ones on
// it, so that a reload goes on counting from where the last config was.
var metrics = observe.NewCollectors()

// observer registers the metrics on this config's registry and returns
// the observer of its tools, or observe.Nop when metrics are off.
func (h *Handler) observer(ctx caddy.Context, lc *Ledger, tools *manifest.Set) (observe.Observer, error) {
	reg := ctx.GetMetricsRegistry()
	if h.DisableMetrics || reg == nil {
		return observe.Nop, nil
	}
	if err := metrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	list := tools.List()
	labelled := make([]observe.Tool, len(list))
	for i, t := range list {
		labelled[i] = observedTool(t, len(h.Limits) > 0)
	}
	return metrics.Observer(lc.backend(), labelled), nil
}

// observedTool is how a tool's metrics are labelled; limitedAll says
// whether quotas over all tools count it.
func observedTool(t *manifest.Compiled, limitedAll bool) observe.Tool {
	return observe.Tool{
		Name: t.Name, TargetType: t.Target.Kind().Name(),
		Approval: t.Approval != nil, Limited: limitedAll || len(t.Limits) > 0,
	}
}

// originalPath is the request's path before any route rewrote it or
// stripped the mount (handle_path), as its client sent it.
func originalPath(r *http.Request) string {
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		return or.URL.Path
	}
	return r.URL.Path
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

// Cleanup stops the gateway's background work, then releases idle
// upstream connections and this config's hold on the store (the ledger
// and the bridge on its relay): the gateway's retries write to that
// ledger, so they end first.
func (h *Handler) Cleanup() error {
	if h.gw != nil {
		if err := h.gw.Close(); err != nil {
			h.logger.Error("closing the gateway", zap.Error(err))
		}
	}
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	h.ups.close()
	h.ups = nil
	if h.trail != nil {
		// After the gateway closed: its calls' last lines are written.
		if err := h.trail.Close(); err != nil {
			h.logger.Error("closing the audit trail", zap.Error(err))
		}
		h.trail = nil
	}
	if h.storeKey != "" {
		_, err := stores.Delete(h.storeKey)
		h.storeKey = ""
		return err
	}
	return nil
}

// ServeHTTP answers the API's paths and passes on the rest.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.api.Serve(w, r) {
		return nil
	}
	return next.ServeHTTP(w, r)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
