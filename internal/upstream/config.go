// Package upstream puts MCP servers behind the gateway: it connects to
// each one (Streamable HTTP, or a command over stdio) with the official
// Go SDK's client, keeps its tool list fresh, and calls its tools for the
// gateway's mcp targets (dispatch.MCPServer), mapping each answer onto a
// tool result or, for input the server asks for, a card.
package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/verify"
)

// Config is one upstream MCP server as the config declares it.
type Config struct {
	// Name is the server's name: the identity tokens' audience, and how
	// logs, metrics and errors name it.
	Name string
	// URL is its Streamable HTTP endpoint: https, or http to a loopback
	// address, or unix//PATH (a unix socket; the endpoint path is /mcp).
	URL string
	// Command starts it instead, speaking MCP over its stdin and stdout:
	// the program and its arguments. Its stderr goes to the log.
	Command []string
	// Env is the command's whole environment, besides PATH, HOME and LANG
	// taken from the gateway's: the gateway's own (which holds other
	// components' secrets) is never passed on.
	Env map[string]string
	// Dir is the command's working directory. Default: the gateway's.
	Dir string
	// Tools are the server's tools to serve, by their names there.
	// Default: all it lists.
	Tools []string
	// Prefix is put before each tool's name in the gateway's list.
	Prefix string
	// Headers are static request headers, resolved at load.
	Headers map[string]string
	// Allow is the allow expression (expr-lang) of every tool the server
	// lists; empty, every caller may call them.
	Allow string
	// Approval and Limits are every listed tool's approval rule and
	// quotas (each tool counted on its own).
	Approval *manifest.Approval
	Limits   []string
	// Identity sends each call the user's identity token as
	// Authorization: Bearer, with aud the server's name.
	Identity bool
	// Connection sends each call the calling user's access token of the
	// named connection as Authorization: Bearer instead. The tool list is
	// read with the static headers only.
	Connection string
	// Timeout bounds connecting, listing, and each call. Default: 30s.
	Timeout time.Duration
	// MaxResultSize bounds an answer, in bytes. Default: 1 MiB.
	MaxResultSize int64
}

// Defaults of Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxResultSize = 1 << 20
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// unixPrefix spells a unix socket address, as components do.
const unixPrefix = "unix//"

// Check checks c and fills its defaults. Errors name the server.
func (c *Config) Check() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("mcp server %q: %w", c.Name, err)
	}
	return nil
}

func (c *Config) check() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("the name must match %s", nameRE)
	}
	switch {
	case c.URL == "" && len(c.Command) == 0:
		return errors.New("give a URL or a command")
	case c.URL != "" && len(c.Command) > 0:
		return errors.New("give a URL or a command, not both")
	case c.URL != "":
		if err := checkURL(c.URL); err != nil {
			return err
		}
		if len(c.Env) > 0 || c.Dir != "" {
			return errors.New("env and dir are for a command")
		}
	default:
		if c.Command[0] == "" {
			return errors.New("the command is empty")
		}
	}
	if c.Prefix != "" && !regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`).MatchString(c.Prefix) {
		return fmt.Errorf("prefix %q must match ^[a-zA-Z0-9_-]{1,32}$", c.Prefix)
	}
	for _, t := range c.Tools {
		if t == "" {
			return errors.New("a tool name is empty")
		}
	}
	for k, v := range c.Headers {
		canon := http.CanonicalHeaderKey(k)
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return fmt.Errorf("%q is not a valid header name", k)
		case !httpguts.ValidHeaderFieldValue(v):
			return fmt.Errorf("header %q has an invalid value", k)
		case slices.Contains(reservedHeaders, canon):
			return fmt.Errorf("header %q is the transport's or the protocol's", k)
		case canon == "Authorization" && c.Identity:
			return errors.New("header Authorization: identity sends one already")
		case canon == "Authorization" && c.Connection != "":
			return errors.New("header Authorization: the connection sends one already")
		}
	}
	if len(c.Headers) > 0 && len(c.Command) > 0 {
		return errors.New("headers are for a URL; a command gets env")
	}
	if c.Identity && len(c.Command) > 0 {
		return errors.New("identity is sent in an HTTP header: a command has none (give its env what it needs)")
	}
	if c.Connection != "" && len(c.Command) > 0 {
		return errors.New("a connection's token is sent in an HTTP header: a command has none")
	}
	if c.Connection != "" && c.Identity {
		return errors.New("identity and connection both send Authorization: choose one")
	}
	if c.Timeout < 0 || c.MaxResultSize < 0 {
		return errors.New("timeout and max_result_size must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxResultSize == 0 {
		c.MaxResultSize = DefaultMaxResultSize
	}
	return nil
}

// reservedHeaders are set by the HTTP transport or the MCP client.
var reservedHeaders = []string{
	"Host", "Content-Length", "Content-Type", "Accept", "Transfer-Encoding", "Connection", "Te", "Upgrade", "Trailer",
	"Keep-Alive", "Proxy-Connection", "Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id",
}

// checkURL allows https, http only to a loopback address (a name that
// resolves elsewhere could carry tokens in the clear), and unix//PATH.
func checkURL(raw string) error {
	if path, ok := strings.CutPrefix(raw, unixPrefix); ok {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("url %q: a unix socket path must be absolute", raw)
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %v", raw, err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("url %q must be an absolute URL with no user info or fragment", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !verify.IsLoopbackHost(u.Hostname()) {
			return fmt.Errorf("url %q: http only to a loopback address (127.0.0.1, ::1, localhost); use https", raw)
		}
	default:
		return fmt.Errorf("url %q must be https (or http to loopback, or unix//PATH)", raw)
	}
	return nil
}

// endpoint is the URL the client posts to: a unix socket's is
// http://localhost/mcp, dialled on the socket.
func (c *Config) endpoint() (endpoint, socket string) {
	if path, ok := strings.CutPrefix(c.URL, unixPrefix); ok {
		return "http://localhost/mcp", path
	}
	return c.URL, ""
}

// wants reports whether the server's tool named name is served.
func (c *Config) wants(name string) bool {
	return len(c.Tools) == 0 || slices.Contains(c.Tools, name)
}
