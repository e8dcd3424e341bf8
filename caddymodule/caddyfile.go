package caddymodule

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/httpapi"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/quota"
)

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var t Handler
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return &t, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	toolgate {
//		manifest <file.json | file.ts>
//		component <name> <base_url> {
//			env <key> <value>
//		}
//		identity {
//			issuer      <iss>
//			key_file    <pem>
//			key         <id> <pem>
//			signing_key <id>
//			ttl         <duration>
//		}
//		callers {
//			jwks_url | key_file | secret <value>
//			issuer        <iss>
//			audience      <aud>
//			leeway        <duration>
//			user_claim    <claim>
//			install_claim <claim>
//			authorization_server <issuer url...>
//			resource      <canonical /mcp url>
//			scopes        <scope...>
//		}
//		mcp {
//			identity <user> [<install>]   (loopback mode only)
//			embed_origins <origin...>     (embeds the MCP Apps view may frame)
//			session_idle_timeout    <duration>
//			max_sessions_per_caller <n>
//			max_sessions            <n>
//		}
//		ledger bolt [<path>] | redis <[redis[s]://]host:port> | off {
//			retention   <duration>
//			max_result_size <size>   (kept for a repeat; default 64KiB)
//			fsync       [on | off]   (bolt: wait for the disk on each commit; default on)
//			password    <redis password>
//			db          <redis db>
//			prefix      <redis key prefix>
//			tls                      (redis: connect over TLS; rediss:// too)
//			tls_ca_file <pem>        (redis: trust this CA, not the system's)
//			allow_eviction           (redis: accept a maxmemory-policy that evicts)
//			replicas    <n>          (redis: each write waits for n replicas)
//		}
//		pages {
//			jwks_url | key_file | secret <value>
//			issuer   <iss>
//			audience <aud>
//			leeway   <duration>
//			install_claim <claim>
//			origins  <origin...>
//			max_pending_per_thread <n>
//			max_pending_per_user   <n>
//			max_pending            <n>
//			max_streams_per_token  <n>
//			max_streams_per_thread <n>
//			max_streams            <n>
//		}
//		openapi <file or https URL> {
//			component <name> | server <url>
//			operations <operationId...>
//			prefix   <prefix>
//			header   <name> <value>    (server)
//		}
//		mcp_server <name> <url> | command <program> [<args...>] {
//			tools    <tool...>         (default: all it lists)
//			prefix   <prefix>
//			header   <name> <value>    (url)
//			env      <name> <value>    (command)
//			dir      <path>            (command)
//			identity                   (send the user's identity token)
//			connection <name>          (url: send the user's token of a connection)
//			allow    <expression>      (for every tool it lists)
//			approval ["<condition>"] { title <text> … }
//			limit    <quota>
//			timeout  <duration>        (default 30s)
//			max_result_size <size>     (default: max_response_size)
//		}
//		connection <name> {
//			title         <text>
//			authorize_url <url>
//			token_url     <url>
//			client_id     <id>
//			client_secret <secret>
//			client_auth   basic | post
//			scopes        <scope...>
//			redirect_url  <url>        (default: derived from the request)
//			param         <name> <value>
//			exchange      <url>        (RFC 8693, instead of the flow)
//			audience      <aud>        (exchange)
//		}
//		connection_keys <file...>
//		client_tool_timeout <duration>
//		allowed_hosts     <host...>
//		upstream_timeout  <duration>
//		max_response_size <size>
//		max_request_size  <size>
//		metrics off
//		tool <name> {
//			description  <text>
//			display_name <text>
//			input_schema <json>
//			target app <component> <method> <path>
//			target url <method> <url>
//			target kazzle <client_tool>
//			target mcp <mcp_server> <tool>
//			query  <key> <value>
//			header <name> <value>
//			body   <json>
//			component <name>
//			allow  <expression>
//			result <expression>
//			ui     on | off
//		}
//	}
//
// manifest, openapi, component, mcp_server, connection, connection_keys,
// allowed_hosts and tool may repeat, and so may key, env, origins,
// authorization_server, scopes, param, query and header in their blocks.
// A tool's component line lets a url target use that component's env in
// ${env.NAME} references. A
// body that is not valid JSON is taken as a JSON string, so `body ${input}`
// sends the whole input. `ui off` keeps an app tool's answers out of the
// MCP Apps view (they are plain MCP results, as for any other client).
// Inline tools are checked when the Caddyfile is adapted; errors name the
// file and line.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	var at []caddyfile.Token // where each inline tool is declared
	err := parseBlock(d, "subdirective", map[string]option{
		"manifest": func(d *caddyfile.Dispenser) error {
			var file string
			err := stringArg(&file)(d)
			h.Manifests = append(h.Manifests, file)
			return err
		},
		"component": namedBlock(&h.Components),
		"openapi": func(d *caddyfile.Dispenser) error {
			o := new(OpenAPI)
			h.OpenAPI = append(h.OpenAPI, o)
			return o.UnmarshalCaddyfile(d.NewFromNextSegment())
		},
		"mcp_server":          namedBlock(&h.MCPServers),
		"connection":          namedBlock(&h.Connections),
		"connection_keys":     listArg(&h.ConnectionKeys),
		"identity":            subBlock(&h.Identity),
		"callers":             subBlock(&h.Callers),
		"mcp":                 subBlock(&h.MCP),
		"pages":               subBlock(&h.Pages),
		"ledger":              subBlock(&h.Ledger),
		"client_tool_timeout": durationArg(&h.ClientToolTimeout, true),
		"allowed_hosts":       listArg(&h.AllowedHosts),
		"mcp_allowed_hosts": func(d *caddyfile.Dispenser) error {
			return d.Err("mcp_allowed_hosts was renamed: use allowed_hosts, which now applies to every runtime endpoint")
		},
		"upstream_timeout":  durationArg(&h.UpstreamTimeout, false),
		"max_response_size": sizeArg(&h.MaxResponseSize),
		"max_request_size":  sizeArg(&h.MaxRequestSize),
		"metrics": func(d *caddyfile.Dispenser) error {
			if !d.NextArg() || d.Val() != "off" || d.NextArg() {
				return d.Err("want: metrics off")
			}
			h.DisableMetrics = true
			return nil
		},
		"limit": limitArg(&h.Limits, ""),
		"audit": func(d *caddyfile.Dispenser) error {
			if h.Audit != "" {
				return d.Err("audit already specified")
			}
			return stringArg(&h.Audit)(d)
		},
		"audit_inputs": func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AuditInputs = true
			return nil
		},
		"tool": func(d *caddyfile.Dispenser) error {
			at = append(at, d.Token())
			t, err := unmarshalTool(d.NewFromNextSegment())
			h.Tools = append(h.Tools, t)
			return err
		},
	})
	if err != nil {
		return err
	}
	if id := h.localIdentity(); id != nil {
		if err := httpapi.CheckLocalIdentity(*id, h.Callers != nil); err != nil {
			return d.Errf("%v", err)
		}
	}
	if h.AuditInputs && h.Audit == "" {
		return d.Err("audit_inputs needs an audit file: audit FILE")
	}
	if err := h.checkConnectionNames(); err != nil {
		return d.Errf("%v", err)
	}
	return h.checkTools(d, at)
}

