package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/upstream"
)

// MCPServer is an upstream MCP server whose tools the gateway serves
// beside its own, under the same rules: input validated against the
// server's schema, allow policies, the ledger, identity, cards.
type MCPServer struct {
	// URL is the server's Streamable HTTP endpoint: https, http only to a
	// loopback address, or unix//PATH. Exclusive with Command.
	URL string `json:"url,omitempty"`

	// Command starts the server as a child of the gateway, speaking MCP
	// over stdio: the program and its arguments. It is started once per
	// loaded config, restarted with backoff when it exits, and stopped on
	// reload and shutdown; its stderr goes to the log.
	Command []string `json:"command,omitempty"`

	// Env is the command's environment, besides PATH, HOME and LANG: the
	// gateway's own is not passed on. Values may be placeholders such as
	// {env.CRM_KEY}, resolved at load.
	Env map[string]string `json:"env,omitempty"`

	// Dir is the command's working directory. Default: the gateway's.
	Dir string `json:"dir,omitempty"`

	// Tools are the server's tools to serve, by their names there.
	// Default: all it lists.
	Tools []string `json:"tools,omitempty"`

	// Prefix goes before each tool's name in the gateway's list. Names
	// must stay unique across all tools.
	Prefix string `json:"prefix,omitempty"`

	// Headers are sent on every request; values may be placeholders,
	// resolved at load.
	Headers map[string]string `json:"headers,omitempty"`

	// Identity sends each call the user's identity token, as app
	// components get it, in Authorization: Bearer, with aud the server's
	// name. The gateway's own requests (connecting, listing) carry a
	// token with an empty sub.
	Identity bool `json:"identity,omitzero"`

	// Connection sends each call the calling user's token of the named
	// connection in Authorization: Bearer instead (docs/connections.md); the
	// tool list is read with the static headers only.
	Connection string `json:"connection,omitempty"`

	// Allow is an allow expression (expr-lang, as a tool's allow) for
	// every tool the server lists: a caller it refuses neither sees nor
	// calls them. Default: every caller may.
	Allow string `json:"allow,omitempty"`

	// Approval and Limits are every listed tool's approval rule and
	// quotas, as a tool's own (each tool counted on its own).
	Approval *manifest.Approval `json:"approval,omitzero"`
	Limits   []string           `json:"limits,omitempty"`

	// Timeout bounds connecting, listing and each call. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitzero"`

	// MaxResultSize bounds an answer, in bytes. Default: the handler's
	// max_response_size.
	MaxResultSize int64 `json:"max_result_size,omitzero"`
}

// UnmarshalCaddyfile sets up the server from
// `<name> <url> {…}` or `<name> command <program> <args…> {…}`.
func (m *MCPServer) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume the server's name
	args := d.RemainingArgs()
	switch {
	case len(args) == 1 && args[0] != "command":
		m.URL = args[0]
	case len(args) >= 2 && args[0] == "command":
		m.Command = args[1:]
	case len(args) == 0:
	default:
		return d.Err("want: mcp_server <name> <url> | mcp_server <name> command <program> [<args>…]")
	}
	return parseBlock(d, "mcp_server subdirective", map[string]option{
		"url": stringArg(&m.URL),
		"command": func(d *caddyfile.Dispenser) error {
			if len(m.Command) > 0 {
				return d.Err("command already specified")
			}
			m.Command = d.RemainingArgs()
			if len(m.Command) == 0 {
				return d.ArgErr()
			}
			return nil
		},
		"env":    pairArg(&m.Env, ""),
		"dir":    stringArg(&m.Dir),
		"tools":  listArg(&m.Tools),
		"prefix": stringArg(&m.Prefix),
		"header": pairArg(&m.Headers, ""),
		"identity": func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			m.Identity = true
			return nil
		},
		"connection":      stringArg(&m.Connection),
		"allow":           stringArg(&m.Allow),
		"approval":        approvalArg(&m.Approval, ""),
		"limit":           limitArg(&m.Limits, ""),
		"timeout":         durationArg(&m.Timeout, true),
		"max_result_size": sizeArg(&m.MaxResultSize),
	})
}

