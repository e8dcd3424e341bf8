package caddymodule

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var t Handler
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return &t, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	toolgate {
//		manifest <file>
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
//		}
//		ledger bolt [<path>] | redis <[redis[s]://]host:port> | off {
//			retention   <duration>
//			fsync                    (bolt: wait for the disk on each commit)
//			password    <redis password>
//			db          <redis db>
//			prefix      <redis key prefix>
//			tls                      (redis: connect over TLS; rediss:// too)
//			tls_ca_file <pem>        (redis: trust this CA, not the system's)
//		}
//		pages {
//			key_file | secret <value>
//			issuer   <iss>
//			audience <aud>
//			origins  <origin...>
//			max_pending_per_thread <n>
//			max_pending            <n>
//			max_streams_per_token  <n>
//		}
//		client_tool_timeout <duration>
//		allowed_hosts     <host...>
//		upstream_timeout  <duration>
//		max_response_size <size>
//		max_request_size  <size>
//		tool <name> {
//			description  <text>
//			display_name <text>
//			input_schema <json>
//			target app <component> <method> <path>
//			target url <method> <url>
//			target kazzle <client_tool>
//			query  <key> <value>
//			header <name> <value>
//			body   <json>
//			component <name>
//			allow  <expression>
//			result <expression>
//		}
//	}
//
// manifest and tool may repeat. A tool's component line lets a url target
// use that component's env in ${env.NAME} references. A body that is not valid JSON is taken as a
// JSON string, so `body ${input}` sends the whole input. Inline tools are
// checked when the Caddyfile is adapted; errors name the file and line.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	type toolAt struct {
		file string
		line int
	}
	var at []toolAt
	for d.NextBlock(0) {
		switch d.Val() {
		case "manifest":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.Manifests = append(h.Manifests, d.Val())
			if d.NextArg() {
				return d.ArgErr()
			}
		case "component":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.ArgErr()
			}
			if h.Components == nil {
				h.Components = map[string]*Component{}
			}
			if _, dup := h.Components[args[0]]; dup {
				return d.Errf("component %s already specified", args[0])
			}
			c := &Component{BaseURL: args[1]}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "env":
					kv := d.RemainingArgs()
					if len(kv) != 2 {
						return d.ArgErr()
					}
					if c.Env == nil {
						c.Env = map[string]string{}
					}
					if _, dup := c.Env[kv[0]]; dup {
						return d.Errf("env %s already specified", kv[0])
					}
					c.Env[kv[0]] = kv[1]
				default:
					return d.Errf("unrecognized component subdirective %s", d.Val())
				}
			}
			h.Components[args[0]] = c
		case "identity":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.Identity != nil {
				return d.Err("identity already specified")
			}
			h.Identity = new(Identity)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				sub := d.Val()
				if sub == "key" {
					args := d.RemainingArgs()
					if len(args) != 2 {
						return d.ArgErr()
					}
					h.Identity.Keys = append(h.Identity.Keys, IdentityKey{ID: args[0], File: args[1]})
					continue
				}
				if !d.NextArg() {
					return d.ArgErr()
				}
				val := d.Val()
				if d.NextArg() {
					return d.ArgErr()
				}
				switch sub {
				case "issuer":
					h.Identity.Issuer = val
				case "key_file":
					h.Identity.KeyFile = val
				case "signing_key":
					h.Identity.SigningKey = val
				case "ttl":
					dur, err := caddy.ParseDuration(val)
					if err != nil {
						return d.Errf("bad ttl %s: %v", val, err)
					}
					h.Identity.TTL = caddy.Duration(dur)
				default:
					return d.Errf("unrecognized identity subdirective %s", sub)
				}
			}
		case "callers":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.Callers != nil {
				return d.Err("callers already specified")
			}
			h.Callers = new(Callers)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				sub := d.Val()
				if !d.NextArg() {
					return d.ArgErr()
				}
				val := d.Val()
				if d.NextArg() {
					return d.ArgErr()
				}
				dst := map[string]*string{
					"jwks_url": &h.Callers.JWKSURL, "key_file": &h.Callers.KeyFile, "secret": &h.Callers.Secret,
					"issuer": &h.Callers.Issuer, "audience": &h.Callers.Audience,
					"user_claim": &h.Callers.UserClaim, "install_claim": &h.Callers.InstallClaim,
				}
				switch p, ok := dst[sub]; {
				case ok:
					*p = val
				case sub == "leeway":
					dur, err := caddy.ParseDuration(val)
					if err != nil {
						return d.Errf("bad leeway %s: %v", val, err)
					}
					h.Callers.Leeway = caddy.Duration(dur)
				default:
					return d.Errf("unrecognized callers subdirective %s", sub)
				}
			}
		case "pages":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.Pages != nil {
				return d.Err("pages already specified")
			}
			h.Pages = new(Pages)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				sub := d.Val()
				args := d.RemainingArgs()
				if sub == "origins" {
					if len(args) == 0 {
						return d.ArgErr()
					}
					h.Pages.Origins = append(h.Pages.Origins, args...)
					continue
				}
				if len(args) != 1 {
					return d.ArgErr()
				}
				switch sub {
				case "key_file":
					h.Pages.KeyFile = args[0]
				case "secret":
					h.Pages.Secret = args[0]
				case "issuer":
					h.Pages.Issuer = args[0]
				case "audience":
					h.Pages.Audience = args[0]
				case "max_pending_per_thread", "max_pending", "max_streams_per_token":
					n, err := strconv.Atoi(args[0])
					if err != nil || n <= 0 {
						return d.Errf("bad %s %s: want a positive integer", sub, args[0])
					}
					switch sub {
					case "max_pending_per_thread":
						h.Pages.MaxPendingPerThread = n
					case "max_pending":
						h.Pages.MaxPending = n
					default:
						h.Pages.MaxStreamsPerToken = n
					}
				default:
					return d.Errf("unrecognized pages subdirective %s", sub)
				}
			}
		case "allowed_hosts":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.AllowedHosts = append(h.AllowedHosts, args...)
		case "mcp_allowed_hosts":
			return d.Err("mcp_allowed_hosts was renamed: use allowed_hosts, which now applies to every runtime endpoint")
		case "client_tool_timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("bad client_tool_timeout %s", d.Val())
			}
			h.ClientToolTimeout = caddy.Duration(dur)
			if d.NextArg() {
				return d.ArgErr()
			}
		case "ledger":
			if h.Ledger != nil {
				return d.Err("ledger already specified")
			}
			l, err := parseLedger(d)
			if err != nil {
				return err
			}
			h.Ledger = l
		case "upstream_timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("bad upstream_timeout %s: %v", d.Val(), err)
			}
			h.UpstreamTimeout = caddy.Duration(dur)
			if d.NextArg() {
				return d.ArgErr()
			}
		case "max_response_size", "max_request_size":
			sub := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(d.Val())
			if err != nil || size == 0 {
				return d.Errf("bad %s %s: want a size such as 1MiB", sub, d.Val())
			}
			if sub == "max_response_size" {
				h.MaxResponseSize = int64(size)
			} else {
				h.MaxRequestSize = int64(size)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "tool":
			at = append(at, toolAt{d.File(), d.Line()})
			t, err := parseTool(d)
			if err != nil {
				return err
			}
			h.Tools = append(h.Tools, t)
		default:
			return d.Errf("unrecognized subdirective %s", d.Val())
		}
	}

	// Check inline tools now, so `caddy adapt` already names the file
	// and line of a broken one.
	components := map[string]*dispatch.Component{}
	for name, c := range h.Components {
		comp, err := dispatch.NewComponent(name, c.BaseURL, c.Env)
		if err != nil {
			return d.Errf("%v", err)
		}
		components[name] = comp
	}
	seen := map[string]int{}
	for i, t := range h.Tools {
		if _, err := manifest.CompileTool(t, components); err != nil {
			return fmt.Errorf("%s:%d: tool %q: %w", at[i].file, at[i].line, t.Name, err)
		}
		if prev, dup := seen[t.Name]; dup {
			return fmt.Errorf("%s:%d: tool %q: duplicate name, already declared at line %d", at[i].file, at[i].line, t.Name, at[prev].line)
		}
		seen[t.Name] = i
	}
	return nil
}

