package httpapi

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/verify"
)

// DefaultLeeway is the clock skew allowed on bearer tokens.
const DefaultLeeway = 30 * time.Second

// MaxLeeway bounds the configured leeway: an expired token is not
// accepted for longer than that.
const MaxLeeway = 5 * time.Minute

// TokenConfig is how one kind of bearer token (callers', pages') is
// verified: against exactly one of a JWKS URL, a public key file or a
// shared secret, with placeholders already resolved.
type TokenConfig struct {
	JWKSURL  string
	KeyFile  string
	Secret   string
	Issuer   string
	Audience string
	// Leeway allows for clock skew on exp and nbf; 0 means DefaultLeeway.
	Leeway time.Duration
	// UserClaim and InstallClaim name the claims holding the user and the
	// installation. Defaults: sub, install. A page token's user is always
	// sub. For callers an empty InstallClaim takes the default; one set
	// says that calls carry installations, so that every page token must
	// name one too (NewAuthenticators).
	UserClaim    string
	InstallClaim string
	// ThreadClaim, when set, names a claim the token must hold: the one
	// thread a page token is for.
	ThreadClaim string

	// Callers only: OAuth 2.0 resource server settings (MCP authorization).

	// Resource is the canonical URI of /mcp (RFC 8707, RFC 9728): an
	// absolute URL without a fragment. Set, a token must name it in aud,
	// or name Audience when that is set too.
	Resource string
	// AuthorizationServers are the issuers of tokens for this resource
	// (RFC 8414 issuer URLs). Set, the protected resource metadata is
	// published and /mcp's challenges point to it.
	AuthorizationServers []string
	// Scopes are the scopes a token must all carry, in its scope (space
	// separated) or scp (array) claim.
	Scopes []string
}

// Authenticator checks one kind of bearer token and maps its claims to
// who is calling. Callers, pages and MCP each use one.
type Authenticator struct {
	kind     string // "callers" or "pages": names config errors
	realm    string // of the WWW-Authenticate challenge
	verifier *verify.Verifier
	cfg      TokenConfig
	leeway   time.Duration // allowed on exp, as the verifier allows it
	// requireInstall: page tokens without an installation are refused.
	requireInstall bool
}

// Principal is who a verified token names.
type Principal struct {
	Identity gateway.Identity
	Thread   string // the ThreadClaim's value, when configured
	Device   string // the device claim, when present
	Claims   map[string]any
	// Expires is the token's exp, which the verifier requires.
	Expires time.Time
	// Scopes are the token's scope and scp claims' scopes.
	Scopes []string
	// token is the verified token itself.
	token string
}

// NewAuthenticators returns the authenticators of runtime callers' tokens
// and of page tokens, each nil when its config is. Page tokens name the
// user in sub, the one thread the page may see in thread, and the
// installation in pages.InstallClaim (default install); a page sees only
// the calls of that user, installation and thread, and a token without an
// installation only calls without one. When callers.InstallClaim is set,
// installations are in use: a page token without one (which could see
// nothing) is refused. With both configured, each kind must name its own
// audience and refuse the other's, so that neither is ever taken for the
// other.
func NewAuthenticators(callers, pages *TokenConfig, logger *zap.Logger) (c, p *Authenticator, err error) {
	if err := checkAudiences(callers, pages); err != nil {
		return nil, nil, err
	}
	if callers != nil {
		var refuse []string
		if pages != nil {
			refuse = []string{pages.Audience}
		}
		if c, err = newAuthenticator("callers", "toolgate", *callers, refuse, logger); err != nil {
			return nil, nil, err
		}
	}
	if pages != nil {
		var refuse []string
		if callers != nil {
			refuse = callers.audiences()
		}
		cfg := *pages
		cfg.UserClaim, cfg.ThreadClaim = "sub", "thread"
		if cfg.InstallClaim == "" {
			cfg.InstallClaim = "install"
		}
		if p, err = newAuthenticator("pages", "toolgate-page", cfg, refuse, logger); err != nil {
			return nil, nil, err
		}
		p.requireInstall = callers != nil && callers.InstallClaim != ""
	}
	return c, p, nil
}