// config is the server's upstream.Config, placeholders resolved.
func (m *MCPServer) config(repl *caddy.Replacer, name string, maxResponse int64) (upstream.Config, error) {
	if m == nil {
		return upstream.Config{}, fmt.Errorf("mcp server %q: no config", name)
	}
	c := upstream.Config{
		Name: name, Command: slices.Clone(m.Command), Dir: m.Dir, Tools: m.Tools, Prefix: m.Prefix,
		Identity: m.Identity, Connection: m.Connection, Timeout: time.Duration(m.Timeout), MaxResultSize: m.MaxResultSize, Allow: m.Allow,
		Approval: m.Approval, Limits: m.Limits,
	}
	if err := checkGovernance(m.Approval, m.Limits); err != nil {
		return c, fmt.Errorf("mcp server %q: %w", name, err)
	}
	if m.Allow != "" {
		// Checked here: compiled with each tool the server lists, a bad
		// expression would leave every one of them out.
		if _, err := policy.Compile(m.Allow); err != nil {
			return c, fmt.Errorf("mcp server %q: allow: %w", name, err)
		}
	}
	if c.MaxResultSize == 0 {
		c.MaxResultSize = maxResponse
	}
	server := fmt.Sprintf("mcp server %q: ", name)
	var err error
	if c.URL, err = resolve(repl, server+"url", m.URL); err != nil {
		return c, err
	}
	if c.Env, err = resolveEach(repl, server+"env", m.Env); err != nil {
		return c, err
	}
	if c.Headers, err = resolveEach(repl, server+"header", m.Headers); err != nil {
		return c, err
	}
	return c, c.Check()
}

// declared stands for a declared server when the Caddyfile is adapted:
// inline tools compile against it, and it is never called.
type declared struct {
	name       string
	identity   bool
	connection string
}

func (s declared) Name() string        { return s.name }
func (s declared) SendsIdentity() bool { return s.identity }
func (s declared) Connection() string  { return s.connection }
func (s declared) Call(context.Context, dispatch.MCPCall) dispatch.Outcome {
	return dispatch.Outcome{Result: result.Failure("mcp server %s is not running", s.name)}
}

// declaredServers are the servers as adapting the Caddyfile knows them.
func (h *Handler) declaredServers() map[string]dispatch.MCPServer {
	out := make(map[string]dispatch.MCPServer, len(h.MCPServers))
	for name, m := range h.MCPServers {
		if m != nil {
			out[name] = declared{name: name, identity: m.Identity, connection: m.Connection}
		}
	}
	return out
}

// upstreams are a config's upstream MCP servers, running.
type upstreams struct {
	logger  *zap.Logger
	servers map[string]*upstream.Server
	env     dispatch.Env

	mu sync.Mutex // orders syncs: each starts from the tools the last left
	// set, once the gateway is built, takes each server's new tools.
	set   func() (*manifest.Set, func(*manifest.Set))
	track func([]observe.Tool)
	// up records a server's session coming and going (metrics), once the
	// gateway is built.
	up func(server string, up bool)
}

// startUpstreams checks the servers' configs and starts them, all at
// once, each waiting at most its timeout for its first list. A server
// that does not answer is not an error: its tools come when it does.
func (h *Handler) startUpstreams(repl *caddy.Replacer, logger *zap.Logger, issuer *identity.Issuer) (*upstreams, error) {
	u := &upstreams{logger: logger, servers: map[string]*upstream.Server{}}
	maxResponse := h.MaxResponseSize
	if maxResponse == 0 {
		maxResponse = upstream.DefaultMaxResultSize
	}
	for _, name := range slices.Sorted(maps.Keys(h.MCPServers)) {
		if _, clash := h.Components[name]; clash {
			return nil, fmt.Errorf("mcp server %q: a component has the same name; identity tokens name their audience by it", name)
		}
		cfg, err := h.MCPServers[name].config(repl, name, maxResponse)
		if err != nil {
			return nil, err
		}
		srv, err := upstream.New(cfg, upstream.Options{
			Logger:        logger,
			Authorization: issuer.Authorization,
			Changed:       func(s *upstream.Server) { u.sync(s.Name()) },
			State:         func(up bool) { u.state(name, up) },
			Version:       gatewayVersion(),
		})
		if err != nil {
			return nil, err
		}
		u.servers[name] = srv
	}
	var wg sync.WaitGroup
	for name, srv := range u.servers {
		wg.Go(func() {
			if err := srv.Start(); err != nil {
				logger.Warn("mcp server not reachable at load; its tools answer an error until it is", zap.String("mcp_server", name), zap.Error(err))
			}
		})
	}
	wg.Wait()
	u.env = dispatch.Env{Servers: make(map[string]dispatch.MCPServer, len(u.servers))}
	for name, srv := range u.servers {
		u.env.Servers[name] = srv
	}
	return u, nil
}