// parseLedger reads `ledger bolt [path] { retention; fsync }`,
// `ledger redis <addr> { password; db; prefix; retention; tls; tls_ca_file }`
// or `ledger off`.
func parseLedger(d *caddyfile.Dispenser) (*Ledger, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	l := &Ledger{Backend: args[0]}
	switch {
	case args[0] == "off" && len(args) == 1:
	case args[0] == "bolt" && len(args) <= 2:
		if len(args) == 2 {
			l.Path = args[1]
		}
	case args[0] == "redis" && len(args) == 2:
		l.Addr = args[1]
	default:
		return nil, d.Errf("want: ledger bolt [path] | ledger redis <addr> | ledger off")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub == "fsync" {
			if d.NextArg() || l.Backend != "bolt" {
				return nil, d.Errf("fsync is a flag of ledger bolt")
			}
			l.Fsync = true
			continue
		}
		if sub == "tls" {
			if d.NextArg() || l.Backend != "redis" {
				return nil, d.Errf("tls is a flag of ledger redis")
			}
			l.TLS = true
			continue
		}
		if !d.NextArg() {
			return nil, d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return nil, d.ArgErr()
		}
		redisOnly := sub == "password" || sub == "db" || sub == "prefix" || sub == "tls_ca_file"
		if l.Backend == "off" || (redisOnly && l.Backend != "redis") {
			return nil, d.Errf("ledger %s takes no %s", l.Backend, sub)
		}
		switch sub {
		case "retention":
			dur, err := caddy.ParseDuration(val)
			if err != nil || dur <= 0 {
				return nil, d.Errf("bad retention %s", val)
			}
			l.Retention = caddy.Duration(dur)
		case "password":
			l.Password = val
		case "prefix":
			l.Prefix = val
		case "tls_ca_file":
			l.TLSCAFile = val
		case "db":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return nil, d.Errf("bad db %s", val)
			}
			l.DB = n
		default:
			return nil, d.Errf("unrecognized ledger subdirective %s", sub)
		}
	}
	return l, nil
}

