package caddymodule

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
)

// Callers configures how runtime callers authenticate: every call to the
// runtime endpoints carries `Authorization: Bearer <JWT>`, verified against
// exactly one of a JWKS URL, a public key file or a shared secret. The
// call's identity then comes from the token's claims, and the loopback-only
// default no longer applies.
//
// JWKSURL, KeyFile and Secret may hold Caddy placeholders such as
// {env.NAME} or {file./path}, resolved once at load; an unknown or empty
// one is a config error.
type Callers struct {
	// JWKSURL is where the caller's public keys are published: an https
	// URL (http only to a loopback host). The set is cached, fetched again
	// every 10 minutes, and on an unknown kid at most once per 30 seconds.
	JWKSURL string `json:"jwks_url,omitempty"`

	// KeyFile is a PEM file with the caller's public key (PKIX "PUBLIC
	// KEY": Ed25519, RSA of at least 2048 bits, or ECDSA).
	KeyFile string `json:"key_file,omitempty"`

	// Secret is a shared HS256/384/512 secret of at least 32 bytes.
	Secret string `json:"secret,omitempty"`

	// Issuer, when set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`

	// Audience, when set, must be among the token's aud. Required when
	// pages are configured too, and different from theirs, so that a page
	// token is never taken for a caller token.
	Audience string `json:"audience,omitempty"`

	// Leeway allows for clock skew on exp and nbf; at most 5m.
	// Default: 30s.
	Leeway caddy.Duration `json:"leeway,omitempty"`

	// UserClaim names the claim holding the user. Default: sub.
	UserClaim string `json:"user_claim,omitempty"`

	// InstallClaim names the claim holding the installation.
	// Default: install.
	InstallClaim string `json:"install_claim,omitempty"`
}

// DefaultLeeway is the clock skew allowed on caller tokens.
const DefaultLeeway = 30 * time.Second

// MaxLeeway bounds the configured leeway: an expired token is not
// accepted for longer than that.
const MaxLeeway = 5 * time.Minute

// verifier builds the caller-token verifier. refuse is the page tokens'
// audience, which a caller token must not name.
func (c *Callers) verifier(repl *caddy.Replacer, logger *zap.Logger, refuse string) (*identity.Verifier, error) {
	n := 0
	for _, s := range []string{c.JWKSURL, c.KeyFile, c.Secret} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("callers: set exactly one of jwks_url, key_file and secret")
	}
	if c.Leeway < 0 || time.Duration(c.Leeway) > MaxLeeway {
		return nil, fmt.Errorf("callers: leeway %v must be between 0 and %v", time.Duration(c.Leeway), MaxLeeway)
	}
	opts := identity.VerifyOptions{Issuer: c.Issuer, Audience: c.Audience, Leeway: time.Duration(c.Leeway)}
	if c.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if refuse != "" {
		opts.RefuseAudiences = []string{refuse}
	}
	switch {
	case c.JWKSURL != "":
		jwksURL, err := resolve(repl, "callers: jwks_url", c.JWKSURL)
		if err != nil {
			return nil, err
		}
		if err := checkJWKSURL(jwksURL); err != nil {
			return nil, fmt.Errorf("callers: jwks_url: %w", err)
		}
		return identity.NewJWKSVerifier(identity.NewRemoteKeySet(jwksURL, nil, logger), opts), nil
	case c.KeyFile != "":
		path, err := resolve(repl, "callers: key_file", c.KeyFile)
		if err != nil {
			return nil, err
		}
		v, err := keyFileVerifier(path, opts)
		if err != nil {
			return nil, fmt.Errorf("callers: %w", err)
		}
		return v, nil
	default:
		secret, err := resolve(repl, "callers: secret", c.Secret)
		if err != nil {
			return nil, err
		}
		v, err := identity.NewSecretVerifier([]byte(secret), opts)
		if err != nil {
			return nil, fmt.Errorf("callers: secret: %w", err)
		}
		return v, nil
	}
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
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q must be an https URL (http only to localhost, 127.0.0.0/8 or ::1)", raw)
}

// checkAudiences makes caller and page tokens tell apart: with both
// configured, each names its own audience, so neither kind of token is
// accepted as the other, even when both are signed with one secret.
func checkAudiences(c *Callers, p *Pages) error {
	if c == nil || p == nil {
		return nil
	}
	switch {
	case c.Audience == "":
		return errors.New("callers: audience is required when pages are configured too, so that a page token is never taken for a caller token")
	case p.Audience == "":
		return errors.New("pages: audience is required when callers are configured too, so that a caller token is never taken for a page token")
	case c.Audience == p.Audience:
		return fmt.Errorf("callers and pages: the audience %q is the same; each kind of token needs its own", c.Audience)
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

// caller is who a runtime request comes from.
type caller struct {
	identity gateway.Identity
	claims   map[string]any
	// verified is true when the identity comes from a verified token; the
	// envelope's identity is then ignored.
	verified bool
}

// authenticate checks the runtime caller. Without callers configured, only
// requests straight from this machine are accepted (loopbackRefusal). It
// writes the refusal itself and reports false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if h.verifier == nil {
		if why := h.loopbackRefusal(r); why != "" {
			writeError(w, http.StatusForbidden, "forbidden", why)
			return caller{}, false
		}
		return caller{}, true
	}
	token, ok := bearerToken(w, r, "toolgate", "caller")
	if !ok {
		return caller{}, false
	}
	claims, err := h.verifier.Verify(r.Context(), token)
	if err == nil {
		c := caller{claims: claims, verified: true}
		c.identity.User, _ = claims[h.userClaim].(string)
		c.identity.Install, _ = claims[h.installClaim].(string)
		err = h.checkTokenIdentity(c.identity)
		if err == nil {
			return c, true
		}
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="toolgate", error="invalid_token", error_description=%q`, err.Error()))
	writeError(w, http.StatusUnauthorized, "invalid_token", err.Error())
	return caller{}, false
}

// checkTokenIdentity checks the identity a verified caller token names:
// a user, and a user and installation within the gateway's bounds. A
// token that breaks them is refused (401) like a bad token: it is the
// platform's, so no envelope can fix it.
func (h *Handler) checkTokenIdentity(id gateway.Identity) error {
	if id.User == "" {
		return fmt.Errorf("the token has no string %q claim naming the user", h.userClaim)
	}
	if err := gateway.CheckIdentity(gateway.Identity{User: id.User}); err != nil {
		return fmt.Errorf("the token's %q claim cannot name a user: %v", h.userClaim, err)
	}
	if err := gateway.CheckIdentity(gateway.Identity{Install: id.Install}); err != nil {
		return fmt.Errorf("the token's %q claim cannot name an installation: %v", h.installClaim, err)
	}
	return nil
}

// bearerToken reads the token of an "Authorization: Bearer" header. Without
// one it answers 401 with a challenge for realm, naming the token required
// (what: "caller", "page").
func bearerToken(w http.ResponseWriter, r *http.Request, realm, what string) (string, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a "+what+" token is required: Authorization: Bearer <JWT>")
		return "", false
	}
	return token, true
}