func newAuthenticator(kind, realm string, cfg TokenConfig, refuse []string, logger *zap.Logger) (*Authenticator, error) {
	n := 0
	for _, s := range []string{cfg.JWKSURL, cfg.KeyFile, cfg.Secret} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%s: set exactly one of jwks_url, key_file and secret", kind)
	}
	if err := checkResourceServer(kind, cfg); err != nil {
		return nil, err
	}
	if cfg.Leeway < 0 || cfg.Leeway > MaxLeeway {
		return nil, fmt.Errorf("%s: leeway %v must be between 0 and %v", kind, cfg.Leeway, MaxLeeway)
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if cfg.InstallClaim == "" && kind == "callers" {
		cfg.InstallClaim = "install"
	}
	opts := verify.Options{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: cfg.Leeway}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if cfg.Resource != "" {
		// The resource is the audience an authorization server names
		// (RFC 8707); a configured audience stays accepted beside it.
		opts.Audiences = []string{cfg.Resource}
	}
	opts.RefuseAudiences = refuse
	a := &Authenticator{kind: kind, realm: realm, cfg: cfg, leeway: opts.Leeway}
	var err error
	switch {
	case cfg.JWKSURL != "":
		if err = verify.CheckSecureURL(cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("%s: jwks_url: %w", kind, err)
		}
		var logs *slog.Logger
		if logger != nil {
			logs = slog.New(zapslog.NewHandler(logger.Core(), zapslog.WithName(logger.Name())))
		}
		a.verifier = verify.NewJWKSVerifier(verify.NewRemoteKeySet(cfg.JWKSURL, identity.DecodeJWK, nil, logs), opts)
	case cfg.KeyFile != "":
		if a.verifier, err = keyFileVerifier(cfg.KeyFile, opts); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
	default:
		if a.verifier, err = verify.NewSecretVerifier([]byte(cfg.Secret), opts); err != nil {
			return nil, fmt.Errorf("%s: secret: %w", kind, err)
		}
	}
	return a, nil
}

// Authenticate verifies the request's bearer token. The error is what the
// caller is told, in the 401 and its challenge.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	token, err := verify.BearerToken(r.Header)
	switch {
	case errors.Is(err, verify.ErrNoBearerToken):
		return Principal{}, err
	case err != nil:
		// A malformed header is a token sent and refused.
		return Principal{}, &tokenError{err}
	}
	return a.Verify(r, token)
}

// Verify checks token and maps its claims.
func (a *Authenticator) Verify(r *http.Request, token string) (Principal, error) {
	claims, err := a.verifier.Verify(r.Context(), token)
	if err != nil {
		return Principal{}, &tokenError{err}
	}
	p := Principal{Claims: claims, token: token}
	p.Identity.User, _ = claims[a.cfg.UserClaim].(string)
	if a.cfg.InstallClaim != "" {
		p.Identity.Install, _ = claims[a.cfg.InstallClaim].(string)
	}
	p.Device, _ = claims["device"].(string)
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		p.Expires = exp.Time
	}
	p.Scopes = tokenScopes(claims)
	if a.cfg.ThreadClaim != "" {
		if err := a.checkPage(&p, claims); err != nil {
			return Principal{}, &tokenError{err}
		}
		return p, nil
	}
	if err := a.checkIdentity(p.Identity); err != nil {
		return Principal{}, &tokenError{err}
	}
	for _, want := range a.cfg.Scopes {
		if !slices.Contains(p.Scopes, want) {
			return Principal{}, &scopeError{want: a.cfg.Scopes, missing: want}
		}
	}
	return p, nil
}

// acceptedUntil is when p's token stops being accepted: its exp, and the
// leeway allowed on it.
func (a *Authenticator) acceptedUntil(p Principal) time.Time {
	return p.Expires.Add(a.leeway)
}

// checkPage reads a page token's thread and checks what it names: a user,
// a thread, and an installation that is a string within the gateway's
// bounds, present when installations are in use.
func (a *Authenticator) checkPage(p *Principal, claims map[string]any) error {
	p.Thread, _ = claims[a.cfg.ThreadClaim].(string)
	if p.Identity.User == "" || p.Thread == "" {
		return fmt.Errorf("the page token needs string %s and %s claims", a.cfg.UserClaim, a.cfg.ThreadClaim)
	}
	install, present := claims[a.cfg.InstallClaim]
	if _, ok := install.(string); present && !ok {
		return fmt.Errorf("the page token's %q claim must be a string naming the installation", a.cfg.InstallClaim)
	}
	if p.Identity.Install == "" && a.requireInstall {
		return fmt.Errorf("the page token needs a string %q claim naming the installation: the gateway's callers carry installations, and a page sees only its own installation's calls", a.cfg.InstallClaim)
	}
	if err := gateway.CheckIdentity(gateway.Identity{Install: p.Identity.Install}); err != nil {
		return fmt.Errorf("the page token's %q claim cannot name an installation: %v", a.cfg.InstallClaim, err)
	}
	return nil
}