// checkTools compiles the inline tools against the components now, so that
// `caddy adapt` already names the file and line of a broken one.
func (h *Handler) checkTools(d *caddyfile.Dispenser, at []caddyfile.Token) error {
	components := map[string]*dispatch.Component{}
	for name, c := range h.Components {
		comp, err := dispatch.NewComponent(name, c.BaseURL, c.Env)
		if err != nil {
			return d.Errf("%v", err)
		}
		components[name] = comp
	}
	env := dispatch.Env{Components: components, Servers: h.declaredServers(), Connections: h.connectionNames()}
	seen := map[string]int{}
	for i, t := range h.Tools {
		if _, err := manifest.CompileToolIn(t, env); err != nil {
			return fmt.Errorf("%s:%d: tool %q: %w", at[i].File, at[i].Line, t.Name, err)
		}
		if prev, dup := seen[t.Name]; dup {
			return fmt.Errorf("%s:%d: tool %q: duplicate name, already declared at line %d", at[i].File, at[i].Line, t.Name, at[prev].Line)
		}
		seen[t.Name] = i
	}
	return nil
}

// UnmarshalCaddyfile sets up the component from `<name> <base_url> {…}`.
// It skips the name, which is the component's key in Handler.Components.
func (c *Component) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume the component's name
	if err := stringArg(&c.BaseURL)(d); err != nil {
		return err
	}
	return parseBlock(d, "component subdirective", map[string]option{
		"env": pairArg(&c.Env, ""),
	})
}