func parseTool(d *caddyfile.Dispenser) (manifest.Tool, error) {
	var t manifest.Tool
	if !d.NextArg() {
		return t, d.ArgErr()
	}
	t.Name = d.Val()
	if d.NextArg() {
		return t, d.ArgErr()
	}
	once := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "query" && sub != "header" {
			if once[sub] || (sub == "component" && t.Target.Component != "") {
				return t, d.Errf("tool %s: %s already specified", t.Name, sub)
			}
			once[sub] = true
		}
		args := d.RemainingArgs()
		switch sub {
		case "description", "display_name", "input_schema", "body", "component", "allow", "result":
			if len(args) != 1 {
				return t, d.ArgErr()
			}
			switch sub {
			case "description":
				t.Description = args[0]
			case "display_name":
				t.DisplayName = args[0]
			case "input_schema":
				if !json.Valid([]byte(args[0])) {
					return t, d.Errf("tool %s: input_schema is not valid JSON", t.Name)
				}
				t.InputSchema = json.RawMessage(args[0])
			case "body":
				t.Target.Body = bodyJSON(args[0])
			case "component":
				t.Target.Component = args[0]
			case "allow":
				t.Allow = args[0]
			case "result":
				t.Target.Result = args[0]
			}
		case "target":
			if err := parseTarget(d, &t.Target, args); err != nil {
				return t, err
			}
		case "query", "header":
			if len(args) != 2 {
				return t, d.ArgErr()
			}
			m := &t.Target.Query
			if sub == "header" {
				m = &t.Target.Headers
			}
			if *m == nil {
				*m = map[string]string{}
			}
			if _, dup := (*m)[args[0]]; dup {
				return t, d.Errf("tool %s: %s %s already specified", t.Name, sub, args[0])
			}
			(*m)[args[0]] = args[1]
		default:
			return t, d.Errf("unrecognized tool subdirective %s", sub)
		}
	}
	return t, nil
}

func parseTarget(d *caddyfile.Dispenser, s *dispatch.Spec, args []string) error {
	if len(args) == 0 {
		return d.ArgErr()
	}
	s.Type = args[0]
	switch args[0] {
	case dispatch.TypeApp:
		if len(args) != 4 {
			return d.Errf("want: target app <component> <method> <path>")
		}
		s.Component, s.Method, s.Path = args[1], strings.ToUpper(args[2]), args[3]
	case dispatch.TypeURL:
		if len(args) != 3 {
			return d.Errf("want: target url <method> <url>")
		}
		s.Method, s.URL = strings.ToUpper(args[1]), args[2]
	case dispatch.TypeClient:
		if len(args) != 2 {
			return d.Errf("want: target kazzle <client_tool>")
		}
		s.Name = args[1]
	default:
		return d.Errf("unknown target type %s (want app, url or kazzle)", args[0])
	}
	return nil
}

// bodyJSON takes a Caddyfile body argument: JSON as written, or else the
// text as a JSON string.
func bodyJSON(arg string) json.RawMessage {
	if json.Valid([]byte(arg)) {
		return json.RawMessage(arg)
	}
	b, _ := json.Marshal(arg)
	return b
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
