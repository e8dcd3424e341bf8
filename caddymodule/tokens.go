package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/httpapi"
)

// Tokens configures how one kind of bearer token is verified: against
// exactly one of a JWKS URL, a public key file or a shared secret.
//
// JWKSURL, KeyFile and Secret may hold Caddy placeholders such as
// {env.NAME} or {file./path}, resolved once at load; an unknown or empty
// one is a config error.
type Tokens struct {
	// JWKSURL is where the signer's public keys are published: an https
	// URL (http only to a loopback host). The set is cached, fetched again
	// every 10 minutes, and on an unknown kid at most once per 30 seconds.
	JWKSURL string `json:"jwks_url,omitempty"`

	// KeyFile is a PEM file with the signer's public key (PKIX "PUBLIC
	// KEY": Ed25519, RSA of at least 2048 bits, or ECDSA).
	KeyFile string `json:"key_file,omitempty"`

	// Secret is a shared HS256/384/512 secret of at least 32 bytes.
	Secret string `json:"secret,omitempty"`

	// Issuer, when set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`

	// Audience, when set, must be among the token's aud. Required when
	// both callers and pages are configured, each its own, so that one
	// kind of token is never taken for the other.
	Audience string `json:"audience,omitempty"`

	// Leeway allows for clock skew on exp and nbf; at most 5m.
	// Default: 30s.
	Leeway caddy.Duration `json:"leeway,omitzero"`
}

// Callers configures how runtime callers authenticate: every call to the
// runtime endpoints carries `Authorization: Bearer <JWT>`, and the call's
// identity comes from its claims. Unset, the loopback-only default
// applies (see Handler).
type Callers struct {
	Tokens

	// UserClaim names the claim holding the user. Default: sub.
	UserClaim string `json:"user_claim,omitempty"`

	// InstallClaim names the claim holding the installation. Set (even
	// to install), it also says that installations are in use: then every
	// page token must name one too (Pages.InstallClaim), or it is refused,
	// as it could see no call. Default: install.
	InstallClaim string `json:"install_claim,omitempty"`

	// AuthorizationServers are the OAuth authorization servers (their
	// RFC 8414 issuer URLs: https, http only to a loopback host) whose
	// access tokens MCP clients bring. Set, toolgate publishes the OAuth
	// protected resource metadata of /mcp (RFC 9728) at
	// /.well-known/oauth-protected-resource and
	// /.well-known/oauth-protected-resource/mcp under its mount, and the
	// 401 and 403 of /mcp name it in WWW-Authenticate, which is how an MCP
	// client finds where to get a token. toolgate never issues one.
	// Requires Resource or Audience. Default: none.
	AuthorizationServers []string `json:"authorization_servers,omitempty"`

	// Resource is the canonical URI of this gateway's /mcp (RFC 8707,
	// RFC 9728), as clients reach it, such as
	// https://example.com/toolgate/mcp: an absolute https URL (http only
	// to a loopback host) without a fragment. The metadata names it, and a
	// token must name it in aud, or name Audience when that is set too.
	// Default: none; the metadata then names the /mcp a request reached,
	// from its Host, and only Audience is accepted.
	Resource string `json:"resource,omitempty"`

	// Scopes are the scopes every caller token must carry, in its scope
	// claim (space separated) or scp claim (array), on every runtime
	// endpoint; a token without one is refused with 403
	// insufficient_scope. The metadata lists them. Default: none.
	Scopes []string `json:"scopes,omitempty"`
}