// UnmarshalCaddyfile sets up the identity from an `identity {…}` block.
func (id *Identity) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseSubBlock(d, map[string]option{
		"issuer":   stringArg(&id.Issuer),
		"key_file": stringArg(&id.KeyFile),
		"key": func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.ArgErr()
			}
			id.Keys = append(id.Keys, IdentityKey{ID: args[0], File: args[1]})
			return nil
		},
		"signing_key": stringArg(&id.SigningKey),
		"ttl":         durationArg(&id.TTL, false),
	})
}

// UnmarshalCaddyfile sets up caller authentication from a `callers {…}`
// block.
func (c *Callers) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	opts := c.Tokens.options()
	opts["user_claim"] = stringArg(&c.UserClaim)
	opts["install_claim"] = stringArg(&c.InstallClaim)
	opts["authorization_server"] = listArg(&c.AuthorizationServers)
	opts["resource"] = stringArg(&c.Resource)
	opts["scopes"] = listArg(&c.Scopes)
	return parseSubBlock(d, opts)
}

// UnmarshalCaddyfile sets up MCP from an `mcp {…}` block.
func (m *MCP) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseSubBlock(d, map[string]option{
		"embed_origins":           listArg(&m.EmbedOrigins),
		"session_idle_timeout":    durationArg(&m.SessionIdleTimeout, true),
		"max_sessions_per_caller": intArg(&m.MaxSessionsPerCaller, true),
		"max_sessions":            intArg(&m.MaxSessions, true),
		"identity": func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.Errf("want: identity <user> [<install>]")
			}
			if m.Identity != nil {
				return d.Errf("identity already specified")
			}
			m.Identity = &MCPIdentity{User: args[0]}
			if len(args) == 2 {
				m.Identity.Install = args[1]
			}
			return nil
		},
	})
}

// options are the token options callers and pages share.
func (t *Tokens) options() map[string]option {
	return map[string]option{
		"jwks_url": stringArg(&t.JWKSURL),
		"key_file": stringArg(&t.KeyFile),
		"secret":   stringArg(&t.Secret),
		"issuer":   stringArg(&t.Issuer),
		"audience": stringArg(&t.Audience),
		"leeway":   durationArg(&t.Leeway, false),
	}
}

// UnmarshalCaddyfile sets up the page tokens from a `pages {…}` block.
func (p *Pages) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	opts := p.Tokens.options()
	opts["install_claim"] = stringArg(&p.InstallClaim)
	opts["origins"] = listArg(&p.Origins)
	opts["max_pending_per_thread"] = intArg(&p.MaxPendingPerThread, true)
	opts["max_pending_per_user"] = intArg(&p.MaxPendingPerUser, true)
	opts["max_pending"] = intArg(&p.MaxPending, true)
	opts["max_streams_per_token"] = intArg(&p.MaxStreamsPerToken, true)
	opts["max_streams_per_thread"] = intArg(&p.MaxStreamsPerThread, true)
	opts["max_streams"] = intArg(&p.MaxStreams, true)
	return parseSubBlock(d, opts)
}

