// Package dispatch compiles tool and button targets at load, builds the HTTP
// request for one call from them, sends it, and reads the answer within the
// configured limits.
package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/internal/refs"
	"github.com/toolgate/toolgate/internal/result"
)

// Spec is a target as an author writes it, in a manifest or the Caddyfile.
type Spec struct {
	// Type names the target's Kind: "app" (one of the app's components),
	// "url" (an external endpoint) or "kazzle" (a client tool run in the
	// user's page).
	Type string `json:"type"`

	// Component names the component an app target runs on. A url target
	// may name one too, to use its env in ${env.NAME} references.
	Component string `json:"component,omitempty"`

	// Method is one of GET, POST, PUT, PATCH, DELETE.
	Method string `json:"method,omitempty"`

	// Path is the app target's path below the component's base URL. It
	// starts with "/"; references in it are encoded as one path segment.
	Path string `json:"path,omitempty"`

	// URL is the url target's absolute http(s) URL. References may fill
	// path segments and query values, never the scheme, host or port.
	URL string `json:"url,omitempty"`

	// Query holds query parameters; values may hold references.
	Query map[string]string `json:"query,omitempty"`

	// Headers holds request headers; values may hold references.
	Headers map[string]string `json:"headers,omitempty"`

	// Body is the JSON body. Unset, no body is sent. A string that is
	// exactly one reference takes the referenced value with its type, so
	// "${input}" sends the whole input.
	Body jsontext.Value `json:"body,omitempty"`

	// Name is the client tool a client-tool target (type "kazzle") runs in the page.
	Name string `json:"name,omitempty"`

	// Result is an expression (expr-lang) mapping a url target's answer
	// {status, headers, body} into {content, markdown?, embedUrl?}; on an
	// mcp target, body is the tool's result {content, structuredContent,
	// isError}.
	Result string `json:"result,omitempty"`

	// Server is the upstream MCP server an mcp target calls, by its name
	// in the config; Tool is the tool it calls there.
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Operation sends an app or url target's input as an OpenAPI
	// operation does (its path or url holds {name} for the path
	// parameters); no query or body is then set.
	Operation *Operation `json:"operation,omitempty"`

	// Continue marks the button of a card the gateway built from an mcp
	// server's input requests: it continues the call with the button's
	// input. No spec an author writes sets it.
	Continue bool `json:"continue,omitzero"`
}

// Component is one of the app's own components.
type Component struct {
	Name    string
	BaseURL *url.URL
	// Socket is the unix socket app targets are sent to, for an address
	// unix//PATH; empty, they go to BaseURL's host.
	Socket string
	// Env is what ${env.NAME} resolves against for targets of this component.
	Env map[string]string
}