// Pages configures the page tokens: JWTs the app mints for one user of
// one installation and one thread (claims sub, install and thread), which
// the browser client sends to the page endpoints. A page sees only the
// client tool calls of its token's (user, installation, thread): a token
// without an installation only calls without one. The Secret of
// Caddyfile.example's public fallback is refused unless every listener of
// the http app is on loopback.
//
// The caps below bound what pages hold; with the Redis ledger each
// gateway instance counts its own calls and streams.
type Pages struct {
	Tokens

	// InstallClaim names the page token's claim holding the installation.
	// When the callers block sets its install_claim, installations are in
	// use and every page token must carry this claim (401 otherwise).
	// Default: install.
	InstallClaim string `json:"install_claim,omitempty"`

	// Origins are page origins other than the gateway's own site that may
	// use the page endpoints and client.js; toolgate answers CORS for
	// them, preflight included.
	Origins []string `json:"origins,omitempty"`

	// MaxPendingPerThread caps the client tool calls of one thread (of
	// one user in one installation) that wait for a page; a new call over
	// it is turned away with 429 and Retry-After before anything is
	// recorded. Default: 64.
	MaxPendingPerThread int `json:"max_pending_per_thread,omitzero"`

	// MaxPendingPerUser caps the client tool calls of one user in one
	// installation that wait for a page, all threads together, as
	// MaxPendingPerThread: a caller names any thread it likes.
	// Default: 256.
	MaxPendingPerUser int `json:"max_pending_per_user,omitzero"`

	// MaxPending caps the client tool calls that wait for a page in all,
	// across users and threads, as MaxPendingPerThread. Default: 10000.
	MaxPending int `json:"max_pending,omitzero"`

	// MaxStreamsPerToken caps the open call streams (GET /client/calls)
	// of one page token; one over it is refused with 429. Default: 16.
	MaxStreamsPerToken int `json:"max_streams_per_token,omitzero"`

	// MaxStreamsPerThread caps the open call streams of one thread (of
	// one user in one installation), whatever tokens they use, as
	// MaxStreamsPerToken. Default: 16.
	MaxStreamsPerThread int `json:"max_streams_per_thread,omitzero"`

	// MaxStreams caps the open call streams in all, as
	// MaxStreamsPerToken. Default: 10000.
	MaxStreams int `json:"max_streams,omitzero"`
}

// config resolves t's placeholders into the authenticator's config.
func (t *Tokens) config(repl *caddy.Replacer, kind string) (httpapi.TokenConfig, error) {
	c := httpapi.TokenConfig{Issuer: t.Issuer, Audience: t.Audience, Leeway: time.Duration(t.Leeway)}
	for _, f := range []struct {
		name string
		in   string
		out  *string
	}{{"jwks_url", t.JWKSURL, &c.JWKSURL}, {"key_file", t.KeyFile, &c.KeyFile}, {"secret", t.Secret, &c.Secret}} {
		if f.in == "" {
			continue
		}
		v, err := resolve(repl, kind+": "+f.name, f.in)
		if err != nil {
			return c, err
		}
		*f.out = v
	}
	return c, nil
}

// limits maps the caps onto the bridge's limits; p may be nil (defaults).
func (p *Pages) limits() (clienttools.Limits, error) {
	if p == nil {
		return clienttools.Limits{}, nil
	}
	for name, n := range map[string]int{
		"max_pending_per_thread": p.MaxPendingPerThread,
		"max_pending_per_user":   p.MaxPendingPerUser,
		"max_pending":            p.MaxPending,
		"max_streams_per_token":  p.MaxStreamsPerToken,
		"max_streams_per_thread": p.MaxStreamsPerThread,
		"max_streams":            p.MaxStreams,
	} {
		if n < 0 {
			return clienttools.Limits{}, fmt.Errorf("pages: %s must not be negative", name)
		}
	}
	return clienttools.Limits{
		PendingPerThread: p.MaxPendingPerThread, PendingPerUser: p.MaxPendingPerUser, Pending: p.MaxPending,
		StreamsPerToken: p.MaxStreamsPerToken, StreamsPerThread: p.MaxStreamsPerThread, Streams: p.MaxStreams,
	}, nil
}

// authenticators builds the callers' and the pages' authenticators, either
// nil when not configured.
func (h *Handler) authenticators(ctx caddy.Context, repl *caddy.Replacer) (callers, pages *httpapi.Authenticator, err error) {
	var cc, pc *httpapi.TokenConfig
	if h.Callers != nil {
		c, err := h.Callers.config(repl, "callers")
		if err != nil {
			return nil, nil, err
		}
		c.UserClaim, c.InstallClaim = h.Callers.UserClaim, h.Callers.InstallClaim
		c.AuthorizationServers, c.Resource, c.Scopes = h.Callers.AuthorizationServers, h.Callers.Resource, h.Callers.Scopes
		cc = &c
	}
	if h.Pages != nil {
		c, err := h.Pages.config(repl, "pages")
		if err != nil {
			return nil, nil, err
		}
		if c.Secret == examplePageSecret {
			if err := loopbackOnly(ctx, repl); err != nil {
				return nil, nil, fmt.Errorf("pages: secret is the example's public fallback, which lets anyone sign page tokens; it is refused unless every listener is on loopback: %w; set TOOLGATE_PAGE_SECRET", err)
			}
			h.logger.Warn("pages: the secret is the example's public fallback: anyone who reads Caddyfile.example can sign page tokens; accepted only because every listener is on loopback; set TOOLGATE_PAGE_SECRET")
		}
		c.InstallClaim = h.Pages.InstallClaim
		pc = &c
	}
	return httpapi.NewAuthenticators(cc, pc, h.logger)
}