// UnmarshalCaddyfile sets up the ledger from `ledger bolt [path] {…}`,
// `ledger redis <addr> {…}` or `ledger off`.
func (l *Ledger) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume "ledger"
	args := d.RemainingArgs()
	switch {
	case len(args) == 0:
		return d.ArgErr()
	case args[0] == "off" && len(args) == 1:
		// A ledger that is off takes no options.
		if d.NextBlock(0) {
			return d.Errf("ledger off takes no %s", d.Val())
		}
	case args[0] == "bolt" && len(args) == 1:
	case args[0] == "bolt" && len(args) == 2:
		l.Path = args[1]
	case args[0] == "redis" && len(args) == 2:
		l.Addr = args[1]
	default:
		return d.Errf("want: ledger bolt [path] | ledger redis <addr> | ledger off")
	}
	l.Backend = args[0]
	flag := func(dst *bool, backend string) option {
		return func(d *caddyfile.Dispenser) error {
			if opt := d.Val(); d.NextArg() || l.Backend != backend {
				return d.Errf("%s is a flag of ledger %s", opt, backend)
			}
			*dst = true
			return nil
		}
	}
	// onOff reads `<opt>`, `<opt> on` or `<opt> off`: a flag whose
	// default is on, so that off must be said.
	onOff := func(dst **bool, backend string) option {
		return func(d *caddyfile.Dispenser) error {
			opt, args := d.Val(), d.RemainingArgs()
			if l.Backend != backend {
				return d.Errf("ledger %s takes no %s", l.Backend, opt)
			}
			if *dst != nil {
				return d.Errf("%s already specified", opt)
			}
			on := len(args) == 0 || args[0] == "on"
			if len(args) > 1 || !on && args[0] != "off" {
				return d.Errf("want: %s [on | off]", opt)
			}
			*dst = &on
			return nil
		}
	}
	redis := func(parse option) option {
		return func(d *caddyfile.Dispenser) error {
			if l.Backend != "redis" {
				return d.Errf("ledger %s takes no %s", l.Backend, d.Val())
			}
			return parse(d)
		}
	}
	return parseBlock(d, "ledger subdirective", map[string]option{
		"retention":       durationArg(&l.Retention, true),
		"max_result_size": sizeArg(&l.MaxResultSize),
		"fsync":           onOff(&l.Fsync, "bolt"),
		"password":        redis(stringArg(&l.Password)),
		"db":              redis(intArg(&l.DB, false)),
		"prefix":          redis(stringArg(&l.Prefix)),
		"tls":             flag(&l.TLS, "redis"),
		"tls_ca_file":     redis(stringArg(&l.TLSCAFile)),
		"allow_eviction":  flag(&l.AllowEviction, "redis"),
		"replicas":        redis(intArg(&l.Replicas, true)),
	})
}

