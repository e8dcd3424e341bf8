// Package connect keeps each user's own accounts at other services (their
// OAuth tokens) for the targets that act on them: a url target's
// ${connection.NAME} and an upstream MCP server's connection. A connection
// is made through the gateway's own card, whose button opens the service's
// authorization page (authorization code with PKCE); the service answers
// on the gateway's callback, which stores the token sealed (AES-GCM) in
// the store, per (user, install, connection), and refreshes it before it
// expires, one refresh at a time across instances. A connection of the
// token-exchange kind needs no person: the gateway exchanges its signed
// identity token for the service's (RFC 8693).
package connect

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/verify"
)

// Config is one connection as the config declares it.
type Config struct {
	// Name is how targets name it: ${connection.NAME}, and an MCP
	// server's connection NAME.
	Name string
	// Title is the service's name as a person reads it, on the card
	// ("Connect Gmail"). Default: Name with its first letter capitalized.
	Title string

	// AuthorizeURL and TokenURL are the service's OAuth 2.0 endpoints
	// (authorization code flow with PKCE S256).
	AuthorizeURL string
	TokenURL     string
	// ClientID and ClientSecret are the gateway's OAuth client at the
	// service; ClientSecret may be empty for a public client.
	ClientID     string
	ClientSecret string
	// ClientAuth is how the client authenticates at the token endpoint:
	// "basic" (HTTP Basic, the default) or "post" (in the form).
	ClientAuth string
	// Scopes are asked for on the authorization page.
	Scopes []string
	// RedirectURL is the callback the service sends the browser back to:
	// the gateway's /connections/NAME/callback as the service knows it.
	// Default: derived from the request that answered the card.
	RedirectURL string
	// Params are added to the authorization URL (access_type=offline,
	// prompt=consent), never over the flow's own.
	Params map[string]string

	// Exchange is an RFC 8693 token endpoint: the connection is made by
	// exchanging the gateway's identity token for the user instead, and
	// AuthorizeURL and TokenURL are not set. Audience is sent with it.
	Exchange string
	Audience string
}

// Client authentication methods at the token endpoint.
const (
	ClientAuthBasic = "basic"
	ClientAuthPost  = "post"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// flowParams are the authorization URL's own: Params may not set them.
var flowParams = []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method"}

// Check checks c and fills its defaults. Errors name the connection.
func (c *Config) Check() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("connection %q: %w", c.Name, err)
	}
	return nil
}

func (c *Config) check() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("the name must match %s", nameRE)
	}
	if c.Title == "" {
		r, n := utf8.DecodeRuneInString(c.Name)
		c.Title = string(unicode.ToUpper(r)) + c.Name[n:]
	}
	if len(c.Title) > 100 || strings.ContainsAny(c.Title, "\r\n\x00") {
		return errors.New("title must be one line of at most 100 bytes")
	}
	switch c.ClientAuth {
	case "":
		c.ClientAuth = ClientAuthBasic
	case ClientAuthBasic, ClientAuthPost:
	default:
		return fmt.Errorf("client_auth %q is not basic or post", c.ClientAuth)
	}
	if c.Exchange != "" {
		if c.AuthorizeURL != "" || c.TokenURL != "" || len(c.Scopes) > 0 || c.RedirectURL != "" || len(c.Params) > 0 {
			return errors.New("exchange makes the connection without a person: authorize_url, token_url, scopes, redirect_url and params are for the authorization flow")
		}
		if err := checkEndpoint("exchange", c.Exchange); err != nil {
			return err
		}
		return nil
	}
	if c.Audience != "" {
		return errors.New("audience is for exchange")
	}
	if c.AuthorizeURL == "" || c.TokenURL == "" {
		return errors.New("give authorize_url and token_url (the authorization flow), or exchange")
	}
	if c.ClientID == "" {
		return errors.New("client_id is required")
	}
	for _, e := range []struct{ what, url string }{{"authorize_url", c.AuthorizeURL}, {"token_url", c.TokenURL}} {
		if err := checkEndpoint(e.what, e.url); err != nil {
			return err
		}
	}
	if c.RedirectURL != "" {
		if err := checkEndpoint("redirect_url", c.RedirectURL); err != nil {
			return err
		}
		if u, _ := url.Parse(c.RedirectURL); u.RawQuery != "" {
			return errors.New("redirect_url must not hold a query")
		}
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return fmt.Errorf("scope %q is not one scope token", s)
		}
	}
	for k := range c.Params {
		for _, p := range flowParams {
			if strings.EqualFold(k, p) {
				return fmt.Errorf("param %q is the flow's own", k)
			}
		}
	}
	return nil
}

// checkEndpoint allows https, and http only to a loopback host: a code,
// a refresh token or an identity token sent in the clear could be read
// on the way. No user info or fragment.
func checkEndpoint(what, raw string) error {
	if err := verify.CheckSecureURL(raw); err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	if u, _ := url.Parse(raw); u.Fragment != "" {
		return fmt.Errorf("%s %q must not hold a fragment", what, raw)
	}
	return nil
}

// Exchanges reports whether the connection is made by token exchange,
// without a person.
func (c *Config) Exchanges() bool { return c.Exchange != "" }