// toolsOf are the tools srv lists, or, before it has listed any, a
// placeholder for each tool the config names.
func toolsOf(srv *upstream.Server) []manifest.Tool {
	tools, known := srv.Tools()
	if known {
		return tools
	}
	var out []manifest.Tool
	for _, name := range srv.Configured() {
		out = append(out, srv.Placeholder(name))
	}
	return out
}

// addTo adds every server's tools to set, for a config being loaded: a
// name clash is a config error, naming both tools. A tool that does not
// compile (a schema the gateway cannot read, a name it does not take) is
// left out and logged: the server is someone else's, and one bad tool of
// it must not stop the gateway.
func (u *upstreams) addTo(set *manifest.Set) (*manifest.Set, error) {
	for _, name := range slices.Sorted(maps.Keys(u.servers)) {
		var errs []error
		env := u.env
		set, errs = set.WithServer(name, toolsOf(u.servers[name]), env)
		var clashes []error
		for _, err := range errs {
			if _, ok := errors.AsType[*manifest.ClashError](err); ok {
				clashes = append(clashes, err)
			} else {
				u.logger.Error("mcp server's tool left out", zap.String("mcp_server", name), zap.Error(err))
			}
		}
		if len(clashes) > 0 {
			return nil, errors.Join(clashes...)
		}
	}
	return set, nil
}

// sync serves the server's tools as it lists them now. A tool that
// clashes with another, or does not compile, is left out and logged.
func (u *upstreams) sync(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.set == nil {
		return // the config is still loading; it reads the lists itself
	}
	cur, replace := u.set()
	next, errs := cur.WithServer(name, toolsOf(u.servers[name]), u.env)
	for _, err := range errs {
		u.logger.Error("mcp server's tool left out", zap.String("mcp_server", name), zap.Error(err))
	}
	if u.track != nil {
		var tracked []observe.Tool
		for _, t := range next.List() {
			tracked = append(tracked, observedTool(t, false))
		}
		u.track(tracked)
	}
	replace(next)
	u.logger.Info("mcp server's tools changed", zap.String("mcp_server", name), zap.Int("tools", len(next.List())))
}

// state records a server's session coming or going.
func (u *upstreams) state(name string, up bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.up != nil {
		u.up(name, up)
	}
}

// serve starts following the servers' lists into the gateway's tools and
// their sessions into the metrics, and syncs each once: a list may have
// changed while the config loaded.
func (u *upstreams) serve(current func() *manifest.Set, replace func(*manifest.Set), obs observe.Observer) {
	u.mu.Lock()
	u.set = func() (*manifest.Set, func(*manifest.Set)) { return current(), replace }
	if m, ok := obs.(*observe.Metrics); ok {
		u.track, u.up = m.Track, m.MCPServer
		for name, srv := range u.servers {
			m.MCPServer(name, srv.Connected())
		}
	}
	u.mu.Unlock()
	for name := range u.servers {
		u.sync(name)
	}
}

// close stops every server.
func (u *upstreams) close() {
	if u == nil {
		return
	}
	var wg sync.WaitGroup
	for _, srv := range u.servers {
		wg.Go(func() { _ = srv.Close() })
	}
	wg.Wait()
}

// describe lists the servers for the ready log line.
func (u *upstreams) describe() string {
	return strings.Join(slices.Sorted(maps.Keys(u.servers)), " ")
}

// gatewayVersion is the version told to upstream servers.
func gatewayVersion() string {
	simple, _ := caddy.Version()
	return simple
}