// unmarshalTool reads a `tool <name> {…}` block. (manifest.Tool is not
// caddymodule's to hang an UnmarshalCaddyfile on.)
func unmarshalTool(d *caddyfile.Dispenser) (manifest.Tool, error) {
	var t manifest.Tool
	d.Next() // consume "tool"
	if err := stringArg(&t.Name)(d); err != nil {
		return t, err
	}
	// once is for the options a tool holds once; an app target names its
	// component too.
	seen := map[string]bool{}
	once := func(parse option) option {
		return func(d *caddyfile.Dispenser) error {
			opt := d.Val()
			if seen[opt] || (opt == "component" && t.Target.Component != "") {
				return d.Errf("tool %s: %s already specified", t.Name, opt)
			}
			seen[opt] = true
			return parse(d)
		}
	}
	err := parseBlock(d, "tool subdirective", map[string]option{
		"description":  once(stringArg(&t.Description)),
		"display_name": once(stringArg(&t.DisplayName)),
		"input_schema": once(func(d *caddyfile.Dispenser) error {
			var schema string
			if err := stringArg(&schema)(d); err != nil {
				return err
			}
			if !jsontext.Value(schema).IsValid(jsonread.Lenient) {
				return d.Errf("tool %s: input_schema is not valid JSON", t.Name)
			}
			t.InputSchema = jsontext.Value(schema)
			return nil
		}),
		"target": once(func(d *caddyfile.Dispenser) error {
			return unmarshalTarget(d, &t.Target)
		}),
		"query":  pairArg(&t.Target.Query, "tool "+t.Name+": "),
		"header": pairArg(&t.Target.Headers, "tool "+t.Name+": "),
		"body": once(func(d *caddyfile.Dispenser) error {
			var body string
			err := stringArg(&body)(d)
			t.Target.Body = bodyJSON(body)
			return err
		}),
		"component": once(stringArg(&t.Target.Component)),
		"allow":     once(stringArg(&t.Allow)),
		"approval":  approvalArg(&t.Approval, "tool "+t.Name+": "),
		"limit":     limitArg(&t.Limits, "tool "+t.Name+": "),
		"result":    once(stringArg(&t.Target.Result)),
		"ui": once(func(d *caddyfile.Dispenser) error {
			var v string
			if err := stringArg(&v)(d); err != nil {
				return err
			}
			if v != "on" && v != "off" {
				return d.Errf("tool %s: want: ui on | off", t.Name)
			}
			on := v == "on"
			t.UI = &on
			return nil
		}),
	})
	return t, err
}

// A targetLine is the Caddyfile spelling of one target kind: what follows
// "target KIND" on a tool's target line.
type targetLine struct {
	usage string // the arguments after the kind, for "want: target KIND …"
	args  int    // how many arguments follow the kind
	set   func(s *dispatch.Spec, args []string)
}

// targetLines spell every target kind (dispatch.Kinds), keyed by its wire
// name; a test holds the two lists to each other.
var targetLines = map[string]targetLine{
	"app": {"<component> <method> <path>", 3, func(s *dispatch.Spec, a []string) {
		s.Component, s.Method, s.Path = a[0], strings.ToUpper(a[1]), a[2]
	}},
	"url": {"<method> <url>", 2, func(s *dispatch.Spec, a []string) {
		s.Method, s.URL = strings.ToUpper(a[0]), a[1]
	}},
	"kazzle": {"<client_tool>", 1, func(s *dispatch.Spec, a []string) {
		s.Name = a[0]
	}},
	"mcp": {"<mcp_server> <tool>", 2, func(s *dispatch.Spec, a []string) {
		s.Server, s.Tool = a[0], a[1]
	}},
}

// unmarshalTarget reads the arguments of a tool's target line.
func unmarshalTarget(d *caddyfile.Dispenser, s *dispatch.Spec) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	line, ok := targetLines[args[0]]
	if !ok {
		return d.Errf("unknown target type %s (want %s)", args[0], dispatch.KindNames())
	}
	if len(args)-1 != line.args {
		return d.Errf("want: target %s %s", args[0], line.usage)
	}
	s.Type = args[0]
	line.set(s, args[1:])
	return nil
}

// bodyJSON takes a Caddyfile body argument: JSON as written, or else the
// text as a JSON string.
func bodyJSON(arg string) jsontext.Value {
	if jsontext.Value(arg).IsValid(jsonread.Lenient) {
		return jsontext.Value(arg)
	}
	b, _ := json.Marshal(arg, jsonread.Legacy)
	return b
}

// An option reads one option of a block, from the dispenser on its name.
// Its errors name the option and its line.
type option func(d *caddyfile.Dispenser) error