// tokenScopes reads the scopes a token grants: the space-separated scope
// claim (RFC 8693 §4.2, RFC 9068) and the scp array some servers use
// instead. Anything else in them grants nothing.
func tokenScopes(claims map[string]any) []string {
	var scopes []string
	if s, ok := claims["scope"].(string); ok {
		scopes = strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case []any:
		for _, v := range scp {
			if s, ok := v.(string); ok {
				scopes = append(scopes, s)
			}
		}
	case string:
		scopes = append(scopes, strings.Fields(scp)...)
	}
	return scopes
}

// scopeError is a valid token that lacks a scope the gateway requires:
// 403 insufficient_scope (RFC 6750 §3.1), naming every required scope so
// that the client asks for them all at once.
type scopeError struct {
	want    []string
	missing string
}

func (e *scopeError) Error() string {
	return fmt.Sprintf("the token lacks the scope %q (required: %s)", e.missing, strings.Join(e.want, " "))
}

// checkIdentity checks the identity a verified caller token names: a
// user, and a user and installation within the gateway's bounds. A token
// that breaks them is refused (401) like a bad token: it is the
// platform's, so no envelope can fix it.
func (a *Authenticator) checkIdentity(id gateway.Identity) error {
	if id.User == "" {
		return fmt.Errorf("the token has no string %q claim naming the user", a.cfg.UserClaim)
	}
	if err := gateway.CheckIdentity(gateway.Identity{User: id.User}); err != nil {
		return fmt.Errorf("the token's %q claim cannot name a user: %v", a.cfg.UserClaim, err)
	}
	if err := gateway.CheckIdentity(gateway.Identity{Install: id.Install}); err != nil {
		return fmt.Errorf("the token's %q claim cannot name an installation: %v", a.cfg.InstallClaim, err)
	}
	return nil
}

// tokenError is a token that was sent and refused, as opposed to none.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// refuseToken answers a request whose token au refused: 401 with a
// challenge (RFC 6750 §3) naming the error when a token was sent, 403
// insufficient_scope for a token without a required scope. The refusal is
// counted and logged as one of auth.
func (a *API) refuseToken(w http.ResponseWriter, au *Authenticator, err error) {
	a.refuseTokenWith(w, au, err, "")
}

// refuseTokenWith is refuseToken with the challenge's resource_metadata
// URL, when not empty.
func (a *API) refuseTokenWith(w http.ResponseWriter, au *Authenticator, err error, metadataURL string) {
	w.Header().Set("WWW-Authenticate", au.challenge(err, metadataURL))
	var se *scopeError
	if errors.As(err, &se) {
		a.refused(observe.RefusedAuth, "insufficient_scope")
		writeError(w, http.StatusForbidden, "insufficient_scope", err.Error())
		return
	}
	code, msg := "invalid_token", err.Error()
	var te *tokenError
	if !errors.As(err, &te) {
		what := "caller"
		if au.kind == "pages" {
			what = "page"
		}
		code, msg = "unauthorized", "a "+what+" token is required: Authorization: Bearer <JWT>"
	}
	a.refused(observe.RefusedAuth, code)
	writeError(w, http.StatusUnauthorized, code, msg)
}

// Challenge is the WWW-Authenticate value for a refusal: the realm alone
// when no token was sent, with the error when one was refused.
func (a *Authenticator) Challenge(err error) string {
	return a.challenge(err, "")
}

// challenge is Challenge with resource_metadata (RFC 9728 §5.1) when
// metadataURL is not empty, and with the required scopes when there are
// (RFC 6750 §3; insufficient_scope for a token that lacks one).
func (a *Authenticator) challenge(err error, metadataURL string) string {
	c := `Bearer realm="` + a.realm + `"`
	var te *tokenError
	var se *scopeError
	switch {
	case errors.As(err, &se):
		c += `, error="insufficient_scope"`
	case errors.As(err, &te):
		c += `, error="invalid_token", error_description=` + quote(err.Error())
	}
	// The scopes a token needs, on a 401 too: a client asks for them the
	// first time (the MCP authorization spec's scope selection).
	if len(a.cfg.Scopes) > 0 {
		c += ", scope=" + quote(strings.Join(a.cfg.Scopes, " "))
	}
	if metadataURL != "" {
		c += ", resource_metadata=" + quote(metadataURL)
	}
	return c
}

