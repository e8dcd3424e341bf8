package httpapi

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/observe"
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
	// installation. Defaults: sub, install.
	UserClaim    string
	InstallClaim string
	// ThreadClaim, when set, names a claim the token must hold: the one
	// thread a page token is for.
	ThreadClaim string
}

// Authenticator checks one kind of bearer token and maps its claims to
// who is calling. Callers, pages and MCP each use one.
type Authenticator struct {
	kind     string // "callers" or "pages": names config errors
	realm    string // of the WWW-Authenticate challenge
	verifier *identity.Verifier
	cfg      TokenConfig
}

// Principal is who a verified token names.
type Principal struct {
	Identity gateway.Identity
	Thread   string // the ThreadClaim's value, when configured
	Device   string // the device claim, when present
	Claims   map[string]any
	// Expires is the token's exp, which the verifier requires.
	Expires time.Time
	// token is the verified token itself.
	token string
}

// NewAuthenticators returns the authenticators of runtime callers' tokens
// and of page tokens, each nil when its config is. Page tokens name the
// user in sub and the one thread the page may see in thread. With both
// configured, each kind must name its own audience and refuse the other's,
// so that neither is ever taken for the other.
func NewAuthenticators(callers, pages *TokenConfig, logger *zap.Logger) (c, p *Authenticator, err error) {
	if err := checkAudiences(callers, pages); err != nil {
		return nil, nil, err
	}
	if callers != nil {
		refuse := ""
		if pages != nil {
			refuse = pages.Audience
		}
		if c, err = newAuthenticator("callers", "toolgate", *callers, refuse, logger); err != nil {
			return nil, nil, err
		}
	}
	if pages != nil {
		refuse := ""
		if callers != nil {
			refuse = callers.Audience
		}
		cfg := *pages
		cfg.UserClaim, cfg.InstallClaim, cfg.ThreadClaim = "sub", "", "thread"
		if p, err = newAuthenticator("pages", "toolgate-page", cfg, refuse, logger); err != nil {
			return nil, nil, err
		}
	}
	return c, p, nil
}

func newAuthenticator(kind, realm string, cfg TokenConfig, refuse string, logger *zap.Logger) (*Authenticator, error) {
	n := 0
	for _, s := range []string{cfg.JWKSURL, cfg.KeyFile, cfg.Secret} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%s: set exactly one of jwks_url, key_file and secret", kind)
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
	opts := identity.VerifyOptions{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: cfg.Leeway}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if refuse != "" {
		opts.RefuseAudiences = []string{refuse}
	}
	a := &Authenticator{kind: kind, realm: realm, cfg: cfg}
	var err error
	switch {
	case cfg.JWKSURL != "":
		if err = checkJWKSURL(cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("%s: jwks_url: %w", kind, err)
		}
		a.verifier = identity.NewJWKSVerifier(identity.NewRemoteKeySet(cfg.JWKSURL, nil, logger), opts)
	case cfg.KeyFile != "":
		if a.verifier, err = keyFileVerifier(cfg.KeyFile, opts); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
	default:
		if a.verifier, err = identity.NewSecretVerifier([]byte(cfg.Secret), opts); err != nil {
			return nil, fmt.Errorf("%s: secret: %w", kind, err)
		}
	}
	return a, nil
}

// Authenticate verifies the request's bearer token. The error is what the
// caller is told, in the 401 and its challenge.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	token, err := identity.BearerToken(r.Header)
	switch {
	case errors.Is(err, identity.ErrNoBearerToken):
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
	if a.cfg.ThreadClaim != "" {
		p.Thread, _ = claims[a.cfg.ThreadClaim].(string)
		if p.Identity.User == "" || p.Thread == "" {
			return Principal{}, &tokenError{fmt.Errorf("the page token needs string %s and %s claims", a.cfg.UserClaim, a.cfg.ThreadClaim)}
		}
		return p, nil
	}
	if err := a.checkIdentity(p.Identity); err != nil {
		return Principal{}, &tokenError{err}
	}
	return p, nil
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
// challenge (RFC 6750 §3) naming the error when a token was sent. The
// refusal is counted and logged as one of auth.
func (a *API) refuseToken(w http.ResponseWriter, au *Authenticator, err error) {
	w.Header().Set("WWW-Authenticate", au.Challenge(err))
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
	var te *tokenError
	if errors.As(err, &te) {
		return fmt.Sprintf(`Bearer realm=%q, error="invalid_token", error_description=%q`, a.realm, err.Error())
	}
	return `Bearer realm="` + a.realm + `"`
}

// checkJWKSURL accepts an https URL, or an http one to a loopback host:
// keys fetched in the clear could be swapped on the way.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q must be an https URL (http only to localhost, 127.0.0.0/8 or ::1)", raw)
}

// checkAudiences makes caller and page tokens tell apart: with both
// configured, each names its own audience, so neither kind of token is
// accepted as the other, even when both are signed with one secret.
func checkAudiences(callers, pages *TokenConfig) error {
	if callers == nil || pages == nil {
		return nil
	}
	switch {
	case callers.Audience == "":
		return errors.New("callers: audience is required when pages are configured too, so that a page token is never taken for a caller token")
	case pages.Audience == "":
		return errors.New("pages: audience is required when callers are configured too, so that a caller token is never taken for a page token")
	case callers.Audience == pages.Audience:
		return fmt.Errorf("callers and pages: the audience %q is the same; each kind of token needs its own", callers.Audience)
	}
	return nil
}

// keyFileVerifier verifies tokens against the public key in a PEM file
// (PKIX "PUBLIC KEY"); the key's type decides the algorithms.
func keyFileVerifier(path string, opts identity.VerifyOptions) (*identity.Verifier, error) {
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
	v, err := identity.NewKeyVerifier(pub, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