// unmarshalApproval reads an approval rule: `approval ["WHEN"] {…}` with
// title (required), description, timeout and assignee, one per line.
func unmarshalApproval(d *caddyfile.Dispenser, errPrefix string) (*manifest.Approval, error) {
	a := new(manifest.Approval)
	d.Next() // consume "approval"
	if d.NextArg() {
		a.When = d.Val()
		if d.NextArg() {
			return nil, d.Errf(`%swant: approval ["CONDITION"] { title "…" … }`, errPrefix)
		}
	}
	seen := map[string]bool{}
	once := func(dst *string) option {
		return func(d *caddyfile.Dispenser) error {
			if seen[d.Val()] {
				return d.Errf("%sapproval: %s already specified", errPrefix, d.Val())
			}
			seen[d.Val()] = true
			return stringArg(dst)(d)
		}
	}
	err := parseBlock(d, "approval subdirective", map[string]option{
		"title":       once(&a.Title),
		"description": once(&a.Description),
		"timeout":     once(&a.Timeout),
		"assignee":    once(&a.Assignee),
	})
	if err != nil {
		return nil, err
	}
	if a.Title == "" {
		return nil, d.Errf(`%sapproval: a title is required: approval "CONDITION" { title "…" }`, errPrefix)
	}
	if a.Timeout != "" {
		if _, err := manifest.ParseTimeout(a.Timeout); err != nil {
			return nil, d.Errf("%sapproval timeout: %v", errPrefix, err)
		}
	}
	return a, nil
}

// approvalArg reads an approval block into *dst; a second is an error.
func approvalArg(dst **manifest.Approval, errPrefix string) option {
	return func(d *caddyfile.Dispenser) error {
		if *dst != nil {
			return d.Errf("%sapproval already specified", errPrefix)
		}
		a, err := unmarshalApproval(d.NewFromNextSegment(), errPrefix)
		*dst = a
		return err
	}
}

// checkGovernance checks an approval rule and quotas given for all the
// tools of a server or a document, once, at load: compiled with each
// tool, a bad rule would leave every one of them out.
func checkGovernance(a *manifest.Approval, limits []string) error {
	if a != nil {
		if err := manifest.CheckApproval(*a); err != nil {
			return err
		}
	}
	_, err := quota.ParseAll(limits)
	return err
}

// limitArg appends a quota, its words joined as written ("20/1h per
// user"), to dst, checked now so that the line is named.
func limitArg(dst *[]string, errPrefix string) option {
	return func(d *caddyfile.Dispenser) error {
		args := d.RemainingArgs()
		rule := strings.Join(args, " ")
		if _, err := quota.ParseAll(append(slices.Clone(*dst), rule)); err != nil {
			return d.Errf("%s%v", errPrefix, err)
		}
		*dst = append(*dst, rule)
		return nil
	}
}

// parseBlock reads the block that opens at the end of d's line, each
// option by its entry in opts; what names the options in errors.
func parseBlock(d *caddyfile.Dispenser, what string, opts map[string]option) error {
	for d.NextBlock(0) {
		parse, ok := opts[d.Val()]
		if !ok {
			return d.Errf("unrecognized %s %s", what, d.Val())
		}
		if err := parse(d); err != nil {
			return err
		}
	}
	return nil
}

// parseSubBlock reads a `<name> {…}` sub-block, which takes no arguments
// on its line, from d on its name.
func parseSubBlock(d *caddyfile.Dispenser, opts map[string]option) error {
	d.Next() // consume the block's name
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return parseBlock(d, name+" subdirective", opts)
}

// subBlock reads a sub-block such as identity {…} into a new *dst, by the
// type's own UnmarshalCaddyfile; a second one is an error.
func subBlock[T any, P interface {
	*T
	caddyfile.Unmarshaler
}](dst *P) option {
	return func(d *caddyfile.Dispenser) error {
		if *dst != nil {
			return d.Errf("%s already specified", d.Val())
		}
		*dst = new(T)
		return (*dst).UnmarshalCaddyfile(d.NewFromNextSegment())
	}
}