// quote makes s an HTTP quoted-string (RFC 9110 §5.6.4): Go's quoting
// escapes '"' and '\' as quoted-pairs and leaves no control character,
// whatever a Host header or an error holds.
func quote(s string) string { return strconv.Quote(s) }

// errAudience refuses callers without an audience or resource.
var errAudience = errors.New("callers: audience (or resource) is required: without it, tokens for any other app on the same identity provider would be accepted, and page tokens too")

// checkAudiences makes caller and page tokens tell apart: with both
// configured, each names its own audience, so neither kind of token is
// accepted as the other, even when both are signed with one secret.
func checkAudiences(callers, pages *TokenConfig) error {
	if callers == nil || pages == nil {
		return nil
	}
	// Callers always name an audience or resource (checkResourceServer).
	switch {
	case pages.Audience == "":
		return errors.New("pages: audience is required when callers are configured too, so that a caller token is never taken for a page token")
	case slices.Contains(callers.audiences(), pages.Audience):
		return fmt.Errorf("callers and pages: the audience %q is the same; each kind of token needs its own", pages.Audience)
	}
	return nil
}

// audiences are those a caller token may name: the audience and the
// resource, as configured; never one a request names.
func (c *TokenConfig) audiences() []string {
	var auds []string
	for _, a := range []string{c.Audience, c.Resource} {
		if a != "" {
			auds = append(auds, a)
		}
	}
	return auds
}

// checkResourceServer checks the OAuth resource server settings, which
// only callers take. With an authorization server, tokens must be bound
// to this gateway by audience or resource: one issued for any other
// resource of that server would otherwise be taken here (the token
// passthrough the MCP authorization spec forbids).
func checkResourceServer(kind string, cfg TokenConfig) error {
	if kind != "callers" {
		if cfg.Resource != "" || len(cfg.AuthorizationServers) > 0 || len(cfg.Scopes) > 0 {
			return fmt.Errorf("%s: resource, authorization_server and scopes are for callers only", kind)
		}
		return nil
	}
	if cfg.Resource != "" {
		u, err := url.Parse(cfg.Resource)
		switch {
		case err != nil:
			return fmt.Errorf("callers: resource: %w", err)
		case !u.IsAbs() || u.Host == "" || u.Opaque != "":
			return fmt.Errorf("callers: resource %q is not an absolute URL", cfg.Resource)
		case u.Fragment != "" || strings.Contains(cfg.Resource, "#"):
			return fmt.Errorf("callers: resource %q must not have a fragment (RFC 8707 §2)", cfg.Resource)
		}
		if err := verify.CheckSecureURL(cfg.Resource); err != nil {
			return fmt.Errorf("callers: resource: %w", err)
		}
	}
	for _, as := range cfg.AuthorizationServers {
		if err := verify.CheckSecureURL(as); err != nil {
			return fmt.Errorf("callers: authorization_server: %w", err)
		}
		if u, _ := url.Parse(as); u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(as, "?#") {
			return fmt.Errorf("callers: authorization_server %q: an issuer has no query or fragment (RFC 8414 §2)", as)
		}
	}
	// Tokens are bound to this gateway and to one issuer: an identity
	// provider signs tokens for every app it serves, with the same keys,
	// and an authorization server for every resource (the token
	// passthrough the MCP authorization spec forbids).
	if cfg.Resource == "" && cfg.Audience == "" {
		return errAudience
	}
	if cfg.Issuer == "" {
		return errors.New("callers: issuer is required: without it, a token that any other issuer signed with keys this gateway accepts would be taken here")
	}
	for _, s := range cfg.Scopes {
		if !validScope(s) {
			return fmt.Errorf("callers: scopes: %q is not a scope (RFC 6749 §3.3: printable ASCII without space, \" or \\)", s)
		}
	}
	return nil
}

// validScope reports whether s is a scope-token (RFC 6749 §3.3), which
// may appear in a challenge's quoted scope as it is.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// keyFileVerifier verifies tokens against the public key in a PEM file
// (PKIX "PUBLIC KEY"); the key's type decides the algorithms.
func keyFileVerifier(path string, opts verify.Options) (*verify.Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s holds no PEM \"PUBLIC KEY\" block", path)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v, err := verify.NewKeyVerifier(pub, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