// NewComponent checks and builds a component. baseURL is an absolute
// http(s) URL, or unix//PATH for a component on the unix socket at PATH.
func NewComponent(name, baseURL string, env map[string]string) (*Component, error) {
	if strings.HasPrefix(baseURL, unixPrefix) {
		path, err := parseUnix(name, baseURL)
		if err != nil {
			return nil, err
		}
		return newUnixComponent(name, path, env), nil
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("component %q: base URL %q: %v", name, baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("component %q: base URL %q must be an absolute http(s) URL", name, baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("component %q: base URL %q must not hold a query, fragment or user info", name, baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	if env == nil {
		env = map[string]string{}
	}
	return &Component{Name: name, BaseURL: u, Env: env}, nil
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// Headers that belong to the gateway or to the transport.
var (
	gatewayHeaders   = []string{"Authorization", "Kazzle-Tool-Context", "Idempotency-Key"}
	transportHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Upgrade", "Trailer", "Keep-Alive", "Proxy-Connection"}
)

// Target is a compiled Spec: every reference parsed, every rule checked.
type Target struct {
	Spec Spec
	kind Kind
	// Component is the app target's component, or a url target's env owner.
	Component *Component

	base    string // app: the component's base URL; url: empty
	socket  any    // app: the component's unix socket path, if it has one (see socketKey)
	url     *refs.Template
	urlEncs []refs.Encoder
	query   []param
	headers []param
	body    *refs.Value
	// Mapping is the compiled Result expression, if any.
	Mapping *result.Mapping
	// Server is an mcp target's upstream MCP server.
	Server MCPServer
	// op is an operation's target's compiled Operation.
	op *operation
	// conns are the connections the target's references name, sorted.
	conns []string
}

type param struct {
	key string
	val *refs.Template
}

// Env is what targets are compiled against.
type Env struct {
	// Components are the declared components, by name.
	Components map[string]*Component
	// Results compiles a url target's result expression (mapping.Compile);
	// nil, a target with one is refused.
	Results func(src string) (*result.Mapping, error)
	// Servers are the declared upstream MCP servers, by name.
	Servers map[string]MCPServer
	// Connections are the declared connections' names: what a url
	// target's ${connection.NAME} may name.
	Connections map[string]bool
}

// Compile checks a spec against the rules of targets and references
// (docs/configuration.md, "Targets" and "References") and parses its
// references and its result expression.
func Compile(s Spec, env Env) (*Target, error) {
	t, err := compile(s, env)
	if err != nil {
		return nil, err
	}
	if err := t.checkEnv(); err != nil {
		return nil, err
	}
	return t, nil
}

// compile is Compile but for the env references, which the caller checks:
// a tool's must be declared by its component, a button may hold none.
func compile(s Spec, env Env) (*Target, error) {
	k, err := lookupKind(s.Type)
	if err != nil {
		return nil, err
	}
	t := &Target{Spec: s, kind: k}
	if err := k.compile(t, env); err != nil {
		return nil, err
	}
	if err := t.checkConnections(env.Connections); err != nil {
		return nil, err
	}
	return t, nil
}

// checkConnections checks where the target's ${connection.NAME}
// references stand: a user's access token goes to the service it is
// for, in a url target's header or query value, and nowhere else. Not in
// an app target (its component gets the identity token), nor in a url's
// path (logged, and shown in errors) or body (echoed back in answers).
// Each names a declared connection.
func (t *Target) checkConnections(declared map[string]bool) error {
	var in []refs.Ref
	if t.url != nil {
		in = append(in, t.url.Refs()...)
	}
	if t.body != nil {
		in = append(in, t.body.Refs()...)
	}
	for _, r := range in {
		if r.Root == refs.RootConnection {
			return fmt.Errorf("%s target: %s: a connection's token goes in a header or a query value of a url target, never in its URL or body", t.kind.Name(), r)
		}
	}
	// A kind's own (an mcp server's connection) come first.
	named := t.conns
	for _, p := range append(slices.Clip(t.query), t.headers...) {
		for _, r := range p.val.Refs() {
			if r.Root != refs.RootConnection {
				continue
			}
			if t.kind.Name() != TypeURL {
				return fmt.Errorf("%s target: %s: a connection's token goes only to a url target; a component gets the identity token", t.kind.Name(), r)
			}
			if !declared[r.Path[0]] {
				return fmt.Errorf("%s target: %s: connection %q is not declared", t.kind.Name(), r, r.Path[0])
			}
			if !slices.Contains(named, r.Path[0]) {
				named = append(named, r.Path[0])
			}
		}
	}
	slices.Sort(named)
	t.conns = named
	return nil
}

// Connections lists the connections whose tokens the target sends (its
// references', or its mcp server's): the calling user's tokens, fetched
// for each call before it is sent.
func (t *Target) Connections() []string { return t.conns }

// Kind returns the target's kind.
func (t *Target) Kind() Kind { return t.kind }

// NeedsUser reports whether a call of the target must name its user: its
// kind sends an identity token, or its MCP server is configured to, or it
// sends a user's connection token.
func (t *Target) NeedsUser() bool {
	return t.kind.NeedsUser() || len(t.conns) > 0 || t.Server != nil && t.Server.SendsIdentity()
}

// Describe names the target in logs and errors (Kind.Describe).
func (t *Target) Describe() string { return t.kind.Describe(t) }

// compileHTTP checks what every target sent over HTTP shares: no client
// tool name, a method, and a declared component if one is named.
func (t *Target) compileHTTP(components map[string]*Component) error {
	s := t.Spec
	if s.Name != "" {
		return fmt.Errorf("%s target: name is only for kazzle targets", s.Type)
	}
	if s.Server != "" || s.Tool != "" || s.Continue {
		return fmt.Errorf("%s target: server and tool are for mcp targets", s.Type)
	}
	if !methods[s.Method] {
		return fmt.Errorf("%s target: method %q is not one of GET, POST, PUT, PATCH, DELETE", s.Type, s.Method)
	}
	if s.Component != "" {
		c, ok := components[s.Component]
		if !ok {
			return fmt.Errorf("%s target: component %q is not declared", s.Type, s.Component)
		}
		t.Component = c
	}
	return nil
}

// compileParams parses the query, the headers and the body; reserved are
// headers the target may not set, which the gateway sets itself.
func (t *Target) compileParams(reserved []string) error {
	s := t.Spec
	for _, k := range sortedKeys(s.Query) {
		v, err := refs.Parse(s.Query[k])
		if err != nil {
			return fmt.Errorf("%s target: query %q: %w", s.Type, k, err)
		}
		t.query = append(t.query, param{k, v})
	}
	for _, k := range sortedKeys(s.Headers) {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("%s target: %q is not a valid header name", s.Type, k)
		}
		canon := http.CanonicalHeaderKey(k)
		if slices.Contains(transportHeaders, canon) {
			return fmt.Errorf("%s target: header %q is set by the transport", s.Type, k)
		}
		if slices.Contains(reserved, canon) {
			return fmt.Errorf("%s target: header %q belongs to the gateway", s.Type, k)
		}
		v, err := refs.Parse(s.Headers[k])
		if err != nil {
			return fmt.Errorf("%s target: header %q: %w", s.Type, k, err)
		}
		if lit, ok := v.Literal(); ok && !httpguts.ValidHeaderFieldValue(lit) {
			return fmt.Errorf("%s target: header %q has an invalid value", s.Type, k)
		}
		t.headers = append(t.headers, param{canon, v})
	}
	if len(s.Body) > 0 {
		var err error
		if t.body, err = refs.ParseJSON(s.Body); err != nil {
			return fmt.Errorf("%s target: body: %w", s.Type, err)
		}
	}
	return nil
}

// checkEnv checks that every env reference is declared by the target's
// component.
func (t *Target) checkEnv() error {
	for _, r := range t.Refs() {
		if r.Root != refs.RootEnv {
			continue
		}
		if t.Component == nil {
			return fmt.Errorf("%s target: %s needs a component whose env declares it; name one with component", t.kind.Name(), r)
		}
		if _, ok := t.Component.Env[r.Path[0]]; !ok {
			return fmt.Errorf("%s target: %s: component %q declares no env %s", t.kind.Name(), r, t.Component.Name, r.Path[0])
		}
	}
	return nil
}

func (t *Target) compileAppPath() error {
	p := t.Spec.Path
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("app target: path %q must start with /", p)
	}
	if strings.ContainsAny(p, "?#") {
		return fmt.Errorf("app target: path %q must not hold ? or #; use query", p)
	}
	tmpl, err := refs.Parse(p)
	if err != nil {
		return fmt.Errorf("app target: path: %w", err)
	}
	if err := checkPathShape(tmpl.Skeleton("x")); err != nil {
		return fmt.Errorf("app target: path %q: %w", p, err)
	}
	// A literal that cannot parse (a stray %, a control character) would
	// fail every call; refuse it at load. Encoded values always parse.
	if _, err := url.Parse(t.Component.BaseURL.String() + tmpl.Skeleton("x")); err != nil {
		return fmt.Errorf("app target: path %q: %v", p, err)
	}
	t.base = t.Component.BaseURL.String()
	if t.Component.Socket != "" {
		t.socket = t.Component.Socket
	}
	t.url = tmpl
	t.urlEncs = make([]refs.Encoder, len(tmpl.Refs()))
	for i := range t.urlEncs {
		t.urlEncs[i] = escapeSegment
	}
	if err := t.checkEnvValues(); err != nil {
		return fmt.Errorf("app target: path %q: %w", p, err)
	}
	return nil
}

func (t *Target) compileURL() error {
	tmpl, err := refs.Parse(t.Spec.URL)
	if err != nil {
		return fmt.Errorf("url target: url: %w", err)
	}
	skel := tmpl.Skeleton("x")
	u, err := url.Parse(skel)
	if err != nil {
		return fmt.Errorf("url target: url %q: %v", t.Spec.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url target: url %q must be an absolute http(s) URL", t.Spec.URL)
	}
	if u.Fragment != "" || strings.Contains(skel, "#") {
		return fmt.Errorf("url target: url %q must not hold a fragment", t.Spec.URL)
	}
	if u.User != nil {
		return fmt.Errorf("url target: url %q must not hold user info; use headers", t.Spec.URL)
	}
	if err := checkPathShape(u.EscapedPath()); err != nil {
		return fmt.Errorf("url target: url %q: %w", t.Spec.URL, err)
	}
	// The origin is the author's: the literal text before the first
	// reference must already hold the whole scheme://host[:port] and the
	// character that ends it.
	t.urlEncs = make([]refs.Encoder, len(tmpl.Refs()))
	for i := range t.urlEncs {
		before := tmpl.LiteralBefore(i)
		if i == 0 {
			rest, ok := strings.CutPrefix(before, u.Scheme+"://")
			if !ok || !strings.ContainsAny(rest, "/?") {
				return fmt.Errorf("url target: url %q: a reference may not fill the scheme, host or port", t.Spec.URL)
			}
		}
		if strings.Contains(before, "?") {
			t.urlEncs[i] = escapeQuery
		} else {
			t.urlEncs[i] = escapeSegment
		}
	}
	t.url = tmpl
	if err := t.checkEnvValues(); err != nil {
		return fmt.Errorf("url target: url %q: %w", t.Spec.URL, err)
	}
	return nil
}

// checkEnvValues puts the env values that the path or URL references
// through their encoders now: they are known at load, and a value that
// every call would refuse is the author's mistake. The error names the
// reference, not the value, which may be secret. An env name the component
// does not declare is reported by Compile.
func (t *Target) checkEnvValues() error {
	if t.Component == nil {
		return nil
	}
	for i, r := range t.url.Refs() {
		if r.Root != refs.RootEnv {
			continue
		}
		v, ok := t.Component.Env[r.Path[0]]
		if !ok {
			continue
		}
		if _, err := t.urlEncs[i](v); err != nil {
			return fmt.Errorf("reference %s: %w", r, err)
		}
	}
	return nil
}

// checkPathShape refuses dot segments written by the author, by the same
// rule Request applies to the resolved path: a path is what it says, and
// a literal that passes here never fails a call.
func checkPathShape(escapedPath string) error {
	for _, seg := range strings.Split(escapedPath, "/") {
		if isDotSegment(seg) {
			return fmt.Errorf("dot segments are not allowed")
		}
	}
	return nil
}

func escapeQuery(s string) (string, error) { return url.QueryEscape(s), nil }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Refs lists every reference the target holds.
func (t *Target) Refs() []refs.Ref {
	var out []refs.Ref
	if t.url != nil {
		out = append(out, t.url.Refs()...)
	}
	for _, p := range t.query {
		out = append(out, p.val.Refs()...)
	}
	for _, p := range t.headers {
		out = append(out, p.val.Refs()...)
	}
	if t.body != nil {
		out = append(out, t.body.Refs()...)
	}
	return out
}

// Env returns the env references resolve against.
func (t *Target) Env() map[string]string {
	if t.Component == nil {
		return nil
	}
	return t.Component.Env
}

// Request builds the HTTP request for one call. It fails with a
// *refs.MissingError when a reference has no value, and with a plain error
// when a resolved value breaks a rule (a CR/LF in a header, a dot segment).
//
// tokens are the user's access tokens of the target's Connections.
func (t *Target) Request(ctx context.Context, input any, tokens map[string]string) (*http.Request, error) {
	scope := refs.Scope{Input: input, Env: t.Env(), Connections: tokens}
	if t.op != nil {
		return t.operationRequest(ctx, scope)
	}
	if t.url == nil {
		return nil, fmt.Errorf("%s targets are not sent over HTTP", t.kind.Name())
	}
	raw, err := t.url.ExpandEach(scope, t.urlEncs)
	if err != nil {
		return nil, err
	}
	raw = t.base + raw
	if len(t.query) > 0 {
		q := make(url.Values, len(t.query))
		for _, p := range t.query {
			v, err := p.val.Expand(scope, nil)
			if err != nil {
				return nil, err
			}
			q.Set(p.key, v)
		}
		sep := "?"
		if strings.Contains(raw, "?") {
			sep = "&"
		}
		raw += sep + q.Encode()
	}
	var body io.Reader
	if t.body != nil {
		b, err := t.body.ResolveJSON(scope)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	if t.socket != nil {
		// The socket comes from the target, not from the URL: whatever
		// the URL holds, the request goes nowhere else.
		ctx = withSocket(ctx, t.socket)
	}
	req, err := http.NewRequestWithContext(ctx, t.Spec.Method, raw, body)
	if err != nil {
		return nil, fmt.Errorf("the resolved URL does not parse: %v", err)
	}
	// escapeSegment refused every value of dots alone, and checkPathShape
	// every literal dot segment; the resolved path is checked once more so
	// that a change to either cannot let a climb through. The message names
	// the path as written: the resolved one may hold an ${env.NAME} secret.
	for seg := range strings.SplitSeq(req.URL.EscapedPath(), "/") {
		if isDotSegment(seg) {
			return nil, fmt.Errorf("the path of %q would resolve to a dot segment (a path reference must stay in its segment)", t.url.Source())
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := t.setHeaders(req, scope); err != nil {
		return nil, err
	}
	return req, nil
}

// setHeaders sets the target's headers on req, their references resolved.
func (t *Target) setHeaders(req *http.Request, scope refs.Scope) error {
	for _, p := range t.headers {
		v, err := p.val.Expand(scope, nil)
		if err != nil {
			return err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %s: the resolved value holds CR, LF or NUL", p.key)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return fmt.Errorf("header %s: the resolved value is not a valid header value", p.key)
		}
		req.Header.Set(p.key, v)
	}
	return nil
}