// namedBlock reads a repeatable `<option> <name> …` segment, such as a
// component, into a new entry of *dst under its name, by the type's own
// UnmarshalCaddyfile (which skips the name); a name given twice is an
// error.
func namedBlock[T any, P interface {
	*T
	caddyfile.Unmarshaler
}](dst *map[string]P) option {
	return func(d *caddyfile.Dispenser) error {
		opt := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		name := d.Val()
		if _, dup := (*dst)[name]; dup {
			return d.Errf("%s %s already specified", opt, name)
		}
		if *dst == nil {
			*dst = map[string]P{}
		}
		entry := P(new(T))
		(*dst)[name] = entry
		return entry.UnmarshalCaddyfile(d.NewFromNextSegment())
	}
}

// stringArg reads the option's one argument into dst.
func stringArg(dst *string) option {
	return func(d *caddyfile.Dispenser) error {
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dst = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
}

// listArg appends the option's arguments, at least one, to dst.
func listArg(dst *[]string) option {
	return func(d *caddyfile.Dispenser) error {
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		*dst = append(*dst, args...)
		return nil
	}
}

// pairArg reads the option's key and value into *dst, where the key must
// be new; errPrefix starts the error that says it is not.
func pairArg(dst *map[string]string, errPrefix string) option {
	return func(d *caddyfile.Dispenser) error {
		opt, args := d.Val(), d.RemainingArgs()
		if len(args) != 2 {
			return d.ArgErr()
		}
		if _, dup := (*dst)[args[0]]; dup {
			return d.Errf("%s%s %s already specified", errPrefix, opt, args[0])
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[args[0]] = args[1]
		return nil
	}
}

// durationArg reads the option's one duration into dst. positive refuses
// zero and less, for the options whose zero is not their default.
func durationArg(dst *caddy.Duration, positive bool) option {
	return func(d *caddyfile.Dispenser) error {
		opt, v := d.Val(), ""
		if err := stringArg(&v)(d); err != nil {
			return err
		}
		dur, err := caddy.ParseDuration(v)
		switch {
		case positive && (err != nil || dur <= 0):
			return d.Errf("bad %s %s", opt, v)
		case err != nil:
			return d.Errf("bad %s %s: %v", opt, v, err)
		}
		*dst = caddy.Duration(dur)
		return nil
	}
}

// intArg reads the option's one integer, at least 0, into dst. positive
// refuses 0 too, for the options whose zero is not their default.
func intArg(dst *int, positive bool) option {
	return func(d *caddyfile.Dispenser) error {
		opt, v := d.Val(), ""
		if err := stringArg(&v)(d); err != nil {
			return err
		}
		n, err := strconv.Atoi(v)
		switch {
		case positive && (err != nil || n <= 0):
			return d.Errf("bad %s %s: want a positive integer", opt, v)
		case err != nil || n < 0:
			return d.Errf("bad %s %s", opt, v)
		}
		*dst = n
		return nil
	}
}

// sizeArg reads the option's one size in bytes, such as 1MiB, into dst.
func sizeArg(dst *int64) option {
	return func(d *caddyfile.Dispenser) error {
		opt, v := d.Val(), ""
		if err := stringArg(&v)(d); err != nil {
			return err
		}
		size, err := humanize.ParseBytes(v)
		if err != nil || size == 0 || size > math.MaxInt64 {
			return d.Errf("bad %s %s: want a size such as 1MiB", opt, v)
		}
		*dst = int64(size)
		return nil
	}
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*Component)(nil)
	_ caddyfile.Unmarshaler = (*Identity)(nil)
	_ caddyfile.Unmarshaler = (*Callers)(nil)
	_ caddyfile.Unmarshaler = (*MCP)(nil)
	_ caddyfile.Unmarshaler = (*Pages)(nil)
	_ caddyfile.Unmarshaler = (*Ledger)(nil)
	_ caddyfile.Unmarshaler = (*MCPServer)(nil)
	_ caddyfile.Unmarshaler = (*OpenAPI)(nil)
	_ caddyfile.Unmarshaler = (*Connection)(nil)
)
