package caddymodule

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/observe"
)

// Connection is a service at which each user connects their own account
// (OAuth 2.0): a url target sends the user's token with
// ${connection.NAME}, an mcp_server with `connection NAME`. Either the
// authorization flow (authorize_url, token_url, client_id, …) or a token
// exchange (exchange, audience).
type Connection struct {
	// Title is the service's name on the card ("Connect Gmail").
	// Default: the connection's name, capitalized.
	Title string `json:"title,omitempty"`

	// AuthorizeURL and TokenURL are the service's OAuth endpoints: https,
	// http only to a loopback host.
	AuthorizeURL string `json:"authorize_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty"`
	// ClientID and ClientSecret are the gateway's client at the service;
	// placeholders such as {env.GMAIL_CLIENT_SECRET} are resolved at load.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// ClientAuth is "basic" (the default) or "post".
	ClientAuth string `json:"client_auth,omitempty"`
	// Scopes are asked for on the authorization page.
	Scopes []string `json:"scopes,omitempty"`
	// RedirectURL is the gateway's callback as the service knows it.
	// Default: derived from the request that answered the card.
	RedirectURL string `json:"redirect_url,omitempty"`
	// Params are added to the authorization URL.
	Params map[string]string `json:"params,omitempty"`

	// Exchange is an RFC 8693 token endpoint, instead of the flow: the
	// user's identity token (aud the connection's name) is exchanged for
	// the service's; Audience is sent with it.
	Exchange string `json:"exchange,omitempty"`
	Audience string `json:"audience,omitempty"`
}

// UnmarshalCaddyfile sets up the connection from `<name> {…}`.
func (c *Connection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume the connection's name
	if d.NextArg() {
		return d.ArgErr()
	}
	return parseBlock(d, "connection subdirective", map[string]option{
		"title":         stringArg(&c.Title),
		"authorize_url": stringArg(&c.AuthorizeURL),
		"token_url":     stringArg(&c.TokenURL),
		"client_id":     stringArg(&c.ClientID),
		"client_secret": stringArg(&c.ClientSecret),
		"client_auth":   stringArg(&c.ClientAuth),
		"scopes":        listArg(&c.Scopes),
		"redirect_url":  stringArg(&c.RedirectURL),
		"param":         pairArg(&c.Params, ""),
		"exchange":      stringArg(&c.Exchange),
		"audience":      stringArg(&c.Audience),
	})
}

// config is the connection's connect.Config, placeholders resolved, and
// checked.
func (c *Connection) config(repl *caddy.Replacer, name string) (connect.Config, error) {
	if c == nil {
		return connect.Config{}, fmt.Errorf("connection %q: no config", name)
	}
	out := connect.Config{Name: name, Title: c.Title, ClientAuth: c.ClientAuth, Scopes: c.Scopes}
	what := fmt.Sprintf("connection %q: ", name)
	for _, f := range []struct {
		option string
		from   string
		to     *string
	}{
		{"authorize_url", c.AuthorizeURL, &out.AuthorizeURL},
		{"token_url", c.TokenURL, &out.TokenURL},
		{"client_id", c.ClientID, &out.ClientID},
		{"client_secret", c.ClientSecret, &out.ClientSecret},
		{"redirect_url", c.RedirectURL, &out.RedirectURL},
		{"exchange", c.Exchange, &out.Exchange},
		{"audience", c.Audience, &out.Audience},
	} {
		v, err := resolve(repl, what+f.option, f.from)
		if err != nil {
			return out, err
		}
		*f.to = v
	}
	var err error
	if out.Params, err = resolveEach(repl, what+"param", c.Params); err != nil {
		return out, err
	}
	return out, out.Check()
}

// checkConnectionNames checks the names by which connections are given
// and named, where the Caddyfile is adapted and again at load (a JSON
// config is not adapted).
func (h *Handler) checkConnectionNames() error {
	if len(h.ConnectionKeys) > 0 && len(h.Connections) == 0 {
		return errors.New("connection_keys: no connection is declared")
	}
	for _, name := range slices.Sorted(maps.Keys(h.Connections)) {
		_, component := h.Components[name]
		_, server := h.MCPServers[name]
		if component || server {
			// An exchange sends an identity token addressed to the
			// connection's name, which must not open a component or a
			// server of the same name.
			return fmt.Errorf("connection %q: a component or mcp server has the same name; identity tokens name their audience by it", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(h.MCPServers)) {
		if m := h.MCPServers[name]; m != nil && m.Connection != "" && h.Connections[m.Connection] == nil {
			return fmt.Errorf("mcp server %q: connection %q is not declared", name, m.Connection)
		}
	}
	return nil
}

// connectionNames are the declared connections, for compiling targets.
func (h *Handler) connectionNames() map[string]bool {
	out := make(map[string]bool, len(h.Connections))
	for name := range h.Connections {
		out[name] = true
	}
	return out
}

// connectionKeyStorage is where a generated connection key is kept in
// Caddy's storage, beside the identity key.
const connectionKeyStorage = "toolgate/connections/aes-256.key"

// connectionConfigs are the connections' configs, placeholders resolved
// and checked, and the keys that seal their tokens: the files of
// connection_keys (the first seals, all open), or a key generated once and
// kept in Caddy's storage. None when no connection is declared. What can
// be wrong with a connection is found here (its names, by
// checkConnectionNames, earlier), before the store opens.
func (h *Handler) connectionConfigs(ctx caddy.Context, repl *caddy.Replacer) ([]connect.Config, *connect.Keys, error) {
	if len(h.Connections) == 0 {
		return nil, nil, nil
	}
	var conns []connect.Config
	for _, name := range slices.Sorted(maps.Keys(h.Connections)) {
		c, err := h.Connections[name].config(repl, name)
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	keys, err := h.connectionKeys(ctx, repl)
	if err != nil {
		return nil, nil, fmt.Errorf("connection_keys: %w", err)
	}
	return conns, keys, nil
}

// connections makes the connections' Manager on the store's back end;
// nil when none is declared.
func (h *Handler) connections(conns []connect.Config, keys *connect.Keys, st connect.Store, issuer *identity.Issuer, obs observe.Observer) (*connect.Manager, error) {
	if len(conns) == 0 {
		return nil, nil
	}
	return connect.New(conns, connect.Options{
		Store: st, Keys: keys, Logger: h.logger.Named("connections"), IdentityToken: issuer.Token, Event: obs.Connection,
	})
}

func (h *Handler) connectionKeys(ctx caddy.Context, repl *caddy.Replacer) (*connect.Keys, error) {
	if len(h.ConnectionKeys) == 0 {
		k, err := storedConnectionKey(ctx)
		if err != nil {
			return nil, err
		}
		return connect.NewKeys(k)
	}
	var keys []connect.Key
	for i, f := range h.ConnectionKeys {
		path, err := resolve(repl, fmt.Sprintf("file %d", i+1), f)
		if err != nil {
			return nil, err
		}
		k, err := connect.ReadKeyFile(path)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return connect.NewKeys(keys[0], keys[1:]...)
}

// storedConnectionKey reads the key kept in Caddy's storage, making it
// the first time, as the identity key is.
func storedConnectionKey(ctx caddy.Context) (connect.Key, error) {
	var k connect.Key
	err := identity.LoadOrStore(ctx, ctx.Storage(), connectionKeyStorage,
		func(data []byte) (err error) { k, err = connect.ParseKey(data); return err },
		func() ([]byte, error) {
			data := connect.GenerateKey()
			var err error
			k, err = connect.ParseKey(data)
			return data, err
		})
	return k, err
}
